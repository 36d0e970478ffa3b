extension Array where Element == String {
    /// The strings with `separator` between them: what `joined(separator:)` gives, without its
    /// cost at first use.
    ///
    /// The standard library's `joined(separator:)` is not specialised for `[String]`: its first
    /// call looks up the collection's associated types by mangled name, which checks a protocol
    /// conformance by scanning every conformance record in the executable, a noticeable share of
    /// a short run's start-up. This one is concrete: nothing is looked up at run time. Use it on
    /// the paths a short run takes (messages, traces, per-event output).
    package func joined(by separator: String) -> String {
        var text = ""
        for (index, part) in enumerated() {
            if index > 0 { text += separator }
            text += part
        }
        return text
    }
}
