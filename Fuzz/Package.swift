// swift-tools-version: 6.2
// libFuzzer targets for tincan's parsers, one per parser: `Fuzz/run` builds them with libFuzzer
// and AddressSanitizer (and says why its flags look as they do). A package of its own, so the fuzzing flags never
// reach the main build. Each target's seeds are in corpus/<target>/, its dictionary (where the
// input has keywords) in dict/<target>.dict.
import PackageDescription

let names = [
    "options", "addresses", "starttls", "read-request", "expect", "escapes", "port-list", "proxy", "proxy-server", "proxy-protocol", "websocket", "websocket-handshake",
    "window-size", "http-body", "capture", "dtls", "com-port",
]

let package = Package(
    name: "tincan-fuzz",
    dependencies: [.package(name: "main", path: "..")],
    targets: names.map { name in
        .executableTarget(
            name: "fuzz-\(name)",
            dependencies: [.product(name: "TinCanCLI", package: "main"), .product(name: "SocketCore", package: "main")],
            swiftSettings: [.unsafeFlags(["-parse-as-library"])]
        )
    }
)
