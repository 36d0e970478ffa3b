import Foundation
import XCTest

@testable import TinCanCLI

/// man/ and completions/ are generated from the option table: they must be current, render
/// without warnings, and parse in their shells.
final class DocsTests: XCTestCase {
    private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    func testCommittedDocsMatchTheOptionTable() throws {
        for (name, text) in ManPage.all() {
            let committed = try String(contentsOf: root.appendingPathComponent("man/\(name)"), encoding: .utf8)
            XCTAssertTrue(committed == text, "man/\(name) is stale: run 'swift run tincan --generate-docs .'")
        }
        for (name, text) in Completions.all() {
            let committed = try String(contentsOf: root.appendingPathComponent("completions/\(name)"), encoding: .utf8)
            XCTAssertTrue(committed == text, "completions/\(name) is stale: run 'swift run tincan --generate-docs .'")
        }
        let manFiles = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("man").path).sorted()
        XCTAssertEqual(manFiles, ManPage.all().map(\.name).sorted(), "man/ holds exactly the generated pages")
    }

    /// The README prints the end-of-stream rules: the same rows as the code's table.
    func testTheReadmesEndOfStreamTableIsTheRules() throws {
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        for rule in SessionRules.table {
            XCTAssertTrue(readme.contains("\n| \(rule.event) | \(rule.action) | \(rule.exit) |\n"), "README lacks the row for '\(rule.event)'")
        }
    }

    func testManPagesRenderWithoutWarnings() throws {
        for (name, text) in ManPage.all() {
            // ASCII only (glyphs as \(em, \[uXXXX]): groff reads the page the same in every locale.
            let foreign = text.unicodeScalars.filter { !$0.isASCII }
            XCTAssertTrue(foreign.isEmpty, "\(name) holds non-ASCII characters: \(String(String.UnicodeScalarView(foreign.prefix(5))))")
            let groff = try Tool(
                ["-ww", "-man", "-Tutf8", "-z", root.appendingPathComponent("man/\(name)").path], program: "/usr/bin/groff",
                environment: ["LC_ALL": "C", "PATH": "/usr/bin:/bin"])
            groff.closeInput()
            XCTAssertEqual(groff.wait(), 0, name)
            XCTAssertEqual(groff.stderrText, "", "\(name): groff -ww warns")
            let path = root.appendingPathComponent("man/\(name)").path
            let tool = try Tool(
                ["--warnings", "-l", path], program: "/usr/bin/man",
                environment: ["MANWIDTH": "80", "LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin", "MANPAGER": "cat"])
            tool.closeInput()
            XCTAssertEqual(tool.wait(), 0, name)
            XCTAssertEqual(tool.stderrText, "", "\(name) warnings")
            XCTAssertTrue(tool.stdoutText.contains("EXIT STATUS"), name)
        }
    }

    func testCompletionsParse() throws {
        for (shell, file) in [("/bin/bash", "tincan.bash"), ("/usr/bin/zsh", "_tincan"), ("/usr/bin/fish", "tincan.fish")] {
            let tool = try Tool(["-n", root.appendingPathComponent("completions/\(file)").path], program: shell)
            tool.closeInput()
            XCTAssertEqual(tool.wait(), 0, "\(shell): \(tool.stderrText)")
        }
    }

    func testBashCompletionOffersSubcommandsAndOptions() throws {
        let script = """
            source '\(root.appendingPathComponent("completions/tincan.bash").path)'
            COMP_WORDS=(tincan con); COMP_CWORD=1; _tincan; echo "${COMPREPLY[*]}"
            COMP_WORDS=(tincan listen --keep-); COMP_CWORD=2; _tincan; echo "${COMPREPLY[*]}"
            """
        let tool = try Tool(["-c", script], program: "/bin/bash")
        tool.closeInput()
        XCTAssertEqual(tool.wait(), 0, tool.stderrText)
        XCTAssertEqual(tool.stdoutText, "connect\n--keep-open\n")
    }

    func testEveryOptionIsDocumentedEverywhere() {
        for command in OptionTable.commands {
            let help = HelpText.command(command, all: true)
            let man = ManPage.command(command)
            for option in command.options {
                XCTAssertTrue(help.contains("--\(option.long)"), "help of \(command.name) lacks --\(option.long)")
                XCTAssertTrue(man.contains("\\-\\-\(option.long)"), "man page of \(command.name) lacks --\(option.long)")
                XCTAssertTrue(Completions.fish().contains("-l \(option.long)"), "fish lacks --\(option.long)")
            }
        }
    }
}
