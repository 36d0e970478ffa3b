import Glibc

/// The whole text of a /proc file. (Foundation's String(contentsOfFile:) stops after the first
/// page of these files, whose size reads as 0.)
public func procText(_ path: String) -> String {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return "" }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n <= 0 { break }
        bytes += chunk[0..<n]
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// The threads process `pid` has (its /proc status), -1 if it cannot be read.
public func threadCount(of pid: Int32) -> Int {
    let line = procText("/proc/\(pid)/status").split(separator: "\n").first { $0.hasPrefix("Threads:") }
    return Int(line?.split(separator: "\t").last.map { String($0).filter(\.isNumber) } ?? "") ?? -1
}

/// The threads `pid` holds once those that served a burst (of handshakes, of announcements)
/// have gone, as dispatch lets idle ones go: at most 10 s for the count to fall under `under`.
public func threadsOnceSettled(_ pid: Int32, under: Int = 30) -> Int {
    var held = threadCount(of: pid)
    let deadline = ContinuousClock.now + .seconds(10)
    while held >= under && ContinuousClock.now < deadline {
        usleep(50_000)
        held = threadCount(of: pid)
    }
    return held
}
