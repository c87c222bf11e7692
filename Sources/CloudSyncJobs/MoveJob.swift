import CloudSync
import CloudSyncPipeline

/// `move`: copies keys from one provider to another, then removes from the source each key the destination
/// acknowledged holding with the same value — never one whose copy failed or was skipped, nor one written at the
/// source after its copy (``CloudStore/removeUnchanged(_:from:)`` checks the source still holds what was copied, and
/// removes on the condition that it still does where the source takes conditions).
///
/// The copy compares before it writes (`overwrite: ifDifferent`), so a move killed between the two steps finishes on
/// the next run without copying again: the keys already there are unchanged, and are removed from the source.
struct MoveJob: JobType {
    struct Configuration: Sendable {
        var from: String
        var to: String
        var keys: [String]?
        var continueOnError: Bool
        var reshape: ReshapeSpec
        /// A migration's step rewriting keys within one provider; nil for a job's.
        var inPlace: InPlaceRewrite?
    }

    static let moved = JobCount("moved", "keys now at `to` and removed from `from`")
    static let skipped = JobCount(
        "skipped", "keys listed at `from` but gone when read (left for the next run), or left there by `filter`")
    static let changedSinceRead = JobCount(
        "changedSinceRead",
        "keys written at `from` again after their copy was read, left there with the newer value for the next run")
    static let failed = JobCount(
        "failed", "keys that could not be copied (left at `from`) or, once copied, removed from `from`")
    static let changedSincePlan = JobCount(
        "changedSincePlan",
        "keys a saved plan names whose source or destination changed since the plan, left untouched (`cloudsync "
            + "apply`; 0 otherwise)")

    let name = "move"
    let summary = "copy keys to another provider, then remove from the source each key whose copy landed"
    let fields = [
        JobField("from", .provider, required: true, summary: "the provider moved from"),
        JobField("to", .provider, required: true, summary: "the provider moved to"),
        keysField,
        JobField(
            "continueOnError", .boolean, defaultValue: "true",
            summary: "keep going past a failing key; false stops at the first failing batch"),
        renameField,
        filterField,
        transformField,
    ]
    let counts = [moved, skipped, changedSinceRead, failed, changedSincePlan]

    func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> Configuration {
        let (from, to) = try values.twoProviders("a move needs two different providers")
        return Configuration(
            from: from, to: to, keys: values.list("keys"), continueOnError: values.boolean("continueOnError") ?? true,
            reshape: ReshapeSpec(values), inPlace: InPlaceRewrite(values))
    }

    func providers(of configuration: Configuration, store: [String]) -> [String] {
        [configuration.from, configuration.to]
    }

    func plan(_ configuration: Configuration, paths: PlanPaths) -> String {
        "move \(configuration.from) -> \(configuration.to)\(planKeys(configuration.keys)): copy, then remove each "
            + "key from \(configuration.from) once its copy landed"
            + (configuration.continueOnError ? ", continue past failures" : ", stop at the first failure")
            + configuration.reshape.planText
    }

    /// A source that takes no conditional removals (Drive) cannot rule out removing a value another writer stores
    /// there between the check and the removal.
    func warnings(_ configuration: Configuration, capabilities: (String) -> ProviderCapabilities?) -> [String] {
        guard let source = capabilities(configuration.from), !source.conditionalWrites else { return [] }
        return [
            "provider `\(configuration.from)` takes no conditional removals, so a value another writer stores there "
                + "between the move's check and its removal of the key is removed with it; move from a provider "
                + "that takes them (s3, cloudKit, sqlite, directory), or keep other writers away while it runs"
        ]
    }

    func run(_ configuration: Configuration, in context: JobContext, report: inout JobReport)
        async throws(CloudSyncError)
    {
        let from = configuration.from
        var removal = SourceRemoval(store: context.store, from: from)
        let reshape = try configuration.reshape.reshape()
        switch context.savedPlan {
        case .write(let header, let path)?:
            let planned = try await context.writePlan(
                header, path: path, from: from, to: configuration.to, keys: configuration.keys,
                overwrite: .ifDifferent, reshape: reshape, inPlace: configuration.inPlace, report: &report)
            report[Self.moved] =
                planned[.copy, default: 0] + planned[.overwrite, default: 0] + planned[.unchanged, default: 0]
            report[Self.skipped] = planned[.skip, default: 0]
            report[Self.failed] = planned[.fail, default: 0]
            return
        case .apply(let header, let path)?:
            let applied = try await context.applyPlan(
                header, path: path, from: from, to: configuration.to, reshape: reshape,
                inPlace: configuration.inPlace, report: &report
            ) { landed in await removal.remove(landed) }
            report.record(removal.failures)
            report[Self.moved] = removal.moved
            // A key moved by an earlier apply is at the destination and gone from the source: nothing to do.
            report[Self.skipped] = applied.notPlanned + applied.alreadyAppliedSourceMoved
            report[Self.changedSinceRead] = removal.changed
            report[Self.failed] = applied.failed + removal.failures.count
            report[Self.changedSincePlan] = applied.changedSincePlan
            return
        case nil:
            // Listing a provider while rewriting it would meet keys under their new names again.
            if configuration.inPlace != nil { throw InPlaceRewrite.needsPlan }
        }
        let result = try await context.copy(
            from: from, to: configuration.to, keys: configuration.keys,
            continueOnError: configuration.continueOnError, overwrite: .ifDifferent, reshape: reshape, report: &report
        ) { landed in await removal.remove(landed) }
        report.record(removal.failures)
        report[Self.moved] = removal.moved
        report[Self.skipped] = result.skipped
        report[Self.changedSinceRead] = removal.changed
        report[Self.failed] = result.failed + removal.failures.count
    }
}

/// A move's second step: removing from the source each key whose copy landed, only while it still holds the value
/// that was copied.
struct SourceRemoval {
    let store: CloudStore
    let from: String
    /// Keys removed (or already gone).
    var moved = 0
    /// Keys written at the source again since their copy was read: left there.
    var changed = 0
    /// Keys whose removal failed.
    var failures: [KeyFailure] = []

    /// Removes `landed` from the source where it still holds what was copied.
    mutating func remove(_ landed: [LandedCopy]) async {
        guard !landed.isEmpty else { return }
        do throws(CloudSyncError) {
            // Only a key still holding the value that was copied goes: one written at `from` since stays.
            for (copy, outcome) in zip(landed, try await store.removeUnchanged(landed, from: from)) {
                switch outcome {
                case .removed, .absent: moved += 1
                case .changed: changed += 1
                case .failed(let error): failures.append(KeyFailure(key: copy.key, error: error))
                }
            }
        } catch {
            failures += landed.map { KeyFailure(key: $0.key, error: error.concerning(key: $0.key)) }
        }
    }
}
