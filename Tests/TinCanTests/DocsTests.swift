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

    /// docs/ending.md prints the end-of-stream rules: the same rows as the code's table.
    func testTheGuidesEndOfStreamTableIsTheRules() throws {
        let guide = try String(contentsOf: root.appendingPathComponent("docs/ending.md"), encoding: .utf8)
        for rule in SessionRules.table {
            XCTAssertTrue(guide.contains("\n| \(rule.event) | \(rule.action) | \(rule.exit) |\n"), "docs/ending.md lacks the row for '\(rule.event)'")
        }
    }

    /// The README is a newcomer's page (at most 300 lines: the set-up, ten things to try, the
    /// translation table, who can reach what, exit codes, speed); the guides are pages of their
    /// own, each linked from it, each linking back, and each relative link leads to a file.
    func testTheReadmeIsShortAndItsGuidesAreWhole() throws {
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        XCTAssertLessThanOrEqual(readme.split(separator: "\n", omittingEmptySubsequences: false).count, 300, "the README outgrew a newcomer's page")
        let guides = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path).filter { $0.hasSuffix(".md") }.sorted()
        XCTAssertFalse(guides.isEmpty)
        for guide in guides {
            XCTAssertTrue(readme.contains("](docs/\(guide))"), "the README links docs/\(guide)")
            let text = try String(contentsOf: root.appendingPathComponent("docs/\(guide)"), encoding: .utf8)
            XCTAssertTrue(text.contains("](../README.md)"), "docs/\(guide) links back")
            for (page, base) in [(text, "docs"), (readme, ".")] {
                for link in DocsTests.relativeLinks(page) {
                    let path = root.appendingPathComponent(base).appendingPathComponent(link).standardized.path
                    XCTAssertTrue(FileManager.default.fileExists(atPath: path), "\(base == "." ? "README" : guide): \(link) leads nowhere")
                }
            }
        }
    }

    /// Every `tincan ...` line the README and the guides show in a shell block is a command
    /// line the parser takes (options that exist, go together, and have values of their kind).
    func testEveryCommandTheDocsShowParses() throws {
        let pages =
            ["README.md"] + (try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path).filter { $0.hasSuffix(".md") }.map { "docs/\($0)" })
        var checked = 0
        for page in pages {
            let text = try String(contentsOf: root.appendingPathComponent(page), encoding: .utf8)
            for block in text.components(separatedBy: "```sh\n").dropFirst().compactMap({ $0.components(separatedBy: "\n```").first }) {
                // Continued lines joined; comments, pipes, redirections and `&` cut off.
                for line in block.replacingOccurrences(of: "\\\n", with: " ").split(separator: "\n") {
                    guard let start = line.range(of: "tincan "), line[..<start.lowerBound].allSatisfy({ " |(&;".contains($0) }) || line[..<start.lowerBound].hasSuffix("| ") else {
                        continue
                    }
                    var command = String(line[start.upperBound...])
                    for cut in [" #", " |", " >", " <", " &", " 2>", ";"] { if let range = command.range(of: cut) { command = String(command[..<range.lowerBound]) } }
                    let words = DocsTests.words(command)
                    guard !words.isEmpty, !words.contains(where: { $0.hasPrefix("$") || $0.contains("...") }) else { continue }
                    do { _ = try Parser.parse(words) } catch { XCTFail("\(page): 'tincan \(command)' does not parse: \(error)") }
                    checked += 1
                }
            }
        }
        XCTAssertGreaterThan(checked, 30, "the docs show commands")
    }

    /// The relative links of a Markdown page (not http:, not #anchors).
    private static func relativeLinks(_ text: String) -> [String] {
        text.components(separatedBy: "](").dropFirst().compactMap { rest in
            guard let end = rest.firstIndex(of: ")") else { return nil }
            let link = String(rest[..<end]).components(separatedBy: "#")[0]
            return link.isEmpty || link.hasPrefix("http") ? nil : link
        }
    }

    /// Shell words, single and double quotes kept together.
    private static func words(_ line: String) -> [String] {
        var words: [String] = []
        var current = ""
        var quote: Character?
        var inWord = false
        for character in line {
            if let open = quote {
                if character == open { quote = nil } else { current.append(character) }
            } else if character == "'" || character == "\"" {
                quote = character
                inWord = true
            } else if character == " " {
                if inWord { words.append(current) }
                current = ""
                inWord = false
            } else {
                current.append(character)
                inWord = true
            }
        }
        if inWord { words.append(current) }
        return words
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
