import SocketCore
import XCTest

@testable import TinCanCLI

final class ParserTests: XCTestCase {
    private func parse(_ line: String) throws -> ParsedArguments {
        let words = line.split(separator: " ").map(String.init)
        guard case .run(let parsed) = try Parser.parse(words) else { throw UsageError("not a run") }
        return parsed
    }

    private func error(_ line: String) -> String {
        do {
            _ = try Parser.parse(line.split(separator: " ").map(String.init))
            return "no error"
        } catch {
            return error.description
        }
    }

    func testBundlesAttachedValuesAndLongForms() throws {
        let p = try parse("connect -4vv -w5 --idle-timeout=2s -q 500ms host 80")
        XCTAssertTrue(p.has(.ipv4))
        XCTAssertEqual(p.count(.verbose), 2)
        XCTAssertEqual(p.duration(.wait), .seconds(5))
        XCTAssertNil(p.duration(.connectTimeout))
        XCTAssertEqual(p.duration(.idleTimeout), .seconds(2))
        XCTAssertEqual(p.duration(.quitAfterEof), .milliseconds(500))
        XCTAssertEqual(p.positionals, ["host", "80"])
        let q = try parse("connect --connect-timeout 1m host 80")
        XCTAssertEqual(q.duration(.connectTimeout), .seconds(60))
    }

    /// Every value is decoded by its kind when the line is parsed; commands read the decoded value.
    func testValuesAreDecodedWhenParsed() throws {
        let p = try parse("connect --retry forever --retry-delay 200ms,5s --tls --attempt-delay 150ms h 80")
        guard case .retries(nil)? = p.decoded(.retry) else { return XCTFail("\(String(describing: p.decoded(.retry)))") }
        guard case .delays(.milliseconds(200), .seconds(5))? = p.decoded(.retryDelay) else { return XCTFail("delays") }
        XCTAssertEqual(p.duration(.attemptDelay), .milliseconds(150))
        let listen = try parse("listen --forward [::1]:http --allow 10.0.0.0/8,::1 --allow 192.0.2.0/24 9")
        guard case .endpoint("::1", 80)? = listen.decoded(.forward) else { return XCTFail("\(String(describing: listen.decoded(.forward)))") }
        XCTAssertEqual(listen.cidrs(.allow).map(\.description), ["10.0.0.0/8", "::1/128", "192.0.2.0/24"])
        guard case .windowSize(let size)? = try parse("listen --pty --pty-size 132x43 --exec /bin/sh 9").decoded(.ptySize) else { return XCTFail("size") }
        XCTAssertEqual([size.columns, size.rows], [132, 43])
        guard case .escape(0x1d)? = try parse("connect --raw --escape ^] h 1").decoded(.escape) else { return XCTFail("escape") }
        for (line, says) in [
            ("connect --retry 0 h 1", "bad --retry '0': give a number of retries (1 or more) or 'forever'"),
            ("connect --reconnect x h 1", "bad --reconnect 'x': give a number of reconnects (1 or more) or 'forever'"),
            ("connect --retry 1 --retry-delay 2s,1s h 1", "bad --retry-delay '2s,1s': give MIN or MIN,MAX"),
            ("connect --attempt-delay 50ms h 1", "--attempt-delay 50ms: give 100ms to 2s"),
            ("listen --pty --pty-size 80 --exec /bin/sh 9", "--pty-size '80': give COLUMNSxROWS"),
            ("listen --forward host 9", "missing PORT after 'host'"),
            ("listen --allow 10.0.0.0/33 9", "--allow: "),
        ] {
            XCTAssertTrue(error(line).contains(says), "\(line): \(error(line))")
        }
    }

    /// An optional value is taken only after '=': `--keepalive host 80` keeps host as HOST.
    func testAnOptionalValueIsTakenOnlyAfterEquals() throws {
        let bare = try parse("connect --keepalive host 80")
        XCTAssertEqual(bare.positionals, ["host", "80"])
        XCTAssertEqual(bare.keepalive(.keepalive), Keepalive())
        let given = try parse("connect --keepalive=60s,10s,5 host 80")
        XCTAssertEqual(given.keepalive(.keepalive), Keepalive(idle: 60, interval: 10, count: 5))
        XCTAssertEqual(try parse("listen --keepalive=,2s 80").keepalive(.keepalive), Keepalive(interval: 2))
        XCTAssertTrue(error("connect --keepalive=1s,2s,3,4 host 80").contains("give IDLE[,INTERVAL[,COUNT]]"))
        XCTAssertTrue(error("connect --keepalive=500ms host 80").contains("whole seconds"))
        XCTAssertTrue(error("connect --keepalive=1s,1s,0 host 80").contains("probe count is 1 to 127"))
        XCTAssertEqual(OptionTable.command(named: "connect")?.option(long: "keepalive")?.signature, "    --keepalive[=IDLE[,INTERVAL[,COUNT]]]")
    }

