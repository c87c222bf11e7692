import CloudSync
import CloudSyncPipeline

extension PipelineRunner {
    /// Drains the outbox before the first job with every runner that joins the run, the state being in PostgreSQL;
    /// returns how many entries were delivered, and by which runner.
    ///
    /// Entries given up are added to the session's dropped counts, and the session's outbox is loaded again once the
    /// drain is closed (no runner delivers any more). A failure here means runners may still be delivering, so the
    /// caller runs no job.
    func drainShared(
        _ outbox: Outbox, state: any SharedPipelineState, session: RunSession, runID: String, runner: String,
        clock: any StoreClock
    ) async throws(CloudSyncError) -> (drained: Int, byRunner: [String: Int]) {
        let drain = try await SharedOutboxDrain.open(
            state, store: session.store, rules: outbox, clock: clock, runner: runner)
        let counts: [String: [String: Int]]
        do throws(CloudSyncError) {
            // Providers whose account could not be checked keep their entries, as a flush by one runner would.
            try await drain.start(runID: runID, held: outbox.held.keys.sorted())
            try await drain.work(until: options.interrupt)
            counts = try await drain.finish()
        } catch {
            await drain.close()
            throw error
        }
        await drain.close()
        let totals = SharedOutboxDrain.totals(counts)
        session.noteDropped(totals.dropped)
        do {
            try outbox.reload()
        } catch {
            throw (error as? CloudSyncError)
                ?? CloudSyncError(
                    .provider, "cannot read the outbox again after its drain from \(state.location): \(error)")
        }
        return (totals.drained, totals.byRunner)
    }

    /// Helps the drain of the run another runner started, while it is open; returns how many entries it claimed.
    func helpDrain(_ drain: SharedOutboxDrain) async throws(CloudSyncError) -> Int {
        guard try await drain.isOpen() else { return 0 }
        return try await drain.work(until: options.interrupt)
    }
}
