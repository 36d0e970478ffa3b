import Foundation
import XCTest

/// The release as its users meet it. scripts/package's .deb passes lintian, installs with dpkg
/// (its dependencies checked against this machine's libc6 and libssl3) into a throwaway root,
/// puts each file where man, bash-completion, zsh and fish look, and leaves nothing behind
/// when removed; its archive unpacks with the line its INSTALL gives and runs. scripts/docs
/// builds SocketCore's reference, every public symbol documented.
///
/// The package is made from the release binary scripts/build made (the test command builds it
/// first): the one users get, its Swift runtime linked in.
final class PackageTests: XCTestCase {
    private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    private var scratch = ""

    override func setUpWithError() throws {
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-package-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: scratch)
    }

    /// `command` through bash, with `environment` over this process's own.
    private func shell(_ command: String, environment: [String: String] = [:], timeout: Duration = .seconds(120)) throws -> (status: Int32, out: String, err: String) {
        let merged = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        return try Tool.run(["-c", command], timeout: timeout, environment: merged, program: "/bin/bash")
    }

    /// scripts/package's files for this run, made once for the class (a few seconds each
    /// time): their folder and the version. XCTest runs a class's tests one after another.
    nonisolated(unsafe) private static var made: (dist: String, version: String)?

    override class func tearDown() {
        if let made { try? FileManager.default.removeItem(atPath: (made.dist as NSString).deletingLastPathComponent) }
        made = nil
    }

    /// The release files, made from the release binary; a skip without one (a failure in CI,
    /// whose test command builds it first).
    private func package() throws -> (dist: String, version: String) {
        if let made = Self.made { return made }
        let binary = root.appendingPathComponent(".build/release/tincan").path
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            let why = "no release binary at \(binary): run scripts/build --product tincan first (scripts/test does)"
            if ProcessInfo.processInfo.environment["CI"] == "true" {
                XCTFail(why)
                throw XCTSkip("failed")
            }
            throw XCTSkip(why)
        }
        let version = try XCTUnwrap(try Tool.run(["--version"], program: binary).out.split(separator: "\n").first?.split(separator: " ").last.map(String.init))
        let dist = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-dist-\(getpid())-\(UInt32.random(in: 0...UInt32.max))/dist").path
        let packaged = try shell("\(root.path)/scripts/package", environment: ["TINCAN_BIN": binary, "OUT": dist])
        guard packaged.status == 0 else {
            XCTFail("scripts/package exited \(packaged.status): \(packaged.err)")
            throw XCTSkip("failed")
        }
        Self.made = (dist, version)
        return (dist, version)
    }

    func testTheDebianPackagePassesLintianInstallsAndRemovesCleanly() throws {
        let (dist, version) = try package()
        let deb = dist + "/tincan_\(version)_amd64.deb"
        XCTAssertTrue(FileManager.default.fileExists(atPath: deb), deb)
        XCTAssertTrue(FileManager.default.fileExists(atPath: dist + "/tincan-\(version).debug"))
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        XCTAssertTrue(readme.contains("dist/tincan_\(version)_amd64.deb"), "the README's Install section names this version's package")

        // lintian: no error, no warning (information tags are allowed: see the closing note).
        let lint = try shell("lintian --fail-on error,warning '\(deb)'")
        XCTAssertEqual(lint.status, 0, lint.out + lint.err)
        XCTAssertFalse(lint.out.contains("E: ") || lint.out.contains("W: "), lint.out)

        // dpkg into a root of its own, whose database knows only this machine's libc6 and
        // libssl3: the Depends line must be met by them, not forced.
        let target = scratch + "/root"
        let installed = try shell(
            """
            set -e
            mkdir -p '\(target)/var/lib/dpkg/info' '\(target)/var/lib/dpkg/updates'
            touch '\(target)/var/lib/dpkg/available'
            dpkg-query -s libc6 libssl3 > '\(target)/var/lib/dpkg/status'
            dpkg --root='\(target)' -i '\(deb)'
            dpkg --root='\(target)' -s tincan | grep '^Status:'
            """)
        XCTAssertEqual(installed.status, 0, installed.out + installed.err)
        XCTAssertTrue(installed.out.contains("Status: install ok installed"), installed.out)
        XCTAssertFalse(installed.err.contains("dependency problems"), installed.err)

        let run = try Tool.run(["--version"], program: target + "/usr/bin/tincan")
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertTrue(run.out.hasPrefix("tincan \(version)\n"), "the package's version is the binary's: \(run.out)")
        XCTAssertTrue(run.out.contains("\nopenssl: OpenSSL 3"), run.out)
        let stripped = try shell("file '\(target)/usr/bin/tincan'")
        XCTAssertTrue(stripped.out.contains(", stripped"), stripped.out)

        let page = try shell("MANPATH='\(target)/usr/share/man' man -w tincan-connect")
        XCTAssertEqual(page.out.trimmingCharacters(in: .whitespacesAndNewlines), target + "/usr/share/man/man1/tincan-connect.1.gz", page.err)
        let rendered = try shell("MANWIDTH=80 MANPATH='\(target)/usr/share/man' man --warnings tincan-listen 2>&1 >/dev/null")
        XCTAssertEqual(rendered.out, "", "man renders the packaged page without warnings")

        // Each shell finds the completion where the package put it: bash-completion's loader
        // through XDG_DATA_DIRS, zsh's compinit through the vendor-completions folder in its
        // default fpath, fish through the vendor folder in its fish_complete_path.
        let bash = try shell(
            """
            source /usr/share/bash-completion/bash_completion
            XDG_DATA_DIRS='\(target)/usr/share'
            if declare -F _comp_load > /dev/null; then _comp_load tincan; else __load_completion tincan; fi
            complete -p tincan
            """)
        XCTAssertTrue(bash.out.contains("complete -F _tincan tincan"), bash.out + bash.err)
        let zshPath = try shell("zsh -fc 'print -l $fpath'").out.split(separator: "\n").map(String.init)
        XCTAssertTrue(zshPath.contains("/usr/share/zsh/vendor-completions"), "zsh looks there: \(zshPath)")
        let zsh = try shell("zsh -fc 'fpath=(\(target)/usr/share/zsh/vendor-completions $fpath); autoload -Uz compinit; compinit -u -D; print -r -- $_comps[tincan]'")
        XCTAssertEqual(zsh.out, "_tincan\n", zsh.err)
        let fishPath = try shell("fish -c 'printf \"%s\\n\" $fish_complete_path'").out.split(separator: "\n").map(String.init)
        XCTAssertTrue(fishPath.contains("/usr/share/fish/vendor_completions.d"), "fish looks there: \(fishPath)")
        let fish = try shell(
            "fish -c 'set -p fish_complete_path \(target)/usr/share/fish/vendor_completions.d; complete -C\"tincan con\"'",
            environment: ["PATH": target + "/usr/bin:" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")])
        XCTAssertTrue(fish.out.hasPrefix("connect\t"), fish.out + fish.err)

        // dpkg -r leaves nothing of the package: no file, and none of the folders it made.
        let removed = try shell("dpkg --root='\(target)' -r tincan")
        XCTAssertEqual(removed.status, 0, removed.err)
        let left = (FileManager.default.enumerator(atPath: target)?.allObjects as? [String] ?? []).filter { !$0.hasPrefix("var") }.sorted()
        XCTAssertEqual(left, [], "dpkg -r left these behind")
    }

    func testTheArchiveUnpacksWithItsInstallLineAndRuns() throws {
        let (dist, version) = try package()
        let name = "tincan-\(version)-linux-x86_64"
        let archive = dist + "/\(name).tar.gz"
        // The install line of its INSTALL, into a prefix of ours, without sudo.
        let listing = try shell("tar -xzOf '\(archive)' \(name)/INSTALL")
        let line = try XCTUnwrap(listing.out.split(separator: "\n").first { $0.contains("tar -xzf") }, listing.out)
        let prefix = scratch + "/prefix"
        try FileManager.default.createDirectory(atPath: prefix, withIntermediateDirectories: true)
        let command = line.trimmingCharacters(in: .whitespaces)
            .replacingOccurrences(of: "sudo ", with: "").replacingOccurrences(of: "/usr/local", with: "'\(prefix)'")
        let unpacked = try shell("cd '\(dist)' && \(command)")
        XCTAssertEqual(unpacked.status, 0, "\(command): \(unpacked.err)")
        let files = (FileManager.default.enumerator(atPath: prefix)?.allObjects as? [String] ?? []).filter {
            var directory: ObjCBool = false
            return FileManager.default.fileExists(atPath: prefix + "/" + $0, isDirectory: &directory) && !directory.boolValue
        }.sorted()
        XCTAssertEqual(
            files,
            [
                "bin/tincan", "share/bash-completion/completions/tincan", "share/fish/vendor_completions.d/tincan.fish",
                "share/man/man1/tincan-connect.1", "share/man/man1/tincan-join-group.1", "share/man/man1/tincan-listen.1",
                "share/man/man1/tincan-tls.1", "share/man/man1/tincan-udp-recv.1", "share/man/man1/tincan-udp-send.1",
                "share/man/man1/tincan-ws.1", "share/man/man1/tincan.1", "share/zsh/site-functions/_tincan",
            ])
        // It needs no Swift runtime: only what every glibc system has.
        let libraries = try shell("ldd '\(prefix)/bin/tincan'")
        XCTAssertFalse(libraries.out.contains("swift") || libraries.out.contains("not found") || libraries.out.contains("libstdc++"), libraries.out)
        let run = try Tool.run(["--version"], program: prefix + "/bin/tincan")
        XCTAssertTrue(run.out.hasPrefix("tincan \(version)\n"), run.out + run.err)
        // And it works: a line over loopback, through the unpacked binary on both ends.
        let listener = try Tool(["listen", "127.0.0.1", "0", "-v"], program: prefix + "/bin/tincan")
        defer { listener.stop() }
        listener.closeInput()
        waitUntil("the listener's port") { listener.stderrText.contains("listening on 127.0.0.1:") }
        let port = try XCTUnwrap(listener.stderrText.split(separator: ":").last.flatMap { Int($0.prefix { $0.isNumber }) })
        let sent = try Tool.run(["connect", "127.0.0.1", String(port)], input: "from the archive\n", program: prefix + "/bin/tincan")
        XCTAssertEqual(sent.status, 0, sent.err)
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
        XCTAssertEqual(listener.stdoutText, "from the archive\n")
    }

    func testSocketCoresReferenceBuildsWithEveryPublicSymbolDocumented() throws {
        let modules = URL(fileURLWithPath: Tool.tincan).deletingLastPathComponent().appendingPathComponent("Modules").path
        let checked = try shell("\(root.path)/scripts/docs --check", environment: ["MODULES": modules])
        XCTAssertEqual(checked.status, 0, checked.err)
        let built = try shell("\(root.path)/scripts/docs", environment: ["MODULES": modules, "OUT": scratch + "/docs"])
        XCTAssertEqual(built.status, 0, built.err)
        let data = scratch + "/docs/SocketCore.doccarchive/data/documentation"
        for page in ["socketcore.json", "socketcore/asyncsocket.json", "socketcore/asyncudpsocket.json", "socketcore/happyeyeballs.json"] {
            XCTAssertTrue(FileManager.default.fileExists(atPath: data + "/" + page), page)
        }
        // An article per road, and the README's overview on the landing page.
        for article in ["connecting", "accepting", "securingwithtls", "sendingdatagrams", "connectingthroughproxies"] {
            XCTAssertTrue(FileManager.default.fileExists(atPath: data + "/socketcore/\(article).json"), article)
        }
        let landing = (try? String(contentsOfFile: data + "/socketcore.json", encoding: .utf8)) ?? ""
        XCTAssertTrue(landing.contains("The road of a connection"), "the landing page has the README's overview")
        XCTAssertTrue(FileManager.default.fileExists(atPath: scratch + "/docs/SocketCore.doccarchive/index.html"))
    }
}