    /// An optional choice takes the next argument when it is one of its words, and only then.
    func testAnOptionalChoiceTakesTheNextArgumentOnlyWhenItIsOneOfItsWords() throws {
        XCTAssertEqual(try parse("listen --accept-proxy-protocol v2 8080").value(.acceptProxyProtocol), "v2")
        XCTAssertEqual(try parse("listen --accept-proxy-protocol v2 8080").positionals, ["8080"])
        XCTAssertEqual(try parse("listen --accept-proxy-protocol=v1 8080").value(.acceptProxyProtocol), "v1")
        let bare = try parse("listen --accept-proxy-protocol 127.0.0.1 8080")
        XCTAssertEqual(bare.value(.acceptProxyProtocol), "")
        XCTAssertEqual(bare.positionals, ["127.0.0.1", "8080"])
        XCTAssertTrue(error("listen --accept-proxy-protocol=v3 8080").contains("v3"))
    }

    /// The typed names and the table agree: every name is some command's option, and every
    /// command runs from its own table row.
    func testEveryOptionNameBelongsToTheTable() {
        let used = Set((OptionTable.commands.flatMap(\.options) + OptionTable.global).map(\.name))
        XCTAssertEqual(used, Set(Option.allCases))
        for option in Option.allCases { XCTAssertEqual(Option(rawValue: option.rawValue), option) }
    }

    func testEveryCommandIsFoundByItsNameAndOnlyThose() {
        for spec in OptionTable.commands {
            XCTAssertEqual(OptionTable.command(named: spec.name)?.name, spec.name)
        }
        XCTAssertNil(OptionTable.command(named: "connec"))
        XCTAssertNil(OptionTable.command(named: "help"))
    }

    func testDoubleDashEndsOptions() throws {
        let p = try parse("connect -v -- -weird-host 80")
        XCTAssertEqual(p.positionals, ["-weird-host", "80"])
        XCTAssertEqual(p.count(.verbose), 1)
    }

    func testRepeatableAccumulatesAndOthersTakeTheLast() throws {
        let p = try parse("listen --allow 10.0.0.0/8,127.0.0.1 --allow ::1 9000")
        XCTAssertEqual(p.list(.allow), ["10.0.0.0/8", "127.0.0.1", "::1"])
        let q = try parse("connect -w 1 -w 3 h 1")
        XCTAssertEqual(q.duration(.wait), .seconds(3))
    }

    func testDurations() throws {
        XCTAssertEqual(try Parser.duration("250ms"), .milliseconds(250))
        XCTAssertEqual(try Parser.duration("1.5"), .milliseconds(1500))
        XCTAssertEqual(try Parser.duration("2m"), .seconds(120))
        XCTAssertEqual(try Parser.duration("1h"), .seconds(3600))
        XCTAssertEqual(try Parser.duration("100us"), .microseconds(100))
        XCTAssertThrowsError(try Parser.duration("5x"))
        XCTAssertThrowsError(try Parser.duration("ms"))
        XCTAssertThrowsError(try Parser.duration("-1s"))
    }

    func testMistakesSayWhatAndWhereAndWhatToTry() {
        XCTAssertEqual(
            error("connect --verbos h 1"),
            "tincan: connect: unknown option '--verbos'; did you mean '--verbose'? (see 'tincan connect --help')")
        XCTAssertEqual(error("conect h 1"), "tincan: unknown command 'conect'; did you mean 'connect'? (see 'tincan --help')")
        XCTAssertEqual(error("connect -y h 1"), "tincan: connect: unknown option '-y' (see 'tincan connect --help')")
        XCTAssertEqual(
            error("connect --keep-open h 1"),
            "tincan: connect: unknown option '--keep-open'; --keep-open is an option of 'tincan listen' (see 'tincan connect --help')")
        XCTAssertEqual(error("connect -w"), "tincan: connect: option -w needs a value (DURATION) (see 'tincan connect --help')")
        XCTAssertEqual(error("connect --crlf=yes h 1"), "tincan: connect: option --crlf takes no value (see 'tincan connect --help')")
        XCTAssertEqual(
            error("listen -m 0 9000"),
            "tincan: listen: --max-conns needs a whole number from 1 to 100000, not '0' (see 'tincan listen --help')")
        XCTAssertTrue(error("listen --deny 10.0.0.0/33 9000").contains("prefix length must be 0-32"))
        XCTAssertTrue(error("--bogus").contains("options come after the command"))
        XCTAssertTrue(error("").contains("a command is needed"))
    }

