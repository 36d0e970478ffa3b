/// Finding text in text, compared as UTF-8 bytes: what `contains(_:)`, `firstRange(of:)` and
/// `replacing(_:with:)` of the `_StringProcessing` module do, kept here because calling those
/// links that module and the regex parser beneath it (9 000 symbols, 36 KB of data the loader
/// relocates at every start). The texts searched are protocol words and option names, where
/// bytes are the right comparison; `scripts/test` fails the build if `_StringProcessing` is
/// referenced again.
extension Substring {
    /// The range of the first occurrence of `other`, or nil (an empty `other` is found at once).
    package func textRange(of other: some StringProtocol) -> Range<String.Index>? {
        let needle = Array(other.utf8)
        guard let first = needle.first else { return startIndex..<startIndex }
        var index = utf8.startIndex
        while let found = utf8[index...].firstIndex(of: first) {
            if utf8[found...].starts(with: needle) { return found..<utf8.index(found, offsetBy: needle.count) }
            index = utf8.index(after: found)
        }
        return nil
    }

    /// Whether `other` occurs in this text.
    package func hasText(_ other: some StringProtocol) -> Bool { textRange(of: other) != nil }
}

extension String {
    /// The range of the first occurrence of `other`, or nil.
    package func textRange(of other: some StringProtocol) -> Range<String.Index>? { self[...].textRange(of: other) }

    /// Whether `other` occurs in this text.
    package func hasText(_ other: some StringProtocol) -> Bool { self[...].hasText(other) }

    /// This text with every occurrence of `target` (not empty) replaced by `replacement`.
    package func replacingText(_ target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return self }
        var result = ""
        var rest = self[...]
        while let range = rest.textRange(of: target) {
            result += rest[..<range.lowerBound]
            result += replacement
            rest = rest[range.upperBound...]
        }
        return result + rest
    }
}
