import SocketCore
import XCTest

/// The held end's rule, pure: due `delay` after the later of the end and the other way's last
/// byte.
final class EndHoldTests: XCTestCase {
    func testTheEndOrALaterByteStartsTheQuietTime() {
        let hold = EndHold(.milliseconds(500))
        XCTAssertEqual(hold.due(ended: .seconds(3), lastMoved: nil), .milliseconds(3_500), "nothing ever came back")
        XCTAssertEqual(hold.due(ended: .seconds(3), lastMoved: .seconds(1)), .milliseconds(3_500), "a byte before the end does not shorten it")
        XCTAssertEqual(hold.due(ended: .seconds(3), lastMoved: .seconds(4)), .milliseconds(4_500), "a byte after the end moves it on")
        XCTAssertEqual(EndHold(.zero).due(ended: .seconds(2), lastMoved: nil), .seconds(2))
    }
}
