import XCTest

@testable import TinCanCLI

/// The table's rules, checked by the parser: which options go together, without running tincan.
final class OptionRuleTests: XCTestCase {
    /// The usage error's line for `line`, or "ok" when it parses.
    private func verdict(_ line: String) -> String {
        do {
            _ = try Parser.parse(line.split(separator: " ").map(String.init))
            return "ok"
        } catch {
            return error.message
        }
    }

    func testExclusivePairsNameBothOptionsAsGiven() {
        XCTAssertEqual(verdict("connect -4 -6 h 80"), "-4 and -6 exclude each other")
        XCTAssertEqual(verdict("udp-recv -6 -4 9"), "-4 and -6 exclude each other")
        XCTAssertEqual(verdict("connect --prefer-ipv6 --prefer-ipv4 h 80"), "--prefer-ipv4 and --prefer-ipv6 exclude each other")
        XCTAssertEqual(verdict("listen --forward h:1 --forward-unix /s 9"), "--forward and --forward-unix name one upstream: give one")
        XCTAssertEqual(verdict("udp-send --lines -m x h 9"), "--lines and --message exclude each other")
        XCTAssertEqual(verdict("ws --binary --jsonl ws://h/"), "--binary and --jsonl are two ways to frame messages: give one")
    }

    func testAModeTakesOnlyItsOwnOptions() {
        XCTAssertEqual(verdict("connect -u --tls-min 1.3 --tls h 80"), "--tls-min is for TCP: not with -u")
        XCTAssertEqual(verdict("connect -u --starttls smtp --tls h 80"), "--starttls is for TCP: not with -u")
        XCTAssertEqual(verdict("connect -u --lines --format hex h 80"), "ok")
        XCTAssertEqual(verdict("listen -u --ws 9"), "--ws is for TCP: not with -u")
        XCTAssertEqual(verdict("listen -u -k --exec /bin/cat 9"), "ok")
        XCTAssertEqual(verdict("connect -z -u --tls h 80"), "-z -u sends one datagram per port: it does not take --tls")
        XCTAssertEqual(verdict("connect -z --send x h 80"), "-z only connects: it does not take --send")
        XCTAssertEqual(verdict("connect -z -u --send x h 80"), "ok")
        XCTAssertEqual(verdict("connect -u --retry 3 h 80"), "--retry retries a stream connection: not with -u")
        XCTAssertEqual(verdict("connect -z --reconnect 3 h 80"), "--reconnect retries a stream connection: not with -z")
    }

    func testDTLSTakesItsOptionsOnlyOverUDPWithTLS() {
        XCTAssertEqual(verdict("connect -u --tls --psk 0102 --mtu 1280 --handshake-timeout 5s h 80"), "ok")
        XCTAssertEqual(verdict("connect --tls --psk 0102 h 443"), "--psk is for DTLS: add -u and --tls")
        XCTAssertEqual(verdict("connect -u --mtu 1280 h 80"), "--mtu is for DTLS: add -u and --tls")
        XCTAssertEqual(verdict("connect -u --tls --psk-identity x h 80"), "--psk-identity needs --psk")
        XCTAssertEqual(verdict("connect -u --tls --unix /s"), "DTLS (-u --tls) runs over UDP: not with --unix")
        XCTAssertEqual(verdict("listen -u -k --tls --psk 0102 --exec /bin/cat 9"), "ok")
        XCTAssertEqual(verdict("listen -u --tls --cert c --key k --require-client-cert --ca c 9"), "ok")
        XCTAssertEqual(verdict("listen -u -k --forward h:53 9"), "ok")
        XCTAssertEqual(verdict("listen -u --forward h:53 9"), "--forward with -u relays each peer to an upstream of its own: add -k")
        XCTAssertEqual(verdict("listen -u -k --forward h:53 --forward-tls --forward-insecure --mtu 1280 9"), "ok")
        XCTAssertEqual(verdict("listen -u -k --forward h:53 --lines 9"), "--lines is for stdin and stdout: each peer is relayed to its upstream")
        XCTAssertEqual(verdict("listen -u -k --psk 0102 9"), "--psk is for DTLS: add -u and --tls")
    }

