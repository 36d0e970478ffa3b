extension String {
    /// This text with each Unicode scalar for which `replacement` gives text replaced by it (the
    /// others kept): the one loop behind JSON strings, terminal-safe lines and roff glyphs.
    func escapingScalars(_ replacement: (Unicode.Scalar) -> String?) -> String {
        guard unicodeScalars.contains(where: { replacement($0) != nil }) else { return self }
        var out = String.UnicodeScalarView()
        for scalar in unicodeScalars {
            if let text = replacement(scalar) { out.append(contentsOf: text.unicodeScalars) } else { out.append(scalar) }
        }
        return String(out)
    }
}

extension Unicode.Scalar {
    /// The scalar's value in hex, zero-padded to `width` digits: `1b` for ESC at width 2.
    func hex(width: Int, uppercase: Bool = false) -> String {
        let digits = String(value, radix: 16, uppercase: uppercase)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}
