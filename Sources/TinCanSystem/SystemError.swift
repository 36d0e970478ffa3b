import Glibc

/// A failed system call: which call, on what, and the `errno` it left.
///
/// Every syscall in SocketCore goes through ``Syscall``, which turns `-1` into this error, so the
/// rest of the code never reads `errno`.
///
/// ```swift
/// do { try Syscall.connect(fd, to: address) }
/// catch let error as SystemError where error.errno == ECONNREFUSED { print(error) }
/// // connect(127.0.0.1:9): Connection refused
/// ```
public struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The `errno` value the call left.
    public let errno: Int32
    /// The call's name, e.g. `"connect"`.
    public let call: String
    /// What the call was acting on, e.g. an address or a path; empty when there is nothing to say.
    public let context: String

    /// Creates an error for `call` on `context` with the given errno value.
    public init(errno: Int32, call: String, context: String = "") {
        self.errno = errno
        self.call = call
        self.context = context
    }

    /// Set for a connect that the caller's own rules refused (``BlockingConnector/admits``).
    public private(set) var isRefusedByRules = false

    /// A connect to `address` that the caller's rules refused, never attempted: EACCES, said as
    /// "not allowed by the destination rules".
    public static func refusedByRules(_ address: String) -> SystemError {
        var error = SystemError(errno: EACCES, call: "connect", context: address)
        error.isRefusedByRules = true
        return error
    }

    /// Why the call was refused by a check of our own rather than by the kernel (a file tincan
    /// will not write: a symbolic link, another user's file), said instead of errno's text.
    public private(set) var explanation: String?

    /// A refusal of our own: `errno` for the record, `explanation` for people.
    package static func refused(_ call: String, _ context: String, errno: Int32, _ explanation: String) -> SystemError {
        var error = SystemError(errno: errno, call: call, context: context)
        error.explanation = explanation
        return error
    }

    /// The C library's text for ``errno``, e.g. `"Connection refused"`.
    public var reason: String {
        explanation ?? (isRefusedByRules ? "Not allowed by the destination rules" : SystemError.describe(errno: errno))
    }

    /// ``reason`` for use mid-sentence: `"connection refused"`.
    public var lowercaseReason: String { reason.lowercasedFirst }

    public var description: String {
        context.isEmpty ? "\(call): \(reason)" : "\(call)(\(context)): \(reason)"
    }

    /// The `errno` a C library left after a call made on our descriptor behind our back (OpenSSL's
    /// socket BIO calls read(2) and write(2) itself); nil when it is 0.
    package static func left(by call: String) -> SystemError? {
        let code = Glibc.errno
        return code == 0 ? nil : SystemError(errno: code, call: call)
    }

    /// Clears `errno` before such a call, so ``left(by:)`` reports only what the call set.
    package static func clearErrno() { Glibc.errno = 0 }

    /// The C library's text for an errno value.
    public static func describe(errno code: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        // Swift imports the XSI strerror_r: 0 on success, the text in `buffer`.
        return buffer.withUnsafeMutableBufferPointer { b in
            strerror_r(code, b.baseAddress!, b.count) == 0 ? String(cString: b.baseAddress!) : "errno \(code)"
        }
    }
}

extension String {
    /// "Connection refused" -> "connection refused", for reasons placed mid-sentence.
    package var lowercasedFirst: String {
        guard let first else { return self }
        return first.lowercased() + String(dropFirst())  // String + String: no generic append at run time
    }
}

extension Duration {
    /// This duration in (fractional) milliseconds.
    public var milliseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) * 1000 + Double(attoseconds) / 1e15
    }
}
