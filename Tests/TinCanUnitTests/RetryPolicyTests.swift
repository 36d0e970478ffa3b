import SocketCore
import XCTest

@testable import TinCanCLI

/// The retry schedule, pure: doubling from MIN to MAX, half fixed and half jitter, within MIN,MAX.
final class RetryPolicyTests: XCTestCase {
    func testTheDelayDoublesUpToItsCapWithHalfOfItJitter() {
        let policy = RetryPolicy(retries: 5, minimum: .seconds(1), maximum: .seconds(30))
        XCTAssertEqual(policy.delay(beforeRetry: 1, random: 0), .seconds(1), "never below MIN (it was 500 ms)")
        XCTAssertEqual(policy.delay(beforeRetry: 1, random: 1), .seconds(1))
        XCTAssertEqual(policy.delay(beforeRetry: 2, random: 0), .seconds(1), "base 2 s: 1 fixed, 0 of jitter")
        for n in 1...40 {
            for random in [0, 0.3, 0.999] {
                XCTAssertTrue((Duration.seconds(1)...Duration.seconds(30)).contains(policy.delay(beforeRetry: n, random: random)), "retry \(n) within MIN,MAX")
            }
        }
        XCTAssertEqual(policy.delay(beforeRetry: 3, random: 0.5), .seconds(3), "base 4 s: 2 fixed + 1 of jitter")
        XCTAssertEqual(policy.delay(beforeRetry: 6, random: 0), .seconds(15), "capped at 30 s")
        XCTAssertEqual(policy.delay(beforeRetry: 1_000, random: 1), .seconds(30), "no overflow however many")
        XCTAssertTrue(policy.allows(5))
        XCTAssertFalse(policy.allows(6))
        XCTAssertTrue(RetryPolicy(retries: nil, minimum: .seconds(1), maximum: .seconds(1)).allows(1_000_000))
    }

    func testWhichFailuresAreRetried() {
        XCTAssertTrue(RetryPolicy.isRetryable(CommandError("refused")))
        XCTAssertTrue(RetryPolicy.isRetryable(CommandError("timed out", code: .timeout)))
        XCTAssertTrue(RetryPolicy.isRetryable(CommandError("proxy: unreachable", code: .proxyTargetUnreachable)))
        XCTAssertFalse(RetryPolicy.isRetryable(CommandError("certificate", code: .tlsVerification)))
        XCTAssertFalse(RetryPolicy.isRetryable(CommandError("credentials", code: .proxyAuthentication)))
        XCTAssertFalse(RetryPolicy.isRetryable(CommandError("refused the target", code: .proxyRefused)))
    }

    func testParsing() throws {
        func parse(_ line: String) throws -> RetryPolicy? {
            guard case .run(let parsed) = try Parser.parse(line.split(separator: " ").map(String.init)) else { throw UsageError("not a run") }
            return RetryPolicy.parse(parsed, option: .retry)
        }
        XCTAssertEqual(try parse("connect --retry 3 h 1"), RetryPolicy(retries: 3, minimum: .seconds(1), maximum: .seconds(30)))
        XCTAssertEqual(try parse("connect --retry forever --retry-delay 200ms h 1"), RetryPolicy(retries: nil, minimum: .milliseconds(200), maximum: .seconds(30)))
        XCTAssertEqual(try parse("connect --retry 1 --retry-delay 1m,2m h 1")?.maximum, .seconds(120))
        for bad in [
            "connect --retry 0 h 1", "connect --retry -1 h 1", "connect --retry 3 --retry-delay 2s,1s h 1", "connect --retry 3 --retry-delay 0s h 1",
            "connect --retry-delay 1s h 1",
        ] {
            XCTAssertThrowsError(try parse(bad), bad)
        }
    }
}
