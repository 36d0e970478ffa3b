import Dispatch
import SocketCore
import Synchronization

/// Bytes each way and the rate, redrawn on one stderr line four times a second (`--progress`).
// @unchecked Sendable: the counters are atomics and the timer is only cancelled, which dispatch
// allows from any thread.
final class ProgressMeter: @unchecked Sendable {
    private let sent = Atomic<Int>(0)
    private let received = Atomic<Int>(0)
    private let started = ContinuousClock.now
    private let timer: DispatchSourceTimer

    init() {
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "tincan.progress"))
        timer.schedule(deadline: .now() + .milliseconds(250), repeating: .milliseconds(250))
        timer.setEventHandler { [weak self] in self?.draw(final: false) }
        timer.resume()
    }

    func add(sent n: Int) { sent.add(n, ordering: .relaxed) }
    func add(received n: Int) { received.add(n, ordering: .relaxed) }

    /// Draws the last figures and ends the line.
    func finish() {
        timer.cancel()
        draw(final: true)
    }

    private func draw(final: Bool) {
        let seconds = max((ContinuousClock.now - started).milliseconds / 1000, 0.001)
        let out = sent.load(ordering: .relaxed)
        let inn = received.load(ordering: .relaxed)
        var line = "\r\u{1B}[K> \(ProgressMeter.size(out))  < \(ProgressMeter.size(inn))  \(ProgressMeter.size(Int(Double(out + inn) / seconds)))/s"
        if final { line += "\n" }
        line.withUTF8 { try? Syscall.writeAll(2, UnsafeRawBufferPointer($0), isSocket: false) }
    }

    /// `1.5 MiB`, `512 B`.
    static func size(_ bytes: Int) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(bytes) B" : "\(Double(Int(value * 10)) / 10) \(units[unit])"
    }
}
