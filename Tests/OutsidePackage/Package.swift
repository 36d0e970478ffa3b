// swift-tools-version:6.2
// A package outside tincan that depends on SocketCore as any other package would, through
// `.package(path:)`: OutsidePackageTests builds and runs it, so what the library promises is
// reachable with plain `import SocketCore` (no @testable), in Swift 6 language mode.
import PackageDescription

let package = Package(
    name: "OutsideUser",
    dependencies: [.package(name: "tincan", path: "../..")],
    targets: [
        .executableTarget(
            name: "OutsideUser",
            dependencies: [.product(name: "SocketCore", package: "tincan")],
            swiftSettings: [.treatAllWarnings(as: .error)]
        )
    ]
)
