import CloudSync
import CloudSyncPipeline
import Foundation

extension SyncRun {
    /// Probes each provider (under the store's deadline: a hung one is left out, not waited on) and prepares its
    /// keys in bytewise order: from its change feed since the last clean run, straight from a listing in key order,
    /// or sorted into a temporary table first.
    func list() async throws(CloudSyncError) {
        let store = context.store
        let incremental = configuration.incremental
        let storedCursors = incremental && !firstRun ? (try state?.syncCursors(of: job) ?? [:]) : [:]
        for id in ids {
            guard let provider = context.providers[id] else { continue }
            guard provider.capabilities.canList else {
                unlisted[id] = CloudSyncError(.unsupported, "this provider cannot list its keys", provider: id)
                continue
            }
            let availability = try await store.availability(of: id)
            guard availability.isAvailable else {
                unlisted[id] = CloudSyncError(
                    .noProvider, "it was unavailable (\(availability)); its keys were neither read nor deleted",
                    provider: id)
                continue
            }
            let source = OrderedKeys(id: id, readsAhead: true)
            source.begin(in: context.range, listing: provider.capabilities)
            if incremental, await readsFeed(source, of: id, stored: storedCursors) {
                sources.append(source)
                continue
            }
            if !incremental {
                modes[id] = "full"
                fullBecause[id] =
                    configuration.shards > 1
                    ? "the job is split into shards, which compare in full" : "the job sets `incremental: false`"
            }
            if !provider.capabilities.listsInKeyOrder {
                await source.spillListing(from: store, pageSize: pageSize)
                if let error = source.error {
                    unlisted[id] = error
                    continue
                }
            }
            sources.append(source)
        }
        changedOnly = incremental && !sources.isEmpty && sources.allSatisfy { modes[$0.id] == "incremental" }
        unknown = Set(unlisted.keys)  // provider ids, not store keys
        // maxDeletes counts against the keys the last sync left, as a full run's merge counts them.
        if changedOnly { snapshotKeys = try state?.snapshotCount(of: job) ?? 0 }
    }

    /// Reads `id`'s change feed since its cursor in `stored` (the last clean run's) into `source` and answers true;
    /// or, when it has no cursor to read from or its feed refuses it, takes the feed's position before the listing
    /// (whatever changes from here on, the next run reads), notes why the comparison is full, and answers false.
    private func readsFeed(_ source: OrderedKeys, of id: String, stored: [String: String]) async -> Bool {
        let store = context.store
        if let cursor = stored[id] {
            switch await source.spillChanges(from: store, since: cursor, pageSize: pageSize) {
            case .read(let cursor):
                modes[id] = "incremental"
                newCursors[id] = cursor
                return true
            case .expired(let reason):
                fullBecause[id] = "its cursor was refused: \(reason)"
            case .failed:
                // A provider that is really down fails its listing next, and is left out then.
                fullBecause[id] = "its change feed failed: \(source.error?.message ?? "")"
                source.clearError()
            }
        }
        let cursor: String?
        do throws(CloudSyncError) {
            cursor = try await store.changeFeedCursor(of: id)
        } catch {
            cursor = nil
            fullBecause[id] = "its change feed failed: \(error.message)"
        }
        if let cursor { newCursors[id] = cursor }
        if fullBecause[id] == nil {
            fullBecause[id] =
                cursor == nil
                ? "it offers no change feed"
                : firstRun || stored.isEmpty ? "no earlier clean run left a cursor" : "it had no cursor"
        }
        modes[id] = "full"
        return false
    }
}
