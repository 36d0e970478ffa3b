#if canImport(XCTest)
    import Foundation

    /// A directory of a test's own under the system's temporary directory, named for the test
    /// and this process (so parallel runs never share one), removed by ``remove()`` (call it in
    /// tearDown or a defer).
    public final class TemporaryDirectory: @unchecked Sendable {
        public let path: String

        public init(_ name: String) throws {
            path = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-\(name)-\(getpid())-\(UUID().uuidString.prefix(8))").path
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        }

        /// The path of `name` inside it.
        public func file(_ name: String) -> String { "\(path)/\(name)" }

        /// A file of it, as text ("" if none).
        public func text(_ name: String) -> String { (try? String(contentsOfFile: file(name), encoding: .utf8)) ?? "" }

        public func remove() { try? FileManager.default.removeItem(atPath: path) }
    }
#endif
