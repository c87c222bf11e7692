import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncPipeline
@testable import CloudSyncPipelineState
@testable import CloudSyncRunner

/// Providers `a`, `b` (and optionally `c`) as SQLite files in a temporary directory, edited directly between runs
/// of one sync job.
struct SyncBench {
    let directory: TemporaryDirectory
    var providers = ["a", "b"]
    var down: Set<String> = []
    var deletes = "propagate"
    var maxDeletes = "\"50%\""
    var resolver = ""
    var reversed: Set<String> = []
    /// The job's `incremental` setting; nil leaves it out, for the default.
    var incremental: Bool? = false
    var readUnchanged = false
    var refuses: [String: String] = [:]
    var unreadable: Set<String> = []
    /// Nonzero: each provider's calls yield in an order this seed picks (``SeededScheduler``).
    var schedule: UInt64 = 0
    /// Nonzero: each provider's listing pages after this many fail.
    var listPages = 0
    /// Providers that answer unavailable after this many writes (`leavesAfterWrites`).
    var leaves: [String: Int] = [:]
    /// Providers another writer changes just before their read of this number (`editedBeforeRead`).
    var editedBeforeRead: [String: Int] = [:]
    /// The run's clock; nil for the system's.
    var clock: ManualClock?
    /// Where the pipeline keeps its state: nil for the directory default.
    var state: TestState?

    init(providers: [String] = ["a", "b"]) throws {
        directory = try TemporaryDirectory()
        self.providers = providers
    }

    func path(_ id: String) -> String { directory.file("data/\(id).db") }

    var source: String {
        let lines = providers.map {
            "  \($0): { type: switchable, path: data/\($0).db, down: \(down.contains($0)), reversed: \(reversed.contains($0)), refuses: '\(refuses[$0] ?? "")', unreadable: \(unreadable.contains($0)), schedule: \(schedule), listPages: \(listPages), leavesAfterWrites: \(leaves[$0] ?? 0), editedBeforeRead: \(editedBeforeRead[$0] ?? 0) }"
        }
        let source = """
            version: 1
            name: syncing
            providers:
            \(lines.joined(separator: "\n"))
            store:
              providers: [\(providers.joined(separator: ", "))]
              timeoutMs: 600000
            \(resolver.isEmpty ? "" : "  resolver: \(resolver)")
            jobs:
              - { type: sync, name: nightly, deletes: \(deletes), maxDeletes: \(maxDeletes)\(incremental.map { ", incremental: \($0)" } ?? ""), readUnchanged: \(readUnchanged) }
            report: { path: report.json }
            """
        return state?.applied(to: source) ?? source
    }

    func run(dryRun: Bool = false, force: Bool = false, readUnchanged: Bool = false) async throws -> RunReport.Job {
        try await runReport(dryRun: dryRun, force: force, readUnchanged: readUnchanged).jobs[0]
    }

    /// The whole report of a run (its providers' requests too).
    func runReport(dryRun: Bool = false, force: Bool = false, readUnchanged: Bool = false) async throws -> RunReport {
        var registry = BuiltInProviders.registry
        registry.register(SwitchableProviderFactory())
        let environment = state?.environment() ?? [:]
        let spec = try PipelineLoader.load(
            source: source, file: "p.yaml", directory: directory.path, registry: registry, environment: environment)
        var options = RunOptions()
        options.dryRun = dryRun
        options.force = force
        options.readUnchanged = readUnchanged
        if let clock { options.clock = clock }
        let outcome = try await PipelineRunner(
            try PipelineCompiler.compile(spec, environment: environment), options: options
        )
        .run()
        return outcome.report
    }

    /// Sets (a value) or removes (nil) keys on one provider, outside any run.
    func edit(_ id: String, _ changes: [String: String?]) async throws {
        let provider = try SQLiteProvider(id: id, path: path(id))
        let sets = changes.compactMap { key, value in value.map { KeyValue(key, $0) } }
        let removes = changes.filter { $0.value == nil }.map(\.key)
        if !sets.isEmpty { _ = try await provider.set(sets) }
        if !removes.isEmpty { _ = try await provider.remove(removes) }
        await provider.close()
    }

    /// The job's snapshot rows, as text without the listings' tags (which only full comparisons record), in key order.
    func snapshot() throws -> [String] {
        let state = try StateDatabase(path: directory.file(".cloudsync/syncing/state.db"), readOnly: true)
        return try state.snapshotRows(of: "nightly", after: nil, limit: 1_000_000).map {
            "\($0.key) \($0.fingerprint.withTags([:]).text)"
        }
    }

    /// Everything one provider holds.
    func contents(_ id: String) async throws -> [String: String] {
        let provider = try SQLiteProvider(id: id, path: path(id))
        let keys = try await listEveryKey(of: provider, pageSize: 100)
        var items: [String: String] = [:]
        for (key, result) in zip(keys, try await provider.get(keys)) { items[key] = try result.get() }
        await provider.close()
        return items
    }
}

