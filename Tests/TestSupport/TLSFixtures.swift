import Foundation

/// Where this process keeps its fixtures; removed when the process exits.
private let fixturesRoot = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-certs-\(getpid())").path

/// Certificates for TLS tests, made once per test process with the openssl CLI in a temporary
/// directory: a CA, a server certificate for localhost/127.0.0.1/::1, a client certificate, an
/// expired one and a self-signed one.
public final class TLSFixtures: Sendable {
    public static let shared = TLSFixtures()

    public let directory: String

    public func path(_ name: String) -> String { "\(directory)/\(name)" }

    private init() {
        directory = fixturesRoot
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // A static is never deinitialised: clean up when the test process exits.
        atexit { try? FileManager.default.removeItem(atPath: fixturesRoot) }
        let script = """
            set -e
            cd '\(directory)'
            key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
            key ca.key
            openssl req -x509 -key ca.key -out ca.pem -days 30 -subj "/CN=tincan test CA" 2>/dev/null
            printf 'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\\n' > san.cnf
            sign() { # name days cn
                key "$1.key"
                openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$3" 2>/dev/null
                openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -out "$1.pem" -days "$2" -extfile san.cnf 2>/dev/null
            }
            sign server 30 localhost
            sign client 30 "tincan test client"
            sign expired -1 localhost
            key self.key
            openssl req -x509 -key self.key -out self.pem -days 30 -subj "/CN=localhost" -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>/dev/null
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script]
        try? process.run()
        process.waitUntilExit()
    }
}
