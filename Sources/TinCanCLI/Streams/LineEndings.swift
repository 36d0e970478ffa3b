/// Turns LF into CRLF on the way out (`--crlf`), leaving existing CRLF alone, across chunk
/// boundaries. Writes into a buffer it owns, so the hot path does not allocate.
struct CRLFEncoder: ~Copyable {
    private let output: UnsafeMutableRawBufferPointer
    private var lastWasCR = false

    /// For chunks of at most `chunkSize` bytes.
    init(chunkSize: Int) {
        output = .allocate(byteCount: chunkSize * 2, alignment: 16)
    }

    deinit { output.deallocate() }

    /// The encoded chunk, valid until the next call.
    mutating func encode(_ input: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        var count = 0
        for byte in input {
            if byte == 10 && !lastWasCR {
                output[count] = 13
                count += 1
            }
            output[count] = byte
            count += 1
            lastWasCR = byte == 13
        }
        return UnsafeRawBufferPointer(rebasing: output[0..<count])
    }
}