    func testHelpForms() throws {
        guard case .help(nil) = try Parser.parse(["--help"]) else { return XCTFail() }
        guard case .help(let spec?) = try Parser.parse(["help", "listen"]), spec.name == "listen" else { return XCTFail() }
        guard case .help(let c?) = try Parser.parse(["connect", "-h"]), c.name == "connect" else { return XCTFail() }
        guard case .version = try Parser.parse(["--version"]) else { return XCTFail() }
        XCTAssertTrue(HelpText.command(OptionTable.listen).contains("tincan listen -k 9000 --exec /bin/cat"))
        XCTAssertTrue(HelpText.main().contains("exit codes:"))
    }

    func testEditDistance() {
        XCTAssertEqual(Parser.editDistance("verbos", "verbose"), 1)
        XCTAssertEqual(Parser.editDistance("", "abc"), 3)
        XCTAssertEqual(Parser.editDistance("abc", ""), 3)
        XCTAssertNil(Parser.closest(to: "zzzzzz", among: ["verbose", "hex"]))
    }
}

/// nc, ncat and socat habits land on the tincan way to say it.
final class NetcatHabitsTests: XCTestCase {
    private func error(_ arguments: [String]) -> String? {
        do {
            _ = try Parser.parse(arguments)
            return nil
        } catch {
            return error.description
        }
    }

    /// Every row of the table shows where it is meant to, and only where the option is unknown
    /// (a row for an option a command has would never be seen).
    func testEveryHabitInTheTableGivesItsHint() {
        for habit in NetcatHabits.table {
            let commands = habit.commands ?? OptionTable.commands.map(\.name)
            var shown = 0
            for name in commands {
                let spec = OptionTable.command(named: name)!
                let known =
                    habit.option.hasPrefix("--")
                    ? spec.option(long: String(habit.option.dropFirst(2))) != nil
                    : spec.option(short: habit.option.last!) != nil
                if known {
                    if habit.commands != nil { XCTFail("\(habit.option) is an option of \(name): its row is never seen there") }
                    continue
                }
                let message = error([name, habit.option, "x", "y"])
                XCTAssertEqual(message?.contains("unknown option '\(habit.option)': \(habit.hint)"), true, "\(name) \(habit.option): \(message ?? "parsed")")
                shown += 1
            }
            XCTAssertGreaterThan(shown, 0, "\(habit.option) is shown nowhere")
        }
    }

    func testNcCommandLinesAreTranslated() {
        let cases: [([String], String)] = [
            (["-l", "1234"], "tincan listen 1234"),
            (["-lvnp", "4444"], "tincan listen -v 4444"),
            (["-lvkp", "4444"], "tincan listen -v -k 4444"),
            (["-l", "-p", "4444", "-e", "/bin/cat"], "tincan listen --exec /bin/cat 4444"),
            (["-lu", "5000"], "tincan udp-recv 5000"),
            (["-vz", "db.test", "20-25"], "tincan connect -v -z db.test 20-25"),
            (["-u", "198.18.0.1", "53"], "tincan udp-send 198.18.0.1 53"),
            (["-w", "3", "-p", "4000", "example.test", "80"], "tincan connect -s :4000 -w 3 example.test 80"),
            (["example.test", "80"], "tincan connect example.test 80"),
            (["example.test:443"], "tincan connect example.test:443"),
        ]
        for (arguments, meant) in cases {
            let message = error(arguments)
            XCTAssertEqual(message?.contains("did you mean '\(meant)'?"), true, "\(arguments): \(message ?? "parsed")")
            XCTAssertEqual(message?.filter { $0 == "\n" }.count, 0)
        }
        // A typo of a command is still a typo, and a lone word is not a host.
        XCTAssertEqual(error(["conect", "h", "1"])?.contains("did you mean 'connect'?"), true)
        XCTAssertEqual(error(["frobnicate"])?.contains("the commands are"), true)
    }
}
