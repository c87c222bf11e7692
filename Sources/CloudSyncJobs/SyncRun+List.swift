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
        // By default a feed is read only when every provider can be: beside a provider compared in full, a feed's
        // keys (which carry no tags) would have every key that provider lists read.
        let lacking = ids.filter { storedCursors[$0] == nil }
        let readsFeeds = incremental && !(configuration.incrementalByDefault && !lacking.isEmpty)
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
            if readsFeeds, await readsFeed(source, of: id, stored: storedCursors) {
                sources.append(source)
                continue
            }
            if incremental && !readsFeeds {
                // Its cursor is taken all the same, so that once every provider has one the next run reads feeds.
                await takeCursor(of: id, stored: storedCursors, besides: lacking)
            } else if !incremental {
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
    }

    /// Takes `id`'s change feed position before its listing, for the next run, and notes why this run compares it
    /// in full: its own reason, or that the providers in `lacking` have no cursor to read from.
    private func takeCursor(of id: String, stored: [String: String], besides lacking: [String]) async {
        if stored[id] != nil {
            fullBecause[id] =
                "\(lacking.joined(separator: ", ")) had no change-feed cursor, and by default a sync reads feeds "
                + "only when every provider has one (`incremental: true` reads this one's all the same)"
        }
        await startFeed(of: id, stored: stored)
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
        await startFeed(of: id, stored: stored)
        return false
    }

    /// Takes the feed's position of `id` before its listing (whatever changes from here on, the next run reads),
    /// notes why it is compared in full unless a reason is noted already, and marks it full.
    private func startFeed(of id: String, stored: [String: String]) async {
        let store = context.store
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
    }
}
