import CloudSync
import CloudSyncBackup
import CloudSyncPipeline

/// `verify`: checks a provider's values decode, or that a backup repository is whole.
///
/// With `provider`, every value is read and decoded with its codec; with `repository`, the repository is checked
/// (``BackupRepository/verify(readData:)``). Values are never shown.
struct VerifyJob: JobType {
    enum Configuration: Sendable {
        case values(provider: String)
        case repository(String, codec: String, readData: Double)
    }

    static let checked = JobCount("checked", "keys read, or repository objects checked")
    static let ok = JobCount("ok", "values that decoded, or repository objects without a problem")
    static let failed = JobCount("failed", "values that could not be read or decoded, or damaged repository objects")

    let name = "verify"
    let summary = "check every value of one provider decodes with its codec, or that a backup repository is whole"
    let fields = [
        JobField("provider", .provider, summary: "the provider whose values are checked (or give `repository`)"),
        JobField(
            "repository", .provider,
            summary: "the provider keeping a backup repository to check: every index and snapshot opens and every "
                + "object they name exists"),
        JobField("codec", .codec, summary: "with repository: the codec whose key ring opens it"),
        JobField(
            "readData", .text, defaultValue: "0%",
            summary: "with repository: the share of its packs, chosen at random, read and checked blob by blob, as a "
                + "percentage like \"10%\" or all"),
    ]
    static let bytesRead = JobCount("bytesRead", "bytes of stored values, or of repository objects, read as stored")

    let counts = [checked, ok, failed, bytesRead]

    func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> Configuration {
        switch (values.text("provider"), values.text("repository")) {
        case (let provider?, nil):
            for field in ["codec", "readData"] where values.values[field] != nil {
                throw JobConfigurationError(field: field, "`\(field)` goes with `repository`, not `provider`")
            }
            return .values(provider: provider)
        case (nil, let repository?):
            guard let codec = values.text("codec") else {
                throw JobConfigurationError(
                    field: "codec", "a verify of a repository needs `codec`, the codec whose key ring opens it")
            }
            let text = values.text("readData") ?? "0%"
            guard let share = text == "all" ? 1 : text.hasSuffix("%") ? Double(text.dropLast()).map({ $0 / 100 }) : nil,
                (0...1).contains(share)
            else {
                throw JobConfigurationError(
                    field: "readData",
                    "`readData` must be a percentage from 0% to 100% like \"10%\", or all; found \"\(text)\"")
            }
            return .repository(repository, codec: codec, readData: share)
        case (.some, .some):
            throw JobConfigurationError(field: "repository", "give `provider` or `repository`, not both")
        case (nil, nil):
            throw JobConfigurationError(
                field: "provider", "give `provider` (check its values decode) or `repository` (check a backup)")
        }
    }

    func providers(of configuration: Configuration, store: [String]) -> [String] {
        switch configuration {
        case .values(let provider): return [provider]
        case .repository(let provider, _, _): return [provider]
        }
    }

    func plan(_ configuration: Configuration, paths: PlanPaths) -> String {
        switch configuration {
        case .values(let provider): return "check every value of \(provider) decodes"
        case .repository(let provider, let codec, let share):
            return "check the backup repository in \(provider), opened by \(codec)"
                + (share > 0 ? ", reading \(share == 1 ? "all" : "\(Int((share * 100).rounded()))%") of its data" : "")
        }
    }

    func run(_ configuration: Configuration, in context: JobContext, report: inout JobReport)
        async throws(CloudSyncError)
    {
        switch configuration {
        case .values(let provider):
            let result = try await context.store.maintenance.verify(provider: provider)
            report.record(result.failed)
            report[Self.checked] = result.checked
            report[Self.ok] = result.ok
            report[Self.failed] = result.failed.count
            report[Self.bytesRead] = result.bytesRead
        case .repository(let provider, let codec, let share):
            let repository = try await context.backupRepository(
                in: provider, codec: codec, create: false)
            let check = try await repository.withLock(exclusive: false) { _ throws(CloudSyncError) in
                try await repository.verify(readData: share) { done, total in
                    context.progress(done, total, unit: "packs")
                }
            }
            report[Self.bytesRead] = repository.bytesRead
            let objects = 1 + check.snapshots + check.indexes + check.packs
            let damaged = Set(check.problems.map(\.object)).count
            report[Self.checked] = objects
            report[Self.ok] = objects - damaged
            report[Self.failed] = damaged
            report.record(
                check.problems.map {
                    KeyFailure(key: $0.object, error: CloudSyncError($0.code, $0.message, provider: provider))
                })
            if !check.problems.isEmpty { report.status = .failed }
        }
    }
}
