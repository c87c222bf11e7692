import CloudSyncPipeline
import CloudSyncRunner
import Foundation

/// When a served pipeline runs next: its schedule's slots, each delayed by its jitter, and the one missed slot a
/// `catchUp` schedule runs at start.
///
/// Pure arithmetic on dates, so the service's timing is tested without waiting.
package struct SlotPlanner: Sendable {
    /// One run the schedule asks for.
    package struct Due: Sendable, Equatable {
        /// The slot the schedule names (what lag is measured from).
        package var slot: Date
        /// When the run should start: the slot plus its jitter, or now for a caught-up slot.
        package var start: Date
    }

    package let schedule: PipelineSchedule
    /// Seeds the jitter, so every host serving the pipeline delays a slot by the same amount.
    package let pipeline: String

    package init(schedule: PipelineSchedule, pipeline: String) {
        self.schedule = schedule
        self.pipeline = pipeline
    }

    /// The first slot after `date`, with its start.
    package func next(after date: Date) -> Due? {
        guard let slot = schedule.next(after: date) else { return nil }
        return Due(slot: slot, start: slot.addingTimeInterval(Double(jitterMilliseconds(for: slot)) / 1000))
    }

    /// The slot to run at once when the service starts at `now`: with `catchUp`, the latest slot after the last run's
    /// start (`lastRun`) that is already past; nil when nothing was missed, the schedule does not catch up, or the
    /// pipeline never ran (nothing is known to be missed).
    package func missed(lastRun: Date?, now: Date) -> Due? {
        guard schedule.catchUp, let lastRun, var slot = schedule.next(after: lastRun), slot <= now else { return nil }
        // Only the latest: a service down for a week runs a daily pipeline once, not seven times.
        while let later = schedule.next(after: slot), later <= now { slot = later }
        return Due(slot: slot, start: now)
    }

    /// The jitter of `slot`: a number of milliseconds up to the schedule's jitter, the same on every host.
    func jitterMilliseconds(for slot: Date) -> Int64 {
        guard schedule.jitterMilliseconds > 0 else { return 0 }
        // FNV-1a over the pipeline's name and the slot's millisecond.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        let millisecond = Int64((slot.timeIntervalSince1970 * 1000).rounded())
        for byte in Array(pipeline.utf8) + withUnsafeBytes(of: millisecond.littleEndian, Array.init) {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return Int64(hash % UInt64(schedule.jitterMilliseconds + 1))
    }
}