    func testAnOptionThatNeedsAnotherSaysWhich() {
        XCTAssertEqual(verdict("connect --ca x h 443"), "--ca needs --tls")
        XCTAssertEqual(verdict("connect --tls --ca x h 443"), "ok")
        XCTAssertEqual(verdict("tls --ca x h 443"), "ok")
        XCTAssertEqual(verdict("connect --parallel 5 h 80"), "--parallel needs -z")
        XCTAssertEqual(verdict("connect --proxy socks5h://p:1080 --unix /s"), "a proxy connects to a host and port: not with --unix")
        XCTAssertEqual(verdict("connect -x p:1080 --unix /s"), "a proxy connects to a host and port: not with --unix")
        XCTAssertEqual(verdict("connect --pty h 80"), "--pty runs the program of --exec or --sh-exec on a terminal: give the program (e.g. --exec '/bin/bash -i')")
        XCTAssertEqual(verdict("listen --pty-size 80x24 9"), "--pty-size sets the terminal of --pty: add --pty")
        XCTAssertEqual(verdict("listen --forward-ca x --forward h:1 9"), "--forward-ca needs --forward-tls")
        XCTAssertEqual(
            verdict("listen --open 9"),
            "--open is for a listener that runs a program or carries traffic onward, or opens a device (the others listen on every address given, or all)")
        XCTAssertEqual(verdict("listen --proxy-auth a:b 9"), "--proxy-auth is for a proxy server: add --socks5 or --http-proxy")
        XCTAssertEqual(verdict("connect --retry-delay 1s h 80"), "--retry-delay needs --retry (or --forward-retry, --reconnect)")
        XCTAssertEqual(verdict("ws --ping-timeout 1s ws://h/"), "--ping-timeout counts from a ping: give --ping-interval too")
    }

    func testAConditionOnAValue() {
        XCTAssertEqual(verdict("connect --tls --starttls smtp --xmpphost d h 25"), "--xmpphost is for --starttls xmpp")
        XCTAssertEqual(verdict("connect --tls --starttls xmpp --xmpphost d h 5222"), "ok")
    }

    /// --chunk cuts datagrams with -u and binary messages with --ws (then it needs --binary).
    func testOneOptionUnderTwoModes() {
        XCTAssertEqual(verdict("listen --chunk 5 9"), "--chunk is for datagrams: add -u")
        XCTAssertEqual(verdict("listen -u --chunk 5 9"), "ok")
        XCTAssertEqual(verdict("listen --ws --chunk 5 9"), "--chunk and --whole cut stdin into binary messages: add --binary")
        XCTAssertEqual(verdict("listen --ws --binary --chunk 5 9"), "ok")
        XCTAssertEqual(verdict("listen --ws --binary --chunk 5 --whole 9"), "--chunk and --whole exclude each other")
    }

    func testTheErrorNamesTheOptionThatMadeTheRuleApply() {
        XCTAssertEqual(verdict("listen --chat --exec /bin/cat 9"), "--chat joins clients to one another: not with --exec")
        XCTAssertEqual(verdict("listen --http-proxy --forward h:1 9"), "--http-proxy takes each client's upstream from its request: not with --forward")
        XCTAssertEqual(verdict("listen --socks5 --http-proxy 9"), "ok")
        XCTAssertEqual(verdict("connect --json --hex h 80"), "--hex writes text on stderr: not with --json, which keeps stderr to JSON lines")
        XCTAssertEqual(verdict("connect --unix /s --keepalive"), "--keepalive is for TCP connections: not with --unix")
        XCTAssertEqual(verdict("listen --broker --send x 9"), "--send talks to one connection: not with --broker")
    }

    func testSendTimeoutIsForTheHubOnly() {
        XCTAssertEqual(verdict("listen -k --send-timeout 1s 9"), "ok")
        XCTAssertEqual(verdict("listen --broker --send-timeout 1s 9"), "ok")
        let hub = "--send-timeout is for the hub of -k, --broker and --chat (a program or a relay takes each client's bytes itself)"
        XCTAssertEqual(verdict("listen --send-timeout 1s 9"), hub)
        XCTAssertEqual(verdict("listen -k --exec /bin/cat --send-timeout 1s 9"), hub)
    }

    /// Help is shown whatever else the line holds.
    func testHelpComesBeforeTheRules() throws {
        guard case .help = try Parser.parse(["connect", "-4", "-6", "--help"]) else { return XCTFail("not help") }
    }

    /// A mode's own options are options of its command, so the mode can be reached with each.
    func testModeSetsAreOptionsOfTheirCommand() {
        for (mode, command) in [(OptionTable.connectDatagramMode, OptionTable.connect), (OptionTable.listenDatagramMode, OptionTable.listen)] {
            for option in mode { XCTAssertTrue(command.takes(option), "\(command.name) does not take --\(option.rawValue)") }
        }
    }

    /// No rule of a command is about options the command does not take at all.
    func testEveryRuleConcernsItsCommand() {
        for command in OptionTable.commands {
            for rule in command.rules {
                if case .takesOnly = rule.demand { continue }
                XCTAssertTrue(rule.options.contains(where: command.takes), "\(command.name): a rule on \(rule.options) that it does not take")
            }
        }
    }
}
