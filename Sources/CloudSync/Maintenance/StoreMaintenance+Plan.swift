internal import CloudSyncSodium

/// One key of a saved copy plan: what copying it would do, and the versions of the source and destination that
/// decided it, so that applying the plan later touches the key only if neither moved.
public struct PlannedCopy: Sendable, Equatable {
    /// What the plan does to a key.
    public enum Action: String, Sendable, CaseIterable {
        /// The destination lacks it: write it.
        case copy
        /// The destination holds another value: replace it.
        case overwrite
        /// The destination already holds the value the copy would write: nothing to write.
        case unchanged
        /// Left alone: gone from the source, left out by a filter, or held at the destination under `ifMissing`.
        case skip
        /// It cannot be copied (unreadable, undecodable, a transform's error, a name another key could take).
        case fail
    }

    /// The key at the source.
    public var key: String
    /// Its name at the destination (the key itself unless renamed).
    public var target: String
    /// What the plan does to it.
    public var action: Action
    /// The digest of the source's stored value when planned (``SyncFingerprint/digest(of:)``); nil when absent.
    public var source: String?
    /// The digest of the destination's stored value under ``target`` when planned; nil when absent.
    public var destination: String?
    /// The digest of the plaintext the copy writes, salted with the plan's salt (so digests of one value differ
    /// between plans); nil unless it writes or finds the value there already.
    public var value: String?
    /// Why it fails, for ``Action/fail``.
    public var failure: CloudSyncError?

    /// A planned key; see the properties.
    public init(
        key: String, target: String, action: Action, source: String? = nil, destination: String? = nil,
        value: String? = nil, failure: CloudSyncError? = nil
    ) {
        self.key = key
        self.target = target
        self.action = action
        self.source = source
        self.destination = destination
        self.value = value
        self.failure = failure
    }
}

/// What applying one planned key did.
public enum AppliedCopy: Sendable, Equatable {
    /// Written now, as planned. The associated digest is the source's, for a move to remove it conditionally.
    case written(sourceDigest: String)
    /// The destination already held the planned value (a plan applied before, or planned `unchanged`); the source's
    /// digest when the source still holds what was planned, for a move to remove it.
    case alreadyApplied(sourceDigest: String?)
    /// The source or the destination changed since the plan (or the transform now gives another value): untouched.
    case changedSincePlan(ChangedSide)
    /// Planned to be left alone (`skip`, `fail`): untouched.
    case notPlanned
    /// Applying it failed.
    case failed(CloudSyncError)

    /// Which side of a planned key moved since the plan.
    public enum ChangedSide: String, Sendable {
        case source, destination, value
    }
}

extension StoreMaintenance {
    /// The plan for copying one batch of `keys` from `source` to `destination`.
    ///
    /// Each key's action is decided as
    /// ``migrateByPage(from:to:filter:continueOnError:overwrite:reshape:range:onProgress:onFailures:onLanded:onBatch:shouldStop:)``
    /// would, with the digests that applying it checks. Reads both providers; writes nothing.
    ///
    /// `inPlace` lets `source` and `destination` be one provider, whose keys a migration's step rewrites where they
    /// are (a rename within it, a transform of its values): the plan is made whole before any key is written, so no
    /// key is listed again under its new name or value.
    public func planCopies(
        _ keys: [String], from source: String, to destination: String, overwrite: Overwrite,
        reshape: MigrationReshape, salt: [UInt8], inPlace: Bool = false
    ) async -> [PlannedCopy] {
        let read: (sources: [Result<String?, CloudSyncError>], destinations: [Result<String?, CloudSyncError>])
        let named = keys.map { key in (key: key, target: reshape.target(of: key)) }
        let targets = named.map { (try? $0.target.get()) ?? $0.key }
        let to: any Provider
        let from: any Provider
        do throws(CloudSyncError) {
            (from, to) = try migrationEnds(source, destination, inPlace: inPlace)
        } catch {
            return keys.map { PlannedCopy(key: $0, target: $0, action: .fail, failure: error.concerning(key: $0)) }
        }
        read = (await store.dispatcher(for: from).get(keys), await store.dispatcher(for: to).get(targets))
        var plans: [PlannedCopy] = []
        var plaintexts: [(index: Int, key: String, value: String)] = []
        let rules = store.keyRules(of: [to])
        for (index, item) in named.enumerated() {
            var plan = PlannedCopy(key: item.key, target: targets[index], action: .fail)
            do throws(CloudSyncError) {
                plan.destination = try read.destinations[index].get().map(SyncFingerprint.digest(of:))
                let target = try item.target.get()
                guard let stored = try read.sources[index].get() else {
                    plan.action = .skip
                    plans.append(plan)
                    continue
                }
                plan.source = SyncFingerprint.digest(of: stored)
                try store.validate(target, rules: rules)
                plaintexts.append((index, item.key, try store.decode(stored, key: item.key, from: from)))
            } catch {
                plan.failure = error.attributed(key: item.key)
            }
            plans.append(plan)
        }
        let values =
            await reshape.reshaped(plaintexts.map { ($0.key, $0.value) })
        for (item, value) in zip(plaintexts, values) {
            decide(
                &plans[item.index], value: value, held: read.destinations[item.index], overwrite: overwrite, on: to,
                salt: salt)
        }
        return plans
    }

