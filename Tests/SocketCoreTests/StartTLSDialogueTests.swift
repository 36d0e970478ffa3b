import SocketCore
import XCTest

/// The STARTTLS dialogues as pure machines: fed replies by hand, no sockets.
final class StartTLSDialogueTests: XCTestCase {
    private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

    func testSMTPMultilineGreetingAndCapabilities() {
        var d = StartTLSDialogue(.smtp, host: "mx.test")
        XCTAssertEqual(d.start(), [.readLine])
        XCTAssertEqual(d.received(bytes("220-mx.test ESMTP\r\n")), [.readLine])
        XCTAssertEqual(d.received(bytes("220 ready\r\n")), [.send(bytes("EHLO mx.test\r\n")), .readLine])
        XCTAssertEqual(d.received(bytes("250-mx.test\r\n")), [.readLine])
        XCTAssertEqual(d.received(bytes("250-STARTTLS\r\n")), [.readLine])
        XCTAssertEqual(d.received(bytes("250 SIZE 1000\r\n")), [.send(bytes("STARTTLS\r\n")), .readLine])
        XCTAssertEqual(d.received(bytes("220 go\r\n")), [.startTLS])
    }

    func testSMTPWithoutStartTLSAndLMTPVerb() {
        var d = StartTLSDialogue(.lmtp, host: "h")
        _ = d.start()
        XCTAssertEqual(d.received(bytes("220 lmtp\r\n")), [.send(bytes("LHLO h\r\n")), .readLine])
        XCTAssertEqual(
            d.received(bytes("250 PIPELINING\r\n")),
            [.fail("the server does not offer STARTTLS; its LHLO reply ended \"250 PIPELINING\"")])
        var bad = StartTLSDialogue(.smtp, host: "h")
        _ = bad.start()
        XCTAssertEqual(bad.received(bytes("554 go away\r\n")), [.fail("the server's greeting was not 220: \"554 go away\"")])
    }

    func testIMAPSkipsUntaggedLinesAndChecksCapability() {
        var d = StartTLSDialogue(.imap, host: "h")
        _ = d.start()
        XCTAssertEqual(d.received(bytes("* OK ready\r\n")), [.send(bytes("t1 CAPABILITY\r\n")), .readLine])
        XCTAssertEqual(d.received(bytes("* CAPABILITY IMAP4rev1 STARTTLS\r\n")), [.readLine])
        XCTAssertEqual(d.received(bytes("t1 OK done\r\n")), [.send(bytes("t2 STARTTLS\r\n")), .readLine])
        XCTAssertEqual(d.received(bytes("t2 OK go\r\n")), [.startTLS])
    }

