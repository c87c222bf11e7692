import CloudSync
import Foundation

/// One problem `verify` found, with the object it concerns.
public struct RepositoryProblem: Sendable, Equatable {
    /// The object's store key (`cloudsync-repo.<kind>.<id>`).
    public var object: String
    /// What is wrong with it.
    public var message: String
    /// Its error code: `ERR_DECODE` for damage, or the provider's for an object that could not be read.
    public var code: ErrorCode
}

/// What `verify` checked and found.
public struct RepositoryCheck: Sendable, Equatable {
    public var snapshots = 0
    public var indexes = 0
    /// Packs the indexes name.
    public var packs = 0
    /// Packs read, decrypted and hashed blob by blob.
    public var packsRead = 0
    /// Packs no index names: left by a backup that was killed before its index; prune removes them.
    public var unindexedPacks = 0
    /// Every problem, sorted by object.
    public var problems: [RepositoryProblem] = []
}

extension BackupRepository {
    /// Checks the repository and returns every problem found, each naming its object.
    ///
    /// Every index and snapshot opens, every blob a snapshot names is indexed, every pack an index names exists,
    /// and, for `readData` (0 to 1) of the packs chosen at random, each pack opens and each of its blobs hashes to
    /// its id. Problems are collected, not thrown; only a provider that cannot be read throws. `progress` is told
    /// the packs read so far and how many will be, after each.
    public func verify(readData share: Double, progress: (_ done: Int, _ total: Int) -> Void = { _, _ in })
        async throws(CloudSyncError) -> RepositoryCheck
    {
        var check = RepositoryCheck()
        check.problems = damagedIndexes
        check.indexes = objectNames("index").count
        let present = Set(objectNames("data"))
        var packs: [String: [(id: String, location: Location)]] = [:]
        for (id, location) in index { packs[location.pack, default: []].append((id, location)) }
        check.packs = packs.count
        for pack in packs.keys.sorted() where !present.contains(Self.prefix + "data." + pack) {
            check.problems.append(
                RepositoryProblem(
                    object: Self.prefix + "data." + pack,
                    message: "pack \(pack) is named by an index but missing", code: .decode))
        }
        check.unindexedPacks =
            present.filter { packs[String($0.dropFirst((Self.prefix + "data.").count))] == nil }
            .count
        try await checkSnapshots(into: &check)
        var chosen = packs.keys.filter { present.contains(Self.prefix + "data." + $0) }.shuffled()
        chosen = Array(chosen.prefix(Int((Double(chosen.count) * min(max(share, 0), 1)).rounded(.up))))
        for pack in chosen.sorted() {
            check.packsRead += 1
            if let problem = try await readPack(pack, holding: packs[pack]!) { check.problems.append(problem) }
            progress(check.packsRead, chosen.count)
        }
        // One problem per object: the first found (a damaged pack is met first through a tree it holds).
        var named: Set<String> = []
        check.problems = check.problems.filter { named.insert($0.object).inserted }
        check.problems.sort { $0.object < $1.object }
        return check
    }

    /// Opens every snapshot and reads every tree they name, each pack of trees once (snapshots share most of their
    /// trees), adding a problem for each snapshot that does not open or names trees or values no index holds, and
    /// for each pack of trees that is damaged.
    private func checkSnapshots(into check: inout RepositoryCheck) async throws(CloudSyncError) {
        let snapshotNames = objectNames("snapshot")
        check.snapshots = snapshotNames.count
        var treesOf: [(name: String, trees: [String])] = []
        for (name, opened) in zip(snapshotNames, try await openEach(snapshotNames)) {
            do throws(CloudSyncError) {
                let object = try snapshotObject(try opened.get(), name: name)
                let named = try SnapshotTrees(object, name: name, provider: provider)
                treesOf.append((name, try await treeIDs(named, in: name).trees))
            } catch {
                check.problems.append(
                    RepositoryProblem(object: error.key ?? name, message: error.message, code: error.code))
            }
        }
        let (trees, damagedPacks) = try await readTrees(Set(treesOf.flatMap(\.trees)))
        check.problems += damagedPacks
        // A tree whose pack is damaged is that pack's problem, reported once under it; a snapshot is named for
        // what only it gets wrong: trees or values no index holds.
        for (name, ids) in treesOf {
            let unindexed = ids.filter { index[$0] == nil }.count
            let missing = ids.compactMap { trees[$0] }.joined().filter { storedSize(of: $0[1]) == nil }.count
            if unindexed > 0 || missing > 0 {
                check.problems.append(
                    RepositoryProblem(
                        object: name,
                        message:
                            "\(unindexed) of its \(ids.count) trees and \(missing) of their values are in no index",
                        code: .decode))
            }
        }
    }

    /// Reads `pack` whole and checks that each blob the index places in it hashes to its id and is where the pack's
    /// header says; the problem found, if any.
    private func readPack(_ pack: String, holding blobs: [(id: String, location: Location)])
        async throws(CloudSyncError) -> RepositoryProblem?
    {
        let name = Self.prefix + "data." + pack
        guard case .success(let bytes) = try await openEach([name])[0] else {
            return RepositoryProblem(object: name, message: "pack \(pack) does not open: damaged", code: .decode)
        }
        let wrong = blobs.filter { blob in
            let end = blob.location.offset + blob.location.length
            return end > bytes.count || keys.objectID(of: bytes[blob.location.offset..<end]) != blob.id
        }
        if !wrong.isEmpty {
            return RepositoryProblem(
                object: name, message: "\(wrong.count) blobs of pack \(pack) do not hash to their ids", code: .decode)
        }
        // A pack that describes itself must agree with the index; one written before format 3 has no header.
        guard let header = PackHeader.blobs(of: bytes) else { return nil }
        let described = Set(header.map { "\($0.id) \($0.offset) \($0.length)" })
        let disagreeing = blobs.filter { !described.contains("\($0.id) \($0.location.offset) \($0.location.length)") }
        guard !disagreeing.isEmpty else { return nil }
        return RepositoryProblem(
            object: name,
            message: "the index places \(disagreeing.count) blobs in pack \(pack) where its header does not; "
                + "`cloudsync repair index` rebuilds the index from the packs", code: .decode)
    }

    /// The entries of each tree of `ids` that can be read, reading each pack once, and a problem naming each pack
    /// that does not open or tree that is not one.
    private func readTrees(_ ids: Set<String>) async throws(CloudSyncError)
        -> (trees: [String: [[String]]], problems: [RepositoryProblem])
    {
        let read = try await readTrees(ids.compactMap { id in index[id].map { (id, $0) } })
        var problems = read.unopened.map { pack in
            RepositoryProblem(
                object: Self.prefix + "data." + pack.pack, message: "pack \(pack.pack) does not open: damaged",
                code: .decode)
        }
        for id in read.malformed.sorted() {
            let pack = index[id]!.pack
            problems.append(
                RepositoryProblem(
                    object: Self.prefix + "data." + pack, message: "tree \(id) in pack \(pack) is not a tree",
                    code: .decode))
        }
        return (read.trees, problems)
    }
}