@Suite(.serialized) struct SyncJobTests {
    @Test func theFirstRunIsAUnionAndSaysSo() async throws {
        let bench = try SyncBench()
        try await bench.edit("a", ["one": "1", "both": "a"])
        try await bench.edit("b", ["two": "2", "both": "a"])
        let job = try await bench.run()
        #expect(job.status == .ok)
        #expect(job.sync?.firstRun == true)
        #expect(job.counts["deleted"] == 0)
        #expect(try await bench.contents("a") == ["one": "1", "two": "2", "both": "a"])
        #expect(try await bench.contents("b") == ["one": "1", "two": "2", "both": "a"])
        #expect(try await bench.run().sync?.firstRun == false)
    }

    @Test func aDeletionOnEitherSidePropagatesInOneRunAndStaysDeleted() async throws {
        let bench = try SyncBench()
        try await bench.edit("a", ["k1": "1", "k2": "2", "k3": "3", "k4": "4", "k5": "5"])
        _ = try await bench.run()
        try await bench.edit("a", ["k1": nil])
        try await bench.edit("b", ["k2": nil])
        let job = try await bench.run()
        #expect(job.status == .ok)
        #expect(job.counts["deleted"] == 2)
        #expect(job.sync?.deletions == ["k1", "k2"])
        let expected = ["k3": "3", "k4": "4", "k5": "5"]
        #expect(try await bench.contents("a") == expected)
        #expect(try await bench.contents("b") == expected)
        let again = try await bench.run()
        #expect(again.counts["deleted"] == 0 && again.counts["repaired"] == 0)
        #expect(try await bench.contents("a") == expected)
    }

