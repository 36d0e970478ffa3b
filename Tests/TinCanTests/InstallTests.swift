import Foundation
import XCTest

/// scripts/install into a temporary DESTDIR: every file where it belongs, the man pages
/// rendering with `man -l`, each completion file parsing in its shell, the binary answering
/// --version; then --uninstall leaving nothing behind.
final class InstallTests: XCTestCase {
    private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    private func script(_ arguments: [String], destdir: String, prefix: String) throws -> (status: Int32, out: String, err: String) {
        let r = try Tool.run(
            [root.appendingPathComponent("scripts/install").path] + arguments, timeout: .seconds(60),
            environment: ["DESTDIR": destdir, "PREFIX": prefix, "TINCAN_BIN": Tool.tincan, "PATH": "/usr/local/bin:/usr/bin:/bin"],
            program: "/bin/bash")
        return (r.status, r.out, r.err)
    }

    func testInstallsEverythingUnderDestdirAndUninstallRemovesExactlyThat() throws {
        let destdir = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-install-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        defer { try? FileManager.default.removeItem(atPath: destdir) }
        // Something of the user's already there: uninstall must leave it.
        let prefix = "/opt/tincan-test"
        let base = destdir + prefix
        try FileManager.default.createDirectory(atPath: base + "/share/man/man1", withIntermediateDirectories: true)
        try "keep me".write(toFile: base + "/share/man/man1/other.1", atomically: true, encoding: .utf8)

        let installed = try script([], destdir: destdir, prefix: prefix)
        XCTAssertEqual(installed.status, 0, installed.err)
        let pages = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("man").path).filter { $0.hasSuffix(".1") }
        XCTAssertEqual(pages.count, 8, "tincan.1 and one page per command: \(pages)")
        let files =
            [
                "bin/tincan", "share/bash-completion/completions/tincan", "share/zsh/site-functions/_tincan",
                "share/fish/vendor_completions.d/tincan.fish",
            ] + pages.map { "share/man/man1/\($0)" }
        for file in files {
            XCTAssertTrue(FileManager.default.fileExists(atPath: base + "/" + file), file)
        }
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: base + "/bin/tincan"))

        let version = try Tool.run(["--version"], program: base + "/bin/tincan")
        XCTAssertEqual(version.status, 0, version.err)
        XCTAssertTrue(version.out.hasPrefix("tincan 0."), version.out)
        XCTAssertTrue(version.out.contains("\ncommit: "), version.out)
        XCTAssertTrue(version.out.contains("\nopenssl: OpenSSL 3"), version.out)

        for page in pages {
            let rendered = try Tool.run(["-l", base + "/share/man/man1/" + page], environment: ["MANWIDTH": "80", "MAN_KEEP_FORMATTING": "0"], program: "/usr/bin/man")
            XCTAssertEqual(rendered.status, 0, "\(page): \(rendered.err)")
            XCTAssertTrue(rendered.out.contains("TINCAN"), page)
            XCTAssertEqual(rendered.err, "", "\(page) renders without warnings")
        }
        for (shell, file) in [
            ("/bin/bash", "share/bash-completion/completions/tincan"), ("/usr/bin/zsh", "share/zsh/site-functions/_tincan"),
            ("/usr/bin/fish", "share/fish/vendor_completions.d/tincan.fish"),
        ] {
            let parsed = try Tool.run(["-n", base + "/" + file], program: shell)
            XCTAssertEqual(parsed.status, 0, "\(shell) -n \(file): \(parsed.err)")
        }
        // bash completion works from the installed file: the commands complete.
        let completed = try Tool.run(
            [
                "-c",
                """
                source \(base)/share/bash-completion/completions/tincan
                COMP_WORDS=(tincan u); COMP_CWORD=1; _tincan; printf '%s\\n' "${COMPREPLY[@]}"
                """,
            ], program: "/bin/bash")
        XCTAssertEqual(completed.out.split(separator: "\n").sorted(), ["udp-recv", "udp-send"], completed.err)

        let removed = try script(["--uninstall"], destdir: destdir, prefix: prefix)
        XCTAssertEqual(removed.status, 0, removed.err)
        let left = FileManager.default.enumerator(atPath: base)?.allObjects.compactMap { $0 as? String }.sorted() ?? []
        XCTAssertEqual(left, ["share", "share/man", "share/man/man1", "share/man/man1/other.1"], "only what was there before")

        let again = try script(["--uninstall"], destdir: destdir, prefix: prefix)
        XCTAssertEqual(again.status, 1)
        XCTAssertTrue(again.err.contains("nothing to remove"), again.err)
        let bad = try script(["--frobnicate"], destdir: destdir, prefix: prefix)
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.err.contains("unknown argument '--frobnicate'"), bad.err)
    }
}
