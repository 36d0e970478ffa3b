import XCTest

@testable import SocketCore

final class StringJoiningTests: XCTestCase {
    func testJoinedByGivesWhatJoinedSeparatorGives() {
        let cases: [[String]] = [[], [""], ["a"], ["a", "b"], ["", "x", ""], ["connection refused", "timed out after 250 ms", "é"]]
        for parts in cases {
            for separator in ["", "; ", ","] {
                XCTAssertEqual(parts.joined(by: separator), parts.joined(separator: separator), "\(parts) with '\(separator)'")
            }
        }
    }
}