    @Test func anEditBeatsADeleteAndIsListedAsAConflict() async throws {
        let bench = try SyncBench()
        try await bench.edit("a", ["k": "old", "other": "x"])
        _ = try await bench.run()
        try await bench.edit("a", ["k": nil])
        try await bench.edit("b", ["k": "new"])
        let job = try await bench.run()
        #expect(job.counts["conflicts"] == 1)
        #expect(job.counts["deleted"] == 0)
        #expect(
            job.sync?.conflicts
                == [RunReport.Conflict(key: "k", kind: "editedAndDeleted", editedOn: ["b"], deletedOn: ["a"])])
        #expect(try await bench.contents("a")["k"] == "new")
        #expect(try await bench.contents("b")["k"] == "new")
    }

    @Test func anEditBeatsAStaleCopyWhateverThePreferenceOrder() async throws {
        let bench = try SyncBench()
        try await bench.edit("a", ["k": "old"])
        _ = try await bench.run()
        try await bench.edit("b", ["k": "new"])
        let job = try await bench.run()
        #expect(job.counts["conflicts"] == 0 && job.counts["repaired"] == 1)
        #expect(try await bench.contents("a")["k"] == "new")
    }

    @Test func editsOnBothSidesGoToThePreferenceOrderWithoutAResolver() async throws {
        let bench = try SyncBench()
        try await bench.edit("a", ["k": "old"])
        _ = try await bench.run()
        try await bench.edit("a", ["k": "from a"])
        try await bench.edit("b", ["k": "from b"])
        let job = try await bench.run()
        #expect(job.sync?.conflicts.map(\.kind) == ["editedOnSeveral"])
        #expect(job.sync?.conflicts.first?.editedOn == ["a", "b"])
        #expect(try await bench.contents("b")["k"] == "from a")
    }

    @Test func editsOnBothSidesGoToTheStoresResolver() async throws {
        var bench = try SyncBench()
        bench.resolver = "{ type: timestamp, field: at }"
        try await bench.edit("a", ["k": #"{"at": 1}"#])
        _ = try await bench.run()
        try await bench.edit("a", ["k": #"{"at": 2, "by": "a"}"#])
        try await bench.edit("b", ["k": #"{"at": 3, "by": "b"}"#])
        let job = try await bench.run()
        #expect(job.counts["conflicts"] == 1)
        #expect(try await bench.contents("a")["k"] == #"{"at": 3, "by": "b"}"#)
    }

    @Test func deletesIgnoreIsAPlainUnion() async throws {
        var bench = try SyncBench()
        bench.deletes = "ignore"
        try await bench.edit("a", ["k": "v", "j": "w"])
        _ = try await bench.run()
        try await bench.edit("a", ["k": nil])
        let job = try await bench.run()
        #expect(job.counts["deleted"] == 0)
        #expect(try await bench.contents("a")["k"] == "v")
    }

    @Test func aProviderDownDuringARunLosesNothingAndDeletesNothing() async throws {
        var bench = try SyncBench()
        try await bench.edit("a", ["k1": "1", "k2": "2", "k3": "3"])
        _ = try await bench.run()
        try await bench.edit("a", ["k1": nil, "new": "n"])
        try await bench.edit("b", ["k2": nil])
        bench.down = ["b"]
        let down = try await bench.run()
        #expect(down.sync?.unlisted.map(\.provider) == ["b"])
        #expect(down.counts["deleted"] == 0)
        #expect(down.counts["heldBack"] == 1, "k1: b held it, and b could not be looked at")
        #expect(try await bench.contents("a") == ["k2": "2", "k3": "3", "new": "n"])
        #expect(try await bench.contents("b") == ["k1": "1", "k3": "3"])
        bench.down = []
        let back = try await bench.run()
        #expect(back.counts["deleted"] == 2)
        #expect(try await bench.contents("a") == ["k3": "3", "new": "n"])
        #expect(try await bench.contents("b") == ["k3": "3", "new": "n"])
    }

    /// Incremental too: such a run walks no snapshot, so it counts the snapshot's keys only once it has deletions to
    /// weigh against a percentage (a quiet night of 10,000,000 keys spent 0.7 s counting them).
    @Test(arguments: [false, true])
    func theMassDeleteGuardStopsBeforeDeletingAndForcePassesIt(incremental: Bool) async throws {
        var bench = try SyncBench()
        bench.incremental = incremental
        let keys = (0..<10).map { "k\($0)" }
        try await bench.edit("a", Dictionary(uniqueKeysWithValues: keys.map { ($0, "v") }))
        _ = try await bench.run()
        try await bench.edit("a", Dictionary(uniqueKeysWithValues: keys.prefix(6).map { ($0, nil) }))
        let refused = try await bench.run()
        #expect(refused.sync?.mode == (incremental ? "incremental" : "full"))
        #expect(refused.status == .failed)
        #expect(refused.error?.code == "ERR_TOO_MANY_DELETES")
        #expect(refused.error?.message.contains("delete 6 of the 10") == true)
        #expect(refused.error?.message.contains("--force") == true)
        #expect(refused.counts["deleted"] == 0)
        #expect(try await bench.contents("b").count == 10, "nothing was deleted")
        let dry = try await bench.run(dryRun: true, force: true)
        #expect(dry.sync?.deletions == Array(keys.prefix(6)))
        #expect(try await bench.contents("b").count == 10, "a dry run deletes nothing")
        let forced = try await bench.run(force: true)
        #expect(forced.status == .ok)
        #expect(forced.counts["deleted"] == 6)
        #expect(try await bench.contents("b").count == 4)
        #expect(try await bench.run().status == .ok, "--force passed it once; nothing is left to delete")
    }

    /// The next run drops the rows of keys gone from every provider, and deletes, counts and guards nothing for them.
    ///
    /// A run stopped in its delete phase leaves such rows: the rows of removed keys commit every few pages.
    @Test(arguments: [SyncDeletes.propagate, .ignore])
    func aRowOfAKeyGoneEverywhereIsDroppedWithoutADeletion(deletes: SyncDeletes) async throws {
        var bench = try SyncBench()
        bench.deletes = deletes.rawValue
        bench.maxDeletes = "1"
        let keys = (0..<6).map { "k\($0)" }
        try await bench.edit("a", Dictionary(uniqueKeysWithValues: keys.map { ($0, "v") }))
        #expect(try await bench.run().status == .ok)
        let gone = Dictionary(uniqueKeysWithValues: keys.prefix(4).map { ($0, String?.none) })
        try await bench.edit("a", gone)
        try await bench.edit("b", gone)
        let next = try await bench.run()
        #expect(next.status == .ok, "\(String(describing: next.error))")
        #expect(next.counts["keys"] == 6 && next.counts["deleted"] == 0 && next.counts["conflicts"] == 0)
        #expect(next.counts["repaired"] == 0 && next.counts["heldBack"] == 0)
        let after = try await bench.run()
        #expect(after.counts["keys"] == 2 && after.counts["inSync"] == 2, "the rows of the 4 keys are gone")
    }

    @Test func aCountLimitIsAnAbsoluteNumberOfKeys() async throws {
        var bench = try SyncBench()
        bench.maxDeletes = "1"
        try await bench.edit("a", ["x": "1", "y": "2", "z": "3", "w": "4"])
        let first = try await bench.run()
        #expect(first.status == .ok, "\(String(describing: first.error))")
        try await bench.edit("b", ["x": nil, "y": nil])
        #expect(try await bench.run().error?.code == "ERR_TOO_MANY_DELETES")
        try await bench.edit("a", ["x": "back"])
        let job = try await bench.run()
        #expect(job.status == .ok && job.counts["deleted"] == 1 && job.counts["conflicts"] == 1)
    }

    /// A snapshot of several pages, in either kind of state, meets every key.
    ///
    /// The sync reads the page after the one it walks ahead of time. Deletions on b, edits and new keys on a fall on both sides of
    /// every page boundary; a page read twice, skipped or met out of turn would show as keys taken for new (their
    /// deletions not propagated) or as changes in the run after.
    @Test(arguments: StateKind.allCases)
    func aSnapshotOfSeveralPagesMeetsEveryKey(kind: StateKind) async throws {
        var bench = try SyncBench()
        bench.state = try await TestState(kind)
        let count = 3_500  // three pages of 1,000 snapshot rows and part of a fourth
        let key = { (index: Int) in String(format: "k%05d", index) }
        var model = Dictionary(uniqueKeysWithValues: (0..<count).map { (key($0), "v1") })
        try await bench.edit("a", model)
        let first = try await bench.run()
        #expect(first.status == .ok && first.counts["repaired"] == count)

        let deleted = (0..<count).filter { $0 % 97 == 0 || [999, 1000, 1999, 2000, 2999, 3000].contains($0) }
        let changed = (0..<count).filter { $0 % 89 == 1 && !deleted.contains($0) }
        // Each sorts right after an existing key: "k01000+" comes between "k01000" and "k01001".
        let added = (0..<count).filter { $0 % 500 == 0 || $0 % 1000 == 999 }.map { key($0) + "+" }
        try await bench.edit("b", Dictionary(uniqueKeysWithValues: deleted.map { (key($0), String?.none) }))
        try await bench.edit(
            "a",
            Dictionary(uniqueKeysWithValues: changed.map { (key($0), "v2") } + added.map { ($0, Optional("new")) }))
        for index in deleted { model[key(index)] = nil }
        for index in changed { model[key(index)] = "v2" }
        for name in added { model[name] = "new" }

        let second = try await bench.run()
        #expect(second.status == .ok, "\(String(describing: second.error))")
        #expect(second.counts["keys"] == count + added.count)
        #expect(second.counts["deleted"] == deleted.count)
        #expect(second.counts["repaired"] == changed.count + added.count)
        #expect(second.counts["conflicts"] == 0)
        #expect(try await bench.contents("a") == model)
        #expect(try await bench.contents("b") == model)

        let third = try await bench.run()
        #expect(third.status == .ok)
        #expect(third.counts["inSync"] == model.count)
        #expect(third.counts["repaired"] == 0 && third.counts["deleted"] == 0)
    }

    /// Both listings failing part-way, with keys of the last page still to compare, leave no provider to compare
    /// them with: the job fails naming each listing's failure (it said "a (available); b (available)").
    @Test func listingsThatFailPartWayAreNamedWhenNoProviderIsLeft() async throws {
        var bench = try SyncBench()
        let name = { (index: Int) in "k" + String(10_000 + index).dropFirst() }
        try await bench.edit("a", Dictionary(uniqueKeysWithValues: (0..<1_500).map { (name($0), Optional("v")) }))
        // b's first page ends further on than a's, so the merge has keys in hand when both listings fail.
        let onB = Array(0..<500) + Array(1_000..<1_600)
        try await bench.edit("b", Dictionary(uniqueKeysWithValues: onB.map { (name($0), Optional("v")) }))
        bench.listPages = 1
        let job = try await bench.run()
        #expect(job.status == .error)
        let error = try #require(job.error)
        #expect(error.code == ErrorCode.noProvider.rawValue)
        #expect(!error.message.contains("(available)"), "\(error.message)")
        #expect(error.message.contains("a (the test's listing fails past page 1)"), "\(error.message)")
        #expect(error.message.contains("b (the test's listing fails past page 1)"), "\(error.message)")
    }

    /// A provider that answers unavailable part-way through an incremental run (its memoised availability expired
    /// and the next page asked again) is named unlisted from there on, and the run keeps its cursors, so the next run
    /// brings it every change it missed. (It was left out silently: the run counted as clean, its cursors moved past
    /// the changes, and the provider never got them.)
    @Test func aProviderThatLeavesPartWayIsUnlistedAndGetsTheChangesNextRun() async throws {
        var bench = try SyncBench()
        bench.incremental = true
        bench.clock = ManualClock()
        let keys = (0..<1_500).map { "k" + String(10_000 + $0).dropFirst() }
        try await bench.edit("a", Dictionary(uniqueKeysWithValues: keys.map { ($0, Optional("v1")) }))
        _ = try await bench.run()
        _ = try await bench.run()
        try await bench.edit("a", Dictionary(uniqueKeysWithValues: keys.map { ($0, Optional("v2")) }))
        // b takes the first page's writes, then goes away before the second page.
        bench.leaves = ["b": 1]
        let interrupted = try await bench.run()
        #expect(interrupted.status == .ok)
        let unlisted = interrupted.sync?.unlisted.first { $0.provider == "b" }
        #expect(
            unlisted?.message.contains("became unavailable during the run") == true, "\(String(describing: unlisted))")
        #expect(try await bench.contents("b").values.filter { $0 == "v2" }.count == 1_000)
        bench.leaves = [:]
        let next = try await bench.run()
        #expect(next.status == .ok && next.sync?.unlisted == [])
        #expect(try await bench.contents("b") == bench.contents("a"))
    }

    /// A copy another writer changes between the merge (which found the key deleted elsewhere and unchanged here)
    /// and the deletion step is not removed, and the report counts it held back instead of saying nothing; the next
    /// run sees the edit beat the deletion.
    @Test func aCopyChangedBetweenTheMergeAndTheDeletionIsHeldBackAndSaidSo() async throws {
        var bench = try SyncBench()
        try await bench.edit("a", ["k1": "1", "k2": "2", "k3": "3", "k4": "4"])
        _ = try await bench.run()
        try await bench.edit("a", ["k1": nil])
        // b's first read is the merge's; before its second, the deletion step's, another writer edits k1 there.
        bench.editedBeforeRead = ["b": 2]
        let job = try await bench.run()
        #expect(job.status == .ok)
        #expect(job.counts["deleted"] == 0 && job.counts["heldBack"] == 1, "\(job.counts)")
        #expect(try await bench.contents("b")["k1"] == "changed outside the run")
        bench.editedBeforeRead = [:]
        let next = try await bench.run()
        #expect(next.counts["conflicts"] == 1 && next.counts["repaired"] == 1, "\(next.counts)")
        #expect(try await bench.contents("a")["k1"] == "changed outside the run")
    }

    /// Random sets and removes on random providers between runs (one provider sometimes down), each run compared with
    /// a model of the intended semantics: per key and provider, the value the last sync left.
    @Test(arguments: [1, 7, 42])
    func randomHistoriesMatchTheModel(seed: UInt64) async throws {
        var bench = try SyncBench(providers: ["a", "b", "c"])
        bench.maxDeletes = "\"100%\""
        // c's listing is sorted in a temporary table before the merge.
        bench.reversed = ["c"]
        var random = SeededRandom(seed: seed)
        let pool = (0..<12).map { "key\($0)" }
        var held: [String: [String: String]] = ["a": [:], "b": [:], "c": [:]]
        /// The model's snapshot: per key, what each provider held after the sync that last looked at it.
        var snapshot: [String: [String: String]] = [:]
        for round in 0..<14 {
            for _ in 0..<Int.random(in: 0...5, using: &random) {
                let provider = bench.providers.randomElement(using: &random)!
                let key = pool.randomElement(using: &random)!
                let value: String? = Bool.random(using: &random) ? nil : "v\(Int.random(in: 0..<4, using: &random))"
                try await bench.edit(provider, [key: value])
                held[provider]![key] = value
            }
            bench.down = Int.random(in: 0..<4, using: &random) == 0 ? ["c"] : []
            let job = try await bench.run()
            #expect(job.status == .ok, "round \(round): \(String(describing: job.error))")
            #expect(job.sync?.unlisted.filter { !bench.down.contains($0.provider ?? "") } == [])
            let listed = bench.providers.filter { !bench.down.contains($0) }
            for key in pool {
                let row = snapshot[key]
                let current = listed.map { held[$0]![key] }
                let changed = listed.indices.filter { current[$0] != nil && current[$0] != row?[listed[$0]] }
                let deleted = listed.indices.filter { current[$0] == nil && row?[listed[$0]] != nil }
                let unknownHeld = row?.keys.contains { bench.down.contains($0) } ?? false
                var winner: String?
                if row != nil, !changed.isEmpty {
                    winner = current[changed[0]]
                } else if row != nil, !deleted.isEmpty {
                    if unknownHeld { continue }
                    for id in listed { held[id]![key] = nil }
                    snapshot[key] = nil
                    continue
                } else {
                    winner = current.compactMap { $0 }.first
                }
                var newRow = row?.filter { bench.down.contains($0.key) } ?? [:]
                if let winner {
                    for id in listed {
                        held[id]![key] = winner
                        newRow[id] = winner
                    }
                }
                snapshot[key] = newRow.isEmpty ? nil : newRow
            }
            for id in bench.providers {
                #expect(try await bench.contents(id) == held[id]!, "round \(round), provider \(id)")
            }
        }
    }

    /// The same random histories on two copies, one synced with `incremental: true` and one in full: after every run
    /// both hold the same keys and values on every provider and the same snapshot.
    @Test(arguments: [3, 11, 29])
    func incrementalRunsEqualFullRunsOverRandomHistories(seed: UInt64) async throws {
        let outcome = try await IncrementalAgainstFull.run(seed: seed, scheduled: false)
        #expect(outcome.differences == [], "seed \(seed)")
        #expect(outcome.incrementalRounds >= 8, "most rounds read only the change feeds")
    }

    /// Once a run has found a key in sync on every provider, or made it so, the next reads none of its copies while
    /// every listing gives the tag recorded then (SQLite's tag is its value's digest, so a value the run wrote has a
    /// known tag at once); a key changed since is read again.
    @Test func aKeyNoProviderChangedSinceItWasFoundInSyncIsNotRead() async throws {
        var bench = try SyncBench()
        try await bench.edit("a", Dictionary(uniqueKeysWithValues: (0..<50).map { ("k\($0)", "v\($0)") }))
        try await bench.edit("b", ["k0": "v0"])
        let first = try await bench.run()
        #expect(first.counts["repaired"] == 49 && first.counts["inSync"] == 1)
        bench.unreadable = ["a", "b"]
        let spared = try await bench.run()
        #expect(spared.status == .ok && spared.counts["inSync"] == 50 && spared.counts["failed"] == 0)
        // Told to read every copy (after a codec's key was replaced, say), the run reads them all: here, all fail.
        bench.readUnchanged = true
        let everything = try await bench.run()
        #expect(everything.status == .failed && everything.counts["failed"] == 50)
        bench.readUnchanged = false
        // So does one run told so (`cloudsync run --read-unchanged`), and the file's setting is left as it was.
        let once = try await bench.run(readUnchanged: true)
        #expect(once.status == .failed && once.counts["failed"] == 50)
        #expect(try await bench.run().counts["failed"] == 0)
        try await bench.edit("b", ["k7": "edited behind its back"])
        let edited = try await bench.run()
        #expect(edited.counts["failed"] == 1 && edited.failures.map(\.key) == ["k7"])
        bench.unreadable = []
        #expect(try await bench.run().counts["repaired"] == 1)
        #expect(try await bench.contents("a")["k7"] == "edited behind its back")
    }

    /// A sync that says nothing reads change feeds where every provider has one and a cursor, and says so; told
    /// `incremental: false`, it compares in full and says why.
    @Test func incrementalIsTheDefaultAndTheReportSaysWhichRan() async throws {
        var bench = try SyncBench()
        bench.incremental = nil
        try await bench.edit("a", Dictionary(uniqueKeysWithValues: (0..<20).map { ("k\($0)", "v") }))
        let first = try await bench.run()
        #expect(first.sync?.mode == "full")
        #expect(
            first.sync?.fullBecause == [
                "a": "no earlier clean run left a cursor", "b": "no earlier clean run left a cursor",
            ])
        _ = try await bench.run()
        try await bench.edit("a", ["k1": "new"])
        let quiet = try await bench.run()
        #expect(
            quiet.sync?.mode == "incremental" && quiet.sync?.fullBecause == [:], "\(String(describing: quiet.sync))")
        #expect(quiet.counts["keys"] == 1 && quiet.counts["repaired"] == 1)
        bench.incremental = false
        let full = try await bench.run()
        #expect(full.sync?.mode == "full" && full.sync?.modes == ["a": "full", "b": "full"])
        #expect(full.sync?.fullBecause?["a"] == "the job sets `incremental: false`")
        #expect(full.counts["keys"] == 20)
    }

    /// A change feed's keys carry no tags, but SQLite's tag is its value's digest: a key an incremental run finds or
    /// makes in sync records its copies' digests as their tags, so a later full comparison (`incremental: false`, or
    /// the fallback after a refused cursor) reads none of the keys the feeds brought.
    @Test func keysAnIncrementalRunSettledAreNotReadByTheNextFullComparison() async throws {
        var bench = try SyncBench()
        bench.incremental = true
        try await bench.edit("a", Dictionary(uniqueKeysWithValues: (0..<20).map { ("k\($0)", "v\($0)") }))
        _ = try await bench.run()
        _ = try await bench.run()
        try await bench.edit("a", ["k1": "new"])
        try await bench.edit("b", ["k2": "other", "fresh": "f"])
        let incremental = try await bench.run()
        #expect(incremental.sync?.mode == "incremental" && incremental.counts["repaired"] == 3)
        bench.incremental = false
        bench.unreadable = ["a", "b"]
        let full = try await bench.run()
        #expect(
            full.status == .ok && full.counts["inSync"] == 21 && full.counts["failed"] == 0,
            "\(full.counts) \(full.failures.map(\.key))")
    }

    /// A full comparison reads and writes only the keys whose tags moved, gathered across listing pages: three keys
    /// changed a thousand keys apart cost one read of each side and one write, not three of each.
    @Test func aFewChangedKeysFarApartAreDecidedInOneBatch() async throws {
        var bench = try SyncBench()
        try await bench.edit(
            "a", Dictionary(uniqueKeysWithValues: (0..<3_000).map { (String(format: "k%04d", $0), "v") }))
        _ = try await bench.run()
        let quiet = try await bench.runReport()
        let requests = { (report: RunReport, id: String) in report.providers.first { $0.id == id }?.requests ?? -1 }
        try await bench.edit("a", ["k0000": "new", "k1500": "new", "k2999": "new"])
        let changed = try await bench.runReport()
        #expect(changed.jobs[0].counts["repaired"] == 3 && changed.jobs[0].counts["inSync"] == 2_997)
        // One read of each side and one write to b, beside what the quiet run's listings cost.
        #expect(requests(changed, "a") == requests(quiet, "a") + 1, "\(changed.providers)")
        #expect(requests(changed, "b") == requests(quiet, "b") + 2, "\(changed.providers)")
        #expect(try await bench.contents("b")["k1500"] == "new")
    }

    @Test func anIncrementalRunReadsOnlyTheChangedKeys() async throws {
        var bench = try SyncBench()
        bench.incremental = true
        try await bench.edit("a", Dictionary(uniqueKeysWithValues: (0..<300).map { ("k\($0)", "v") }))
        #expect(try await bench.run().counts["keys"] == 300)
        // The first run's own writes are in b's feed once; from then on only what changed.
        _ = try await bench.run()
        try await bench.edit("a", ["k1": "new", "k2": nil])
        try await bench.edit("b", ["fresh": "f"])
        let job = try await bench.run()
        #expect(job.sync?.modes == ["a": "incremental", "b": "incremental"])
        #expect(job.sync?.fullBecause == [:])
        #expect(job.counts["keys"] == 3 && job.counts["repaired"] == 2 && job.counts["deleted"] == 1)
        #expect(try await bench.contents("b")["k1"] == "new")
        #expect(try await bench.contents("b")["k2"] == nil)
        #expect(try await bench.contents("a")["fresh"] == "f")
    }

    @Test func aRunThatLeavesAFailureBehindKeepsTheLastCleanRunsCursors() async throws {
        var bench = try SyncBench()
        bench.incremental = true
        try await bench.edit("a", ["one": "1", "two": "2"])
        _ = try await bench.run()
        _ = try await bench.run()
        try await bench.edit("a", ["one": "edited", "two": "edited"])
        bench.refuses = ["b": "one"]
        let failed = try await bench.run()
        #expect(failed.status == .failed && failed.counts["failed"] == 1 && failed.counts["repaired"] == 1)
        // The next run reads the feeds from before the failed run, so it still sees the edit b did not take.
        bench.refuses = [:]
        let next = try await bench.run()
        #expect(next.sync?.modes == ["a": "incremental", "b": "incremental"])
        #expect(next.counts["repaired"] == 1)
        #expect(try await bench.contents("b") == ["one": "edited", "two": "edited"])
    }

    @Test func aRefusedCursorFallsBackToAFullComparisonForThatProvider() async throws {
        var bench = try SyncBench()
        bench.incremental = true
        try await bench.edit("a", ["one": "1", "two": "2", "three": "3"])
        _ = try await bench.run()
        _ = try await bench.run()
        // a's database is replaced by another file holding the same keys but one: its cursor names the old file.
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: bench.path("a") + suffix) }
        try await bench.edit("a", ["one": "1", "three": "3 edited"])
        let job = try await bench.run()
        #expect(job.status == .ok)
        #expect(job.sync?.modes == ["a": "full", "b": "incremental"])
        #expect(job.sync?.fullBecause?["a"]?.contains("another database") == true)
        #expect(job.counts["deleted"] == 1)
        #expect(try await bench.contents("b") == ["one": "1", "three": "3 edited"])
        // That run left a fresh cursor for a.
        #expect(try await bench.run().sync?.modes == ["a": "incremental", "b": "incremental"])
    }

    @Test func aProviderWithoutAFeedIsComparedInFullAndSaysWhy() async throws {
        let directory = try TemporaryDirectory()
        let source = """
            version: 1
            name: mixed
            providers:
              db: { type: sqlite, path: data/db.db, create: true }
              files: { type: directory, path: data/files, create: true }
            store: { providers: [db, files] }
            jobs:
              - { type: sync, name: both, incremental: true }
            """
        func run() async throws -> RunReport.Job {
            let spec = try PipelineLoader.load(
                source: source, file: "p.yaml", directory: directory.path, registry: BuiltInProviders.registry,
                environment: [:])
            return try await PipelineRunner(try PipelineCompiler.compile(spec, environment: [:]), options: RunOptions())
                .run().report.jobs[0]
        }
        _ = try await run()
        let job = try await run()
        #expect(job.status == .ok, "\(String(describing: job.error))")
        #expect(job.sync?.modes == ["db": "incremental", "files": "full"])
        #expect(job.sync?.fullBecause?["files"] == "it offers no change feed")
    }

    /// A SQLite database read from its feed beside a directory listed in full (it offers no feed), over random
    /// histories: the same contents as two full syncs of the same edits, removals in the directory included.
    @Test(arguments: [5, 17, 23])
    func aMixedRunEqualsAFullRunOverRandomHistories(seed: UInt64) async throws {
        let copies = [try TemporaryDirectory(), try TemporaryDirectory()]
        func source(_ incremental: Bool) -> String {
            """
            version: 1
            name: mixed
            providers:
              db: { type: sqlite, path: data/db.db, create: true }
              files: { type: directory, path: data/files, create: true }
            store: { providers: [db, files] }
            jobs:
              - { type: sync, name: both, incremental: \(incremental), maxDeletes: "100%" }
            """
        }
        func run(_ copy: Int) async throws -> RunReport.Job {
            let spec = try PipelineLoader.load(
                source: source(copy == 1), file: "p.yaml", directory: copies[copy].path,
                registry: BuiltInProviders.registry, environment: [:])
            return try await PipelineRunner(try PipelineCompiler.compile(spec, environment: [:]), options: RunOptions())
                .run().report.jobs[0]
        }
        func provider(_ copy: Int, _ id: String) throws -> any Provider {
            id == "db"
                ? try SQLiteProvider(id: id, path: copies[copy].file("data/db.db"))
                : try DirectoryProvider(id: id, root: copies[copy].file("data/files"))
        }
        func contents(_ copy: Int, _ id: String) async throws -> [String: String] {
            let provider = try provider(copy, id)
            let keys = try await listEveryKey(of: provider, pageSize: 100)
            var items: [String: String] = [:]
            for (key, result) in zip(keys, try await provider.get(keys)) { items[key] = try result.get() }
            await provider.close()
            return items
        }
        var random = SeededRandom(seed: seed)
        let pool = (0..<30).map { "key\($0)" }
        for copy in 0..<2 { _ = try await run(copy) }
        for round in 0..<20 {
            for _ in 0..<Int.random(in: 0...8, using: &random) {
                let id = Bool.random(using: &random) ? "db" : "files"
                let key = pool.randomElement(using: &random)!
                let value: String? =
                    Int.random(in: 0..<3, using: &random) == 0 ? nil : "v\(Int.random(in: 0..<4, using: &random))"
                for copy in 0..<2 {
                    let provider = try provider(copy, id)
                    if let value {
                        _ = try await provider.set([KeyValue(key, value)])
                    } else {
                        _ = try await provider.remove([key])
                    }
                    await provider.close()
                }
            }
            let full = try await run(0)
            let mixed = try await run(1)
            #expect(full.status == .ok && mixed.status == .ok, "round \(round)")
            #expect(mixed.sync?.modes == ["db": "incremental", "files": "full"], "round \(round)")
            #expect(full.counts["deleted"] == mixed.counts["deleted"], "round \(round)")
            for id in ["db", "files"] {
                #expect(try await contents(0, id) == contents(1, id), "round \(round), provider \(id)")
            }
        }
    }
}

