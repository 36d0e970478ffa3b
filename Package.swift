// swift-tools-version:6.2
import PackageDescription

// Warnings are errors everywhere: the build is clean or it fails.
let strict: [SwiftSetting] = [.treatAllWarnings(as: .error)]

let package = Package(
    name: "tincan",
    products: [
        .executable(name: "tincan", targets: ["tincan"]),
        .library(name: "SocketCore", targets: ["SocketCore"]),
        .library(name: "TinCanCLI", targets: ["TinCanCLI"]),
    ],
    targets: [
        // The system OpenSSL (libssl-dev), plus static inline wrappers for its macros.
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        // The few Linux calls Glibc's module does not import (they need _GNU_SOURCE)
        // and the cmsg/ip_mreq helpers. The public header includes no system header.
        .target(name: "CSystem"),
        .target(
            name: "SocketCore",
            dependencies: ["CSystem", "COpenSSL"],
            swiftSettings: strict
        ),
        // The CLI: option table, subcommands, stdin/stdout streams. A library so its pure parts
        // (the parser, the generators) are unit-tested; `tincan` is only its entry point.
        .target(
            name: "TinCanCLI",
            dependencies: ["SocketCore"],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "tincan",
            dependencies: ["TinCanCLI"],
            swiftSettings: strict
        ),
        // Helpers shared by the test targets (e.g. running a test inside a network namespace).
        .target(
            name: "TestSupport",
            path: "Tests/TestSupport",
            swiftSettings: strict
        ),
        .testTarget(
            name: "SocketCoreTests",
            dependencies: ["SocketCore", "COpenSSL", "TestSupport"],
            swiftSettings: strict
        ),
        // End-to-end: runs the built `tincan` binary (the dependency makes sure it is built).
        .testTarget(
            name: "TinCanTests",
            dependencies: ["TinCanCLI", "tincan", "SocketCore", "TestSupport"],
            swiftSettings: strict
        ),
    ]
)
