/// Telnet's command bytes (RFC 854) and the options tincan speaks of: the window size framing
/// of `--raw`/`--pty` (NAWS, RFC 1073) and RFC 2217's COM port control share them.
enum Telnet {
    /// Interpret As Command: starts every command; doubled, it is a data byte 255.
    static let iac: UInt8 = 255
    static let will: UInt8 = 251
    static let wont: UInt8 = 252
    static let `do`: UInt8 = 253
    static let dont: UInt8 = 254
    /// Subnegotiation begins, and ends.
    static let sb: UInt8 = 250
    static let se: UInt8 = 240

    static let binary: UInt8 = 0
    static let echo: UInt8 = 1
    static let suppressGoAhead: UInt8 = 3
    /// Negotiate About Window Size (RFC 1073).
    static let naws: UInt8 = 31
    /// COM Port Control (RFC 2217).
    static let comPort: UInt8 = 44
}