    /// Sets `plan`'s action from what the copy would write (`value`) and what the destination holds (`held`).
    private func decide(
        _ plan: inout PlannedCopy, value: Result<String?, CloudSyncError>, held: Result<String?, CloudSyncError>,
        overwrite: Overwrite, on to: any Provider, salt: [UInt8]
    ) {
        do throws(CloudSyncError) {
            guard let value = try value.get() else {
                plan.action = .skip
                return
            }
            plan.value = Self.valueDigest(value, salt: salt)
            guard let stored = try held.get() else {
                plan.action = .copy
                return
            }
            // An undecodable copy differs from any value: it is replaced, as a migration replaces it.
            let current = try? store.decode(stored, key: plan.target, from: to)
            if current == value {
                plan.action = .unchanged
            } else {
                plan.action = overwrite == .ifMissing ? .skip : .overwrite
            }
        } catch {
            plan.action = .fail
            plan.value = nil
            plan.failure = error.attributed(key: plan.key)
        }
    }

    /// Applies one batch of a saved plan.
    ///
    /// Each key planned to be written is written only if the source and the
    /// destination still hold what the plan saw and the transform still gives the planned value; a key the destination
    /// already holds the planned value for is left as it is. Returns each entry's outcome, in order. `inPlace` as for
    /// ``planCopies(_:from:to:overwrite:reshape:salt:inPlace:)``.
    public func applyPlanned(
        _ plans: [PlannedCopy], from source: String, to destination: String, reshape: MigrationReshape,
        salt: [UInt8], inPlace: Bool = false
    ) async -> [AppliedCopy] {
        let from: any Provider
        let to: any Provider
        do throws(CloudSyncError) {
            (from, to) = try migrationEnds(source, destination, inPlace: inPlace)
        } catch {
            return plans.map { .failed(error.concerning(key: $0.key)) }
        }
        var outcomes = [AppliedCopy](repeating: .notPlanned, count: plans.count)
        let acting = plans.indices.filter { [.copy, .overwrite, .unchanged].contains(plans[$0].action) }
        let sources = await store.dispatcher(for: from).get(acting.map { plans[$0].key })
        let held = await store.dispatcher(for: to).get(acting.map { plans[$0].target })
        var plaintexts: [(index: Int, key: String, value: String, digest: String)] = []
        for (position, index) in acting.enumerated() {
            let plan = plans[index]
            do throws(CloudSyncError) {
                let stored = try sources[position].get()
                let storedDigest = stored.map(SyncFingerprint.digest(of:))
                let current = try held[position].get()
                if let stored, storedDigest == plan.source, current.map(SyncFingerprint.digest(of:)) == plan.destination
                {
                    if plan.action == .unchanged {
                        outcomes[index] = .alreadyApplied(sourceDigest: storedDigest)
                    } else {
                        plaintexts.append(
                            (index, plan.key, try store.decode(stored, key: plan.key, from: from), storedDigest!))
                    }
                    continue
                }
                // Moved since the plan: it counts as applied only if the destination holds the planned value.
                if let current, let decoded = try? store.decode(current, key: plan.target, from: to),
                    Self.valueDigest(decoded, salt: salt) == plan.value
                {
                    outcomes[index] = .alreadyApplied(sourceDigest: storedDigest == plan.source ? storedDigest : nil)
                } else {
                    outcomes[index] = .changedSincePlan(storedDigest == plan.source ? .destination : .source)
                }
            } catch {
                outcomes[index] = .failed(error.attributed(key: plan.key))
            }
        }
        await write(plaintexts, of: plans, to: to, reshape: reshape, salt: salt, into: &outcomes)
        return outcomes
    }

    /// Reshapes and writes the planned keys whose sides still match the plan, checking each value is the planned one.
    private func write(
        _ plaintexts: [(index: Int, key: String, value: String, digest: String)], of plans: [PlannedCopy],
        to: any Provider, reshape: MigrationReshape, salt: [UInt8], into outcomes: inout [AppliedCopy]
    ) async {
        let values =
            await reshape.reshaped(plaintexts.map { ($0.key, $0.value) })
        var copies: [KeyValue] = []
        var written: [StoreKey: (index: Int, digest: String)] = [:]
        for (item, value) in zip(plaintexts, values) {
            let plan = plans[item.index]
            do throws(CloudSyncError) {
                guard let value = try value.get(), Self.valueDigest(value, salt: salt) == plan.value else {
                    outcomes[item.index] = .changedSincePlan(.value)
                    continue
                }
                copies.append(KeyValue(plan.target, try store.encodedValue(value, key: plan.target, for: to).fitting()))
                written[StoreKey(plan.target)] = (item.index, item.digest)
            } catch {
                outcomes[item.index] = .failed(error.attributed(key: plan.key))
            }
        }
        let (landed, failed) = await store.writeBatch(copies, to: to)
        for target in landed {
            if let entry = written[StoreKey(target)] { outcomes[entry.index] = .written(sourceDigest: entry.digest) }
        }
        for failure in failed {
            if let entry = written[StoreKey(failure.key)] {
                outcomes[entry.index] = .failed(failure.error.attributed(key: plans[entry.index].key))
            }
        }
    }

    /// The digest a plan records of a plaintext: BLAKE2b of the plan's salt then the value, 16 bytes as hexadecimal.
    static func valueDigest(_ value: String, salt: [UInt8]) -> String {
        // A 16-byte digest is in BLAKE2b's range, so hashing cannot fail.
        Hex.encode((try? BLAKE2b.hash(salt + Array(value.utf8), byteCount: 16)) ?? [])
    }
}
