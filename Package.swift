// swift-tools-version:6.2
import PackageDescription

// Warnings are errors everywhere: the build is clean or it fails.
let strict: [SwiftSetting] = [.treatAllWarnings(as: .error)]

// Release links of `tincan` search Sources/tincan/link first: two linker scripts there make the
// toolchain's `-lstdc++` and `-lgcc_s` take libstdc++.a and libgcc_eh.a (libstdc++-12-dev,
// libgcc-12-dev), so a start loads no C++ runtime (~0.6 ms of the ~2 ms start-up).
let staticRuntime = String(#filePath.dropLast("Package.swift".count)) + "Sources/tincan/link"

let package = Package(
    name: "tincan",
    products: [
        .executable(name: "tincan", targets: ["tincan"]),
        .library(name: "SocketCore", targets: ["SocketCore"]),
        .library(name: "TinCanCLI", targets: ["TinCanCLI"]),
    ],
    targets: [
        // The system OpenSSL: its headers (libssl-dev), static inline wrappers for its macros, and
        // the functions used, forwarded to libssl, which is loaded when TLS is first used
        // (loader.c) so commands without TLS do not pay for loading it.
        .target(name: "COpenSSL"),
        // The few Linux calls Glibc's module does not import (they need _GNU_SOURCE)
        // and the cmsg/ip_mreq helpers. The public header includes no system header.
        .target(name: "CSystem"),
        // zlib's raw deflate for WebSocket permessage-deflate, opened with dlopen(3) when first
        // offered; its few declarations are its own, so building needs no zlib headers.
        .target(name: "CZlib"),
        // The system layer: the only code that calls the OS (Syscall, which only this package
        // sees), and the values it speaks in (SocketAddress, Endpoint, SystemError...), which
        // SocketCore re-exports.
        .target(
            name: "TinCanSystem",
            dependencies: ["CSystem"],
            swiftSettings: strict
        ),
        .target(
            name: "SocketCore",
            dependencies: ["TinCanSystem", "CSystem", "COpenSSL", "CZlib"],
            exclude: ["README.md"],
            swiftSettings: strict
        ),
        // The CLI: option table, subcommands, stdin/stdout streams. A library so its pure parts
        // (the parser, the generators) are unit-tested; `tincan` is only its entry point.
        .target(
            name: "TinCanCLI",
            dependencies: ["SocketCore", "TinCanSystem"],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "tincan",
            dependencies: ["TinCanCLI"],
            exclude: ["link"],
            swiftSettings: strict,
            linkerSettings: [
                .unsafeFlags(
                    [
                        "-use-ld=lld", "-L", staticRuntime, "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                        // -static-stdlib exports every symbol of ours (3 100): a start's dladdr
                        // walks them and they are mapped in. Nothing looks them up by name.
                        "-Xlinker", "--no-export-dynamic",
                        // The functions a start runs, side by side (scripts/startup-order makes the list).
                        "-Xlinker", "--symbol-ordering-file=\(staticRuntime)/startup-order.txt", "-Xlinker", "--no-warn-symbol-ordering",
                    ],
                    .when(configuration: .release))
            ]
        ),
        // Helpers shared by the test targets (e.g. running a test inside a network namespace).
        .target(
            name: "TestSupport",
            path: "Tests/TestSupport",
            swiftSettings: strict
        ),
        .testTarget(
            name: "SocketCoreTests",
            dependencies: ["SocketCore", "TinCanSystem", "COpenSSL", "TestSupport"],
            swiftSettings: strict
        ),
        // The CLI's pure parts: the option parser, the end-of-stream machine, the --expect
        // matcher, scripts, transports. No tincan process runs here.
        .testTarget(
            name: "TinCanUnitTests",
            dependencies: ["TinCanCLI"],
            swiftSettings: strict
        ),
        // End-to-end: runs the built `tincan` binary (the dependency makes sure it is built).
        .testTarget(
            name: "TinCanTests",
            dependencies: ["TinCanCLI", "tincan", "SocketCore", "TinCanSystem", "TestSupport"],
            swiftSettings: strict
        ),
    ]
)
