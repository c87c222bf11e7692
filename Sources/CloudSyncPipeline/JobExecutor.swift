import CloudSync
import CloudSyncCrypto
import Foundation

/// Runs one job against the store and turns what happened into its report entry.
struct JobExecutor {
    let store: CloudStore
    let compiled: CompiledPipeline
    let options: RunOptions
    let providers: [String: any Provider]
    /// Providers that could not be opened: a job that needs one fails with its error.
    var unopened: [String: CloudSyncError] = [:]
    /// The pipeline's state database, where sync jobs keep their snapshots; nil in a dry run of a new pipeline.
    var stateDatabase: StateDatabase?
    /// The session's outbox, asked after each job for the writes it could not keep.
    var outbox: Outbox?

    /// Keys per page the jobs walk.
    static let pageSize = 500
    /// The running job's name, for progress.
    var progressName = ""

    func progress(_ done: Int, _ total: Int?) { options.onProgress?(progressName, done, total) }

    mutating func run(_ job: JobSpec) async -> RunReport.Job {
        progressName = job.name
        var entry = RunReport.Job(
            name: job.name, type: job.type, status: .ok, counts: [:], failures: [], failuresOmitted: 0)
        do throws(CloudSyncError) {
            if let missing = needs(job.kind).compactMap({ unopened[$0] }).first { throw missing }
            try await perform(job.kind, into: &entry)
        } catch {
            entry.status = .error
            entry.error = RunReport.Failure(
                key: "", provider: error.provider, code: error.code.rawValue, message: error.message)
        }
        // Writes that went unqueued because the outbox could not store them (a full disk) are named too, unless the job
        // already named the key as failed for that provider.
        // By bytes: a failure of one spelling of a key does not stand for its canonically equivalent twin.
        let named = Set(entry.failures.map { StoreKey("\($0.provider ?? "")/\($0.key)") })
        record(
            (outbox?.takeUnkept() ?? []).filter { !named.contains(StoreKey("\($0.error.provider ?? "")/\($0.key)")) },
            in: &entry)
        if entry.status == .ok, !entry.failures.isEmpty || entry.failuresOmitted > 0 { entry.status = .failed }
        return entry
    }

    /// The providers a job reads or writes; a store-wide job needs every provider of the store, so it does not
    /// quietly work on fewer.
    private func needs(_ kind: JobSpec.Kind) -> [String] {
        let storeProviders = compiled.spec.store.providers
        switch kind {
        case .sync(let subset, _, _, _): return subset ?? storeProviders
        case .migrate(let from, let to, _, _, _): return [from, to]
        case .clear(let provider, _): return provider.map { [$0] } ?? storeProviders
        case .export(let from, _, _, _): return from == "store" ? storeProviders : [from]
        case .import(_, let to, _): return to == "store" ? storeProviders : [to]
        case .verify(let provider), .rekey(let provider): return [provider]
        case .quota, .flush: return []
        }
    }

    func record(_ failures: [KeyFailure], in entry: inout RunReport.Job) {
        for failure in failures {
            if entry.failures.count < PipelineRunner.failureListLimit {
                entry.failures.append(
                    RunReport.Failure(
                        key: failure.key, provider: failure.error.provider, code: failure.error.code.rawValue,
                        message: failure.error.message))
            } else {
                entry.failuresOmitted += 1
            }
        }
    }

