/// The user names and passwords a proxy server accepts (`--proxy-auth`, `--proxy-auth-file`),
/// checked in constant time: how long a check takes does not tell how much of a guess was right.
///
/// ```swift
/// let users = try ProxyUsers(lines: "alice:s3cret\nbob:hunter2\n", source: "users.txt")
/// users.accepts(user: "alice", password: "s3cret")  // true
/// ```
public struct ProxyUsers: Sendable, Equatable {
    /// Each user and password, as bytes.
    private let entries: [(user: [UInt8], password: [UInt8])]

    /// These credentials.
    public init(_ credentials: [ProxyCredentials]) {
        entries = credentials.map { (Array($0.user.utf8), Array($0.password.utf8)) }
    }

    /// One `user:password` a line (the first colon splits them); blank lines and lines starting
    /// with `#` are skipped. Throws the line number and what is wrong with it (never the line).
    public init(lines text: String, source: String) throws(ProxyUsersError) {
        self.init(try ProxyUsers.credentials(lines: text, source: source))
    }

    /// The entries of a file of one `user:password` a line, as ``init(lines:source:)`` reads it.
    public static func credentials(lines text: String, source: String) throws(ProxyUsersError) -> [ProxyCredentials] {
        var credentials: [ProxyCredentials] = []
        var number = 0
        // "\r\n" is one Character in Swift: split on any line break.
        for line in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            number += 1
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let colon = line.firstIndex(of: ":") else {
                throw ProxyUsersError(source: source, line: number, reason: "no ':' between the user name and the password")
            }
            let entry = ProxyCredentials(user: String(line[..<colon]), password: String(line[line.index(after: colon)...]))
            if let problem = ProxyUsers.problem(entry) { throw ProxyUsersError(source: source, line: number, reason: problem) }
            credentials.append(entry)
        }
        guard !credentials.isEmpty else { throw ProxyUsersError(source: source, line: nil, reason: "it names no user") }
        return credentials
    }

    /// What keeps `credentials` from being usable (RFC 1929: each of user name and password is
    /// 1-255 bytes), or nil.
    public static func problem(_ credentials: ProxyCredentials) -> String? {
        let user = credentials.user.utf8.count
        let password = credentials.password.utf8.count
        if user == 0 || user > 255 { return "the user name is \(user) bytes; it must be 1-255" }
        if password == 0 || password > 255 { return "the password is \(password) bytes; it must be 1-255" }
        return nil
    }

    /// How many users there are.
    public var count: Int { entries.count }

    /// Whether `user` with `password` is one of the entries. Every entry is compared, each in
    /// time that depends only on the lengths, so the time taken reveals no prefix.
    public func accepts(user: [UInt8], password: [UInt8]) -> Bool {
        var found = false
        for entry in entries {
            let userMatches = ProxyUsers.equal(entry.user, user)
            let passwordMatches = ProxyUsers.equal(entry.password, password)
            if userMatches && passwordMatches { found = true }
        }
        return found
    }

    /// ``accepts(user:password:)`` for strings.
    public func accepts(user: String, password: String) -> Bool { accepts(user: Array(user.utf8), password: Array(password.utf8)) }

    /// Equal bytes, compared without an early exit.
    private static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(truncatingIfNeeded: a.count ^ b.count) | (a.count == b.count ? 0 : 1)
        for index in 0..<max(a.count, b.count) {
            let x = index < a.count ? a[index] : 0
            let y = index < b.count ? b[index] : 0
            difference |= x ^ y
        }
        return difference == 0
    }

    public static func == (lhs: ProxyUsers, rhs: ProxyUsers) -> Bool {
        lhs.entries.count == rhs.entries.count && zip(lhs.entries, rhs.entries).allSatisfy { $0.user == $1.user && $0.password == $1.password }
    }
}

/// A credentials file that cannot be used: where, and why (never the secret itself).
public struct ProxyUsersError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file as named.
    public let source: String
    /// The line at fault (1-based), when one is.
    public let line: Int?
    /// What is wrong.
    public let reason: String

    /// A problem with `source`, at `line` when one is at fault.
    public init(source: String, line: Int?, reason: String) {
        self.source = source
        self.line = line
        self.reason = reason
    }

    public var description: String { "\(source)\(line.map { ":\($0)" } ?? ""): \(reason)" }
}
