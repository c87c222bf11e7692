import CloudSync
import Testing

@Suite struct JitterTests {
    /// 20,000 draws spread over ten equal bins: each holds 2,000 ± 1.7 % on average, so the ±20 % bounds fail only for
    /// a broken generator (a stuck state, a wrong shift), never by chance.
    @Test func drawsStayInTheUnitIntervalAndSpreadEvenly() {
        var bins = [Int](repeating: 0, count: 10)
        var previous = -1.0
        var repeats = 0
        for _ in 0..<20_000 {
            let draw = Jitter.next()
            #expect(draw >= 0 && draw < 1)
            bins[min(Int(draw * 10), 9)] += 1
            if draw == previous { repeats += 1 }
            previous = draw
        }
        #expect(bins.allSatisfy { (1600...2400).contains($0) }, "\(bins)")
        #expect(repeats == 0)
    }

    @Test func theOutboxBackoffSpreadsItsWaitsBetweenHalfAndAllOfTheStep() {
        let backoff = Outbox.Backoff(base: .seconds(2))
        let waits = (0..<1000).map { _ in backoff.delayMilliseconds(afterAttempts: 3) }
        #expect(waits.allSatisfy { (4000...8000).contains($0) })
        #expect(Set(waits).count > 500, "waits spread, not one value")
    }
}