    private func perform(_ kind: JobSpec.Kind, into entry: inout RunReport.Job) async throws(CloudSyncError) {
        switch kind {
        case .sync(let subset, let deletes, let maxDeletes, let incremental):
            try await sync(
                subset ?? compiled.spec.store.providers, deletes: deletes, maxDeletes: maxDeletes,
                incremental: incremental, into: &entry)
        case .migrate(let from, let to, let keys, let continueOnError, let overwrite):
            let name = progressName
            let report = options.onProgress
            var failures: [KeyFailure] = []
            let result = try await store.maintenance.migrateByPage(
                from: from, to: to, filter: keyFilter(keys), continueOnError: continueOnError,
                overwrite: overwrite == .always, onProgress: { done, total in report?(name, done, total) },
                onFailures: { failed in
                    failures += failed.prefix(max(0, PipelineRunner.failureListLimit + 1 - failures.count))
                },
                shouldStop: { [interrupt = options.interrupt] in interrupt.isRaised })
            record(failures, in: &entry)
            entry.failuresOmitted += max(0, result.failed - failures.count)
            entry.counts = ["copied": result.copied, "skipped": result.skipped, "failed": result.failed, "queued": 0]
            if !result.completed && options.interrupt.isRaised { entry.status = .interrupted }
        case .clear(let provider, let confirm):
            guard confirm || options.yes else {
                throw CloudSyncError(
                    .config,
                    "clear removes data: refused without `confirm: true` in the job or --yes on the command line")
            }
            if let provider {
                let (removed, failed) = try await clear(provider)
                record(failed, in: &entry)
                entry.counts = ["removed": removed, "failed": failed.count, "queued": 0]
            } else {
                let result = try await store.clear()
                record(result.failed, in: &entry)
                entry.counts = ["removed": result.removed, "failed": result.failed.count, "queued": result.queued]
            }
        case .quota(let warnAbove, let failOnWarning):
            var lines: [RunReport.QuotaLine] = []
            for quota in try await store.quota() {
                let fraction = quota.usedBytes.flatMap { used in
                    quota.totalBytes.map { Double(used) / Double(max($0, 1)) }
                }
                lines.append(
                    RunReport.QuotaLine(
                        provider: quota.provider, usedBytes: quota.usedBytes, totalBytes: quota.totalBytes,
                        fraction: fraction, warning: (fraction ?? 0) > (warnAbove ?? 1)))
            }
            entry.quota = lines
            let warnings = lines.filter(\.warning).count
            entry.counts = ["providers": lines.count, "warnings": warnings]
            if failOnWarning && warnings > 0 { entry.status = .failed }
        case .export(let from, let path, let keys, let codec):
            entry.file = path.display
            let (items, failed) = try await exportItems(from: from, filter: keyFilter(keys))
            record(failed, in: &entry)
            entry.counts = ["items": items.count, "failed": failed.count]
            guard !options.dryRun else { return }
            try ExportFile.write(
                items, to: path.value, pipeline: compiled.spec.name, source: from,
                codec: codec.flatMap { id in compiled.codecs[id].map { (id, $0) } })
        case .import(let path, let to, let overwrite):
            entry.file = path.display
            let items = try ExportFile.read(path.value, codecs: Array(compiled.codecs.values))
            let (written, skipped, queued, failed) = try await importItems(
                items, to: to, overwrite: overwrite == .always)
            record(failed, in: &entry)
            entry.counts = ["imported": written, "skipped": skipped, "failed": failed.count, "queued": queued]
        case .verify(let provider):
            let result = try await store.maintenance.verify(provider: provider)
            record(result.failed, in: &entry)
            entry.counts = ["checked": result.checked, "ok": result.ok, "failed": result.failed.count]
        case .rekey(let provider):
            let result = try await store.maintenance.rekey(provider: provider)
            record(result.failed, in: &entry)
            entry.counts = [
                "rekeyed": result.copied.count, "skipped": result.skipped.count, "failed": result.failed.count,
                "queued": 0,
            ]
        case .flush:
            let result = try await store.flushOutbox()
            entry.counts = ["drained": result.drained, "remaining": result.remaining, "dropped": result.dropped]
        }
    }

    /// Removes every key one provider lists, page by page.
    private func clear(_ id: String) async throws(CloudSyncError) -> (Int, [KeyFailure]) {
        var removed = 0
        var failed: [KeyFailure] = []
        var cursor: String?
        repeat {
            if options.interrupt.isRaised { break }
            // Listing continues after the last key seen, so removals behind the cursor do not disturb it.
            let page = try await store.keyPage(of: id, after: cursor, limit: Self.pageSize)
            for (key, result) in zip(page.keys, try await store.remove(page.keys, from: id)) {
                if case .failure(let error) = result {
                    failed.append(KeyFailure(key: key, error: error))
                } else {
                    removed += 1
                }
            }
            cursor = page.nextCursor
        } while cursor != nil
        return (removed, failed)
    }

