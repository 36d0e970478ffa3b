// swift-tools-version: 6.2
// libFuzzer targets for tincan's parsers: `Fuzz/run` builds them with `--sanitize=fuzzer`.
// A package of its own, so the fuzzing flags never reach the main build.
import PackageDescription

let package = Package(
    name: "tincan-fuzz",
    dependencies: [.package(name: "main", path: "..")],
    targets: [
        .executableTarget(
            name: "fuzz-inputs",
            dependencies: [.product(name: "TinCanCLI", package: "main"), .product(name: "SocketCore", package: "main")],
            swiftSettings: [.unsafeFlags(["-parse-as-library"])]
        ),
    ]
)
