import CloudSync
import CloudSyncPipeline

extension MigrateJob {
    /// Whether this run copies through a snapshot of what the last run saw (``RememberedCopy``): a copy under the
    /// same names of unchanged values (no `rename`, `filter` or `transform`), replacing what `to` holds
    /// (`overwrite: always` or `ifDifferent`), between two providers that list their keys.
    func remembers(_ configuration: Configuration, in context: JobContext) -> Bool {
        configuration.reshape.reshapesNothing && configuration.overwrite != .ifMissing
            && configuration.inPlace == nil
            && [configuration.from, configuration.to].allSatisfy { context.providers[$0]?.capabilities.canList == true }
    }

    /// Copies `from` → `to` walking both listings together in key order, reading and writing only keys whose version
    /// tags moved on either side since the last run made them agree; the rest count as unchanged.
    ///
    /// With `overwrite: always` a key whose source value changed is written without reading `to`; with
    /// `ifDifferent` it is read there and written only when it differs. Keys `from` no longer lists are never removed
    /// from `to` (that is `mirror`'s work); their rows are forgotten.
    func copyRemembering(_ configuration: Configuration, in context: JobContext, report: inout JobReport)
        async throws(CloudSyncError)
    {
        let (from, to) = (configuration.from, configuration.to)
        let listing = TwoSidedListing(
            from: from, to: to, store: context.store, pageSize: context.pageSize(for: [from, to]),
            keys: configuration.keys, range: context.range)
        try await listing.prepare(providers: context.providers)
        let copier = RememberedCopy(
            from: from, to: to,
            snapshot: MirrorSnapshot(state: context.state, job: context.jobName, from: from, to: to),
            comparesBeforeWriting: configuration.overwrite == .ifDifferent)
        // A total only where the source counts its keys cheaply and every one of them is copied.
        let total =
            configuration.keys == nil && context.range == .all ? await context.store.keyCount(of: from) : nil
        var done = 0
        while !context.isInterrupted {
            let page = try await listing.nextPage()
            guard !page.isEmpty else { break }
            let listedBefore = report.entry.failures.count
            let tally = try await copier.copy(page.filter(\.onSource), in: context, report: &report)
            try copier.forget(page.filter { !$0.onSource }.map(\.key))
            let counted = [
                Self.copied: tally.copied + tally.updated, Self.unchanged: tally.unchanged, Self.skipped: tally.gone,
                Self.failed: tally.failed,
            ]
            for (count, amount) in counted { report.add(amount, to: count) }
            done += page.count { $0.onSource }
            context.progress(done, total)
            // A sharded run records the page; a runner that lost its range stops.
            if let last = page.last?.key,
                await !context.batchDone(
                    counted, through: last, failures: Array(report.entry.failures[listedBefore...]))
            {
                break
            }
            if !configuration.continueOnError && tally.failed > 0 { break }
        }
        if context.isInterrupted { report.status = .interrupted }
    }
}