    /// Every selected key and its plaintext value, from one provider (decoded with its codec) or the store, and the
    /// keys whose value could not be read or decoded (each named, as `verify` names them; the rest still export).
    private func exportItems(from source: String, filter: (@Sendable (String) -> Bool)?) async throws(CloudSyncError)
        -> ([KeyValue], [KeyFailure])
    {
        let keys = try await keysOf(source).filter { filter?($0) ?? true }
        var items: [KeyValue] = []
        items.reserveCapacity(keys.count)
        var failed: [KeyFailure] = []
        for start in stride(from: 0, to: keys.count, by: Self.pageSize) {
            let batch = Array(keys[start..<min(start + Self.pageSize, keys.count)])
            let values =
                source == "store"
                ? try await store.multiGetEach(batch) : try await store.readEach(batch, from: source)
            var unread: [String] = []
            for (key, value) in zip(batch, values) {
                switch value {
                case .success(let value?): items.append(KeyValue(key, value))
                case .success(nil): unread.append(key)
                case .failure(let error): failed.append(KeyFailure(key: key, error: error))
                }
            }
            // The store reads a key one provider lacks and another holds undecodable as missing; a listed key is
            // held somewhere, so find out which copy could not be read.
            if source == "store" && !unread.isEmpty {
                failed += try await unreadableCopies(of: unread)
            }
            progress(min(start + Self.pageSize, keys.count), keys.count)
        }
        return (items, failed.sorted { StoreKey.bytesPrecede($0.key, $1.key) })
    }

    /// The first copy of each of `keys` that a store provider holds but cannot read or decode.
    private func unreadableCopies(of keys: [String]) async throws(CloudSyncError) -> [KeyFailure] {
        var failures = [CloudSyncError?](repeating: nil, count: keys.count)
        for provider in compiled.spec.store.providers {
            for (index, result) in try await store.readEach(keys, from: provider).enumerated() {
                if case .failure(let error) = result, failures[index] == nil { failures[index] = error }
            }
        }
        return zip(keys, failures).compactMap { key, error in error.map { KeyFailure(key: key, error: $0) } }
    }

    private func keysOf(_ source: String) async throws(CloudSyncError) -> [String] {
        if source == "store" { return try await store.allKeys().keys }
        return try await store.listKeys(of: source)
    }

    /// Writes the items; returns how many were written (stored or queued), skipped, queued (some provider's copy
    /// waits in the outbox) and failed.
    private func importItems(_ items: [KeyValue], to target: String, overwrite: Bool) async throws(CloudSyncError)
        -> (Int, Int, Int, [KeyFailure])
    {
        var written = 0
        var skipped = 0
        var queued = 0
        var failed: [KeyFailure] = []
        for start in stride(from: 0, to: items.count, by: Self.pageSize) {
            var batch = Array(items[start..<min(start + Self.pageSize, items.count)])
            if !overwrite {
                let keys = batch.map(\.key)
                let existing =
                    target == "store" ? try await store.multiGet(keys) : try await store.read(keys, from: target)
                let before = batch.count
                batch = zip(batch, existing).compactMap { item, value in value == nil ? item : nil }
                skipped += before - batch.count
            }
            let results =
                target == "store"
                ? try await store.multiSet(batch)
                : (try await store.write(batch, to: target)).map { $0.map { WriteReceipt() } }
            for (item, result) in zip(batch, results) {
                switch result {
                case .success(let receipt):
                    written += 1
                    if !receipt.queued.isEmpty { queued += 1 }
                case .failure(let error): failed.append(KeyFailure(key: item.key, error: error))
                }
            }
            progress(min(start + Self.pageSize, items.count), items.count)
        }
        return (written, skipped, queued, failed)
    }
}
