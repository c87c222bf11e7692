import CloudSyncPipeline
import Foundation
import Testing

@testable import CloudSyncService

/// When a served pipeline runs: slots with their jitter, and the one missed slot `catchUp` runs at start.
struct SlotPlannerTests {
    private func every(_ seconds: Int64, jitter: Int64 = 0, catchUp: Bool = false) -> PipelineSchedule {
        PipelineSchedule(slots: .every(milliseconds: seconds * 1000), jitterMilliseconds: jitter, catchUp: catchUp)
    }

    private func at(_ seconds: Double) -> Date { Date(timeIntervalSince1970: seconds) }

    @Test func jitterStaysWithinItsBoundIsTheSameOnEveryHostAndSpreadsSlots() throws {
        let planner = SlotPlanner(schedule: every(60, jitter: 30_000), pipeline: "nightly")
        let again = SlotPlanner(schedule: every(60, jitter: 30_000), pipeline: "nightly")
        let other = SlotPlanner(schedule: every(60, jitter: 30_000), pipeline: "hourly")
        var offsets: Set<Int> = []
        var differences = 0
        var from = at(1_700_000_000)
        for _ in 0..<200 {
            let due = try #require(planner.next(after: from))
            let offset = due.start.timeIntervalSince(due.slot)
            #expect(offset >= 0 && offset <= 30, "jitter \(offset) s is outside 0...30 s")
            #expect(again.next(after: from) == due, "another host would start the slot at another time")
            if other.next(after: from)?.start != due.start { differences += 1 }
            offsets.insert(Int(offset))
            from = due.slot
        }
        // Spread over the window, not bunched: at least 20 distinct whole seconds of 31 over 200 slots.
        #expect(offsets.count >= 20, "offsets: \(offsets.sorted())")
        #expect(differences > 150, "two pipelines sharing slots start together too often")
    }

    @Test func noJitterStartsOnTheSlot() throws {
        let due = try #require(SlotPlanner(schedule: every(30), pipeline: "p").next(after: at(1_000_000_015)))
        #expect(due.slot == at(1_000_000_020))
        #expect(due.start == due.slot)
    }

    @Test func aMissedSlotRunsOnceAtStartOnlyWithCatchUp() throws {
        let now = at(1_000_000_137)
        let catching = SlotPlanner(schedule: every(10, catchUp: true), pipeline: "p")
        // Last run at 95: slots 100...130 passed; only the latest, 130, runs, and at once.
        let missed = try #require(catching.missed(lastRun: at(1_000_000_095), now: now))
        #expect(missed.slot == at(1_000_000_130))
        #expect(missed.start == now)
        // A run after the last slot: nothing was missed.
        #expect(catching.missed(lastRun: at(1_000_000_131), now: now) == nil)
        // Never ran: nothing is known to be missed.
        #expect(catching.missed(lastRun: nil, now: now) == nil)
        // Without catchUp a missed slot is left.
        #expect(
            SlotPlanner(schedule: every(10), pipeline: "p").missed(lastRun: at(1_000_000_095), now: now) == nil)
    }

    @Test func aDailyCronSlotMissedForAWeekRunsOnce() throws {
        let schedule = PipelineSchedule(
            slots: .cron(try CronExpression(parsing: "30 2 * * *"), TimeZone(identifier: "Europe/Paris")!),
            catchUp: true)
        let planner = SlotPlanner(schedule: schedule, pipeline: "nightly")
        let formatter = ISO8601DateFormatter()
        let lastRun = try #require(formatter.date(from: "2026-11-26T01:31:00Z"))
        let now = try #require(formatter.date(from: "2026-12-04T09:00:00Z"))
        let missed = try #require(planner.missed(lastRun: lastRun, now: now))
        // 02:30 in Paris on 4 December is 01:30 UTC.
        #expect(missed.slot == formatter.date(from: "2026-12-04T01:30:00Z"))
    }
}