@Suite struct StreamingJobTests {
    @Test func migrateShowsACheapCountAsItsTotalAndNoTotalWithoutOne() async throws {
        let directory = try TemporaryDirectory()
        let items = (0..<1200).map { KeyValue("k\($0)", "v") }
        let source = try SQLiteProvider(id: "counted", path: directory.file("data/counted.db"))
        _ = try await source.set(items)
        await source.close()
        let files = try DirectoryProvider(root: directory.file("data/files"))
        _ = try await files.set(Array(items.prefix(150)))
        let spec = try PipelineLoader.load(
            source: """
                version: 1
                name: streaming
                providers:
                  counted: { type: sqlite, path: data/counted.db }
                  files: { type: directory, path: data/files }
                  target: { type: sqlite, path: data/target.db, create: true }
                store:
                  providers: [target]
                jobs:
                  - { type: migrate, name: counted, from: counted, to: target }
                  - { type: migrate, name: uncounted, from: files, to: target, overwrite: ifMissing }
                  - { type: clear, name: clear, provider: all, confirm: true }
                """, file: "p.yaml", directory: directory.path, registry: BuiltInProviders.registry, environment: [:])
        let totals = Protected<[String: Set<Int?>]>([:])
        var options = RunOptions()
        options.onProgress = { job, _, total, _ in totals.withLock { _ = $0[job, default: []].insert(total) } }
        let outcome = try await PipelineRunner(try PipelineCompiler.compile(spec, environment: [:]), options: options)
            .run()
        #expect(outcome.report.jobs.map(\.status) == [.ok, .ok, .ok])
        #expect(outcome.report.jobs[0].counts["copied"] == 1200)
        #expect(outcome.report.jobs[1].counts["skipped"] == 150)
        #expect(outcome.report.jobs[2].counts["removed"] == 1200)
        #expect(totals.withLock { $0["counted"] } == [1200])
        #expect(totals.withLock { $0["uncounted"] } == [nil])
    }
}
