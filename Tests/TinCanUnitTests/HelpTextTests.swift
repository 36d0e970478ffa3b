import XCTest

@testable import TinCanCLI

/// `--help` fits a screen (the most used options under their group headings, four examples,
/// only the command's exit codes), and `--help-all` has everything.
final class HelpTextTests: XCTestCase {
    func testBriefHelpGroupsTheChosenOptionsAndPointsToTheRest() {
        for spec in OptionTable.commands {
            XCTAssertTrue(spec.brief.isSubset(of: Set(spec.options.map(\.name))), "\(spec.name): brief names options it does not take")
            let text = HelpText.command(spec)
            let headings = OptionGroup.allCases.map { "\n\($0.rawValue):\n" }.filter(text.contains)
            let positions = headings.compactMap { text.range(of: $0)?.lowerBound }
            XCTAssertEqual(positions, positions.sorted(), "\(spec.name): groups in their order")
            for option in spec.options {
                XCTAssertEqual(text.contains("\n  " + option.signature), spec.brief.contains(option.name), "\(spec.name) --help and --\(option.long)")
            }
            XCTAssertEqual(text.components(separatedBy: "\n      ").count - 1 >= min(4, spec.examples.count), true)
            XCTAssertFalse(text.contains(spec.examples.dropFirst(HelpText.examplesShown).first?.command ?? "\u{0}"), "\(spec.name): four examples")
            XCTAssertTrue(text.contains("tincan \(spec.name) --help-all"), spec.name)
            XCTAssertLessThanOrEqual(text.split(separator: "\n", omittingEmptySubsequences: false).count, 82, "\(spec.name) --help is long")
            for code in ExitCode.allCases {
                XCTAssertEqual(text.contains("\n  \(String(code.rawValue).padding(2))  "), spec.exitCodes.contains(code), "\(spec.name) and exit code \(code.rawValue)")
            }
        }
    }

    func testHelpAllHasEveryOptionInFullAndEveryExample() throws {
        for spec in OptionTable.commands {
            let text = HelpText.command(spec, all: true)
            for option in spec.options { XCTAssertTrue(text.contains("--\(option.long)"), "\(spec.name) --help-all: --\(option.long)") }
            for example in spec.examples { XCTAssertTrue(text.contains(example.command), "\(spec.name) --help-all: \(example.command)") }
            XCTAssertFalse(text.contains("more: --help-all"), spec.name)
        }
        guard case .helpAll(let spec) = try Parser.parse(["listen", "--help-all"]) else { return XCTFail("not --help-all") }
        XCTAssertEqual(spec.name, "listen")
        guard case .help = try Parser.parse(["listen", "-h"]) else { return XCTFail("not --help") }
    }

    func testTheFirstSentenceEndsAtACapitalNotAtEG() {
        XCTAssertEqual(HelpText.firstSentence("Connect from here (e.g. 198.18.0.5, :4000). Then more."), "Connect from here (e.g. 198.18.0.5, :4000).")
        XCTAssertEqual(HelpText.firstSentence("One sentence only."), "One sentence only.")
        XCTAssertEqual(HelpText.oneLine("aaaa bbbb cccc dddd", room: 12), "aaaa bbbb...")
        XCTAssertEqual(HelpText.oneLine("short", room: 12), "short")
    }
}