    func testBinaryProtocols() {
        var ldap = StartTLSDialogue(.ldap, host: "h")
        guard case .send(let request) = ldap.start().first else { return XCTFail() }
        XCTAssertEqual(request.count, 31)
        XCTAssertEqual(Array(request.prefix(2)), [0x30, 29])
        XCTAssertEqual(ldap.received([0x30, 0x0C]), [.readLength(12)])
        XCTAssertEqual(ldap.received([0x02, 0x01, 0x01, 0x78, 0x07, 0x0A, 0x01, 0x00, 0x04, 0x00, 0x04, 0x00]), [.startTLS])
        var refused = StartTLSDialogue(.ldap, host: "h")
        _ = refused.start()
        _ = refused.received([0x30, 0x0C])
        XCTAssertEqual(
            refused.received([0x02, 0x01, 0x01, 0x78, 0x07, 0x0A, 0x01, 0x35, 0x04, 0x00, 0x04, 0x00]),
            [.fail("the server refused StartTLS with LDAP result code 53 (unwillingToPerform)")])
        // slapd without TLS: unavailable, its diagnostic quoted; a long reply has a long-form length.
        let message = Array(String(repeating: "no TLS here; ", count: 12).utf8)
        let fields: [UInt8] = [0x0A, 0x01, 52, 0x04, 0x00, 0x04, 0x81, UInt8(message.count)] + message
        let body: [UInt8] = [0x02, 0x01, 0x01, 0x78, 0x81, UInt8(fields.count)] + fields
        var slapd = StartTLSDialogue(.ldap, host: "h")
        _ = slapd.start()
        XCTAssertEqual(slapd.received([0x30, 0x81]), [.readLength(1)])
        XCTAssertEqual(slapd.received([UInt8(body.count)]), [.readLength(body.count)])
        XCTAssertEqual(
            slapd.received(body),
            [.fail("the server refused StartTLS with LDAP result code 52 (unavailable): \"\(String(decoding: message, as: UTF8.self))\"")])

        var pg = StartTLSDialogue(.postgres, host: "h")
        XCTAssertEqual(pg.start(), [.send([0, 0, 0, 8, 0x04, 0xD2, 0x16, 0x2F]), .readLength(1)])
        XCTAssertEqual(pg.received([UInt8(ascii: "S")]), [.startTLS])

        var mysql = StartTLSDialogue(.mysql, host: "h")
        XCTAssertEqual(mysql.start(), [.readLength(4)])
        XCTAssertEqual(mysql.received([5, 0, 0, 0]), [.readLength(5)])
        // Version 10, "8\0", thread id, 8 bytes of salt, filler, capabilities 0x0800 (SSL).
        let handshake: [UInt8] = [10, UInt8(ascii: "8"), 0, 1, 0, 0, 0] + Array(repeating: 0x41, count: 8) + [0, 0x00, 0x08]
        var m2 = StartTLSDialogue(.mysql, host: "h")
        _ = m2.start()
        _ = m2.received([UInt8(handshake.count), 0, 0, 0])
        let actions = m2.received(handshake)
        XCTAssertEqual(actions.last, .startTLS)
        guard case .send(let sslRequest) = actions.first else { return XCTFail("\(actions)") }
        XCTAssertEqual(Array(sslRequest.prefix(4)), [32, 0, 0, 1], "32-byte payload, sequence 1")
        XCTAssertEqual(sslRequest[5] & 0x08, 0x08, "CLIENT_SSL set")
    }

    func testIRCWaitsThroughNoticesForTheAnswer() {
        var d = StartTLSDialogue(.irc, host: "h")
        XCTAssertEqual(d.start(), [.send(bytes("STARTTLS\r\n")), .readLine])
        XCTAssertEqual(d.received(bytes(":irc NOTICE * :hello\r\n")), [.readLine])
        XCTAssertEqual(d.received(bytes(":irc 670 * :go ahead\r\n")), [.startTLS])
    }

    /// XMPP is read tag by tag: the features, or a stream error the server ends with, quoted
    /// (its condition and its text).
    func testXMPPQuotesAStreamError() {
        var d = StartTLSDialogue(.xmpp, host: "wrong.example")
        guard case .send(let header) = d.start().first else { return XCTFail() }
        XCTAssertTrue(String(decoding: header, as: UTF8.self).contains("to='wrong.example'"))
        let reply =
            "<?xml version='1.0'?><stream:stream xmlns='jabber:client' id='x' version='1.0'>"
            + "<stream:error><host-unknown xmlns='urn:ietf:params:xml:ns:xmpp-streams'/>"
            + "<text xmlns='urn:ietf:params:xml:ns:xmpp-streams'>This server does not serve wrong.example</text></stream:error>"
        var actions: [StartTLSDialogue.Action] = []
        for tag in reply.split(separator: ">", omittingEmptySubsequences: false).dropLast() {
            actions = d.received(bytes(tag + ">"))
            if case .fail = actions.first { break }
            XCTAssertEqual(actions, [.readUntil(bytes(">"))])
        }
        XCTAssertEqual(actions, [.fail("the server ended the XMPP stream: host-unknown (\"This server does not serve wrong.example\")")])

        var ok = StartTLSDialogue(.xmpp, host: "h")
        _ = ok.start()
        _ = ok.received(bytes("<stream:stream id='y'>"))
        _ = ok.received(bytes("<stream:features>"))
        _ = ok.received(bytes("<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'>"))
        XCTAssertEqual(
            ok.received(bytes("</starttls></stream:features>")),
            [.send(bytes("<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>")), .readUntil(bytes(">"))])
        XCTAssertEqual(ok.received(bytes("<proceed xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>")), [.startTLS])
    }
}
