import CloudSync
import Foundation
import Testing

/// The listing timestamp reader against Foundation's ISO 8601 formatter, an independent implementation.
@Suite struct UTCTimestampTests {
    /// Thousands of seeded instants from 1970 to 2199, with and without fractions, read as Foundation writes them.
    @Test func readsEveryInstantAsFoundationsFormatterWritesIt() {
        let plain = ISO8601DateFormatter()
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var random = SeededRandom(seed: 58)
        for _ in 0..<5_000 {
            let milliseconds = Int64(random.next() % 7_258_118_400_000)
            let date = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
            #expect(UTCTimestamp.milliseconds(fractional.string(from: date)[...]) == milliseconds)
            #expect(UTCTimestamp.milliseconds(plain.string(from: date)[...]) == milliseconds / 1000 * 1000)
        }
    }

    /// Fractions finer than milliseconds are cut (Drive gives three digits, some servers six); shapes other than a UTC
    /// instant are not read.
    @Test func cutsFineFractionsAndRefusesOtherShapes() {
        #expect(UTCTimestamp.milliseconds("2026-12-06T23:12:50.123456Z") == 1_796_598_770_123)
        #expect(UTCTimestamp.milliseconds("2026-12-06T23:12:50.1Z") == 1_796_598_770_100)
        for text in [
            "", "2026-12-06", "2026-12-06T23:12:50+01:00", "2026-12-06T23:12:50.Z", "2026-13-06T23:12:50Z",
            "2026-12-06T24:12:50Z", "2026-12-06 23:12:50Z", "2026-12-06T23:12:5xZ", "2026-12-06T23:12:50.12aZ",
        ] {
            #expect(UTCTimestamp.milliseconds(text[...]) == nil, "\(text)")
        }
    }
}
