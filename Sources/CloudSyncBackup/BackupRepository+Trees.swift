import CloudSync
import Foundation

/// Reading a snapshot's trees: all at once, or pack by pack when some cannot be read.
extension BackupRepository {
    /// The `[key, value id]` entries of `trees` (of the snapshot object `name`), in order, each with the source's
    /// version tag third where it was recorded.
    func entries(ofTrees trees: [String], in name: String) async throws(CloudSyncError) -> [[String]] {
        var entries: [[String]] = []
        for tree in try await blobs(trees, of: name) {
            guard let run = Self.treeRows(tree[...]) else {
                throw CloudSyncError(
                    .decode, "a tree of \(name) in \(provider) is damaged", provider: provider, key: name)
            }
            entries += run
        }
        return entries
    }

    /// The value ids of every entry of `trees` (of the snapshot object `name`), one pack of trees at a time: what a
    /// prune needs, without holding every entry's key and tag (a million entries took 250 MB that way).
    func valueIDs(ofTrees trees: [String], in name: String) async throws(CloudSyncError) -> [String] {
        var placed: [(id: String, location: Location)] = []
        for tree in trees {
            guard let location = try await location(of: tree) else { throw unlocated(tree, in: name) }
            placed.append((tree, location))
        }
        var ids: [String] = []
        let read = try await forEachTree(placed) { _, rows in
            for row in rows { ids.append(row[1]) }
        }
        if let pack = read.unopened.first { throw pack.error }
        guard read.malformed.isEmpty else {
            throw CloudSyncError(.decode, "a tree of \(name) in \(provider) is damaged", provider: provider, key: name)
        }
        return ids
    }

    /// The entries of the trees that can be read, in order, and each tree that cannot (its pack damaged or missing,
    /// or its bytes not a tree) with why: one damaged tree loses only the keys it held.
    func readableEntries(ofTrees trees: [String], in name: String) async throws(CloudSyncError)
        -> (entries: [[String]], lost: [(tree: String, error: CloudSyncError)])
    {
        do {
            return (try await entries(ofTrees: trees, in: name), [])
        } catch  where error.code == .decode {
            // A damaged repository: pack by pack, so the trees of the packs that open are still read.
        }
        var lost: [(tree: String, error: CloudSyncError)] = []
        var placed: [(id: String, location: Location)] = []
        for tree in trees {
            guard let location = try await location(of: tree) else {
                lost.append((tree, unlocated(tree, in: name)))
                continue
            }
            placed.append((tree, location))
        }
        let read = try await readTrees(placed)
        var packErrors: [String: CloudSyncError] = [:]
        for pack in read.unopened {
            // Read errors still stop the restore; only damage is the trees' alone.
            guard pack.error.code == .decode else { throw pack.error }
            for tree in pack.trees { packErrors[tree] = pack.error }
        }
        for tree in trees {
            if let error = packErrors[tree] {
                lost.append((tree, error))
            } else if read.malformed.contains(tree) {
                lost.append(
                    (
                        tree,
                        CloudSyncError(
                            .decode, "a tree of \(name) in \(provider) is damaged", provider: provider, key: name)
                    ))
            }
        }
        return (trees.compactMap { read.trees[$0] }.flatMap { $0 }, lost)
    }

    /// The trees `placed` names (each with where its blob is), each pack read once: the entries of every tree that can
    /// be read, each pack that does not open (with its trees and its error), and the trees whose bytes are not a tree.
    func readTrees(_ placed: [(id: String, location: Location)]) async throws(CloudSyncError)
        -> (
            trees: [String: [[String]]], unopened: [(pack: String, trees: Set<String>, error: CloudSyncError)],
            malformed: Set<String>
        )
    {
        var trees: [String: [[String]]] = [:]
        let read = try await forEachTree(placed) { id, rows in trees[id] = rows }
        return (trees, read.unopened, read.malformed)
    }

    /// Reads the trees `placed` names, each pack once, handing `visit` each tree's id and rows as its pack is read;
    /// answers each pack that does not open (with its trees and its error) and the trees whose bytes are not a tree.
    func forEachTree(
        _ placed: [(id: String, location: Location)], _ visit: (_ id: String, _ rows: [[String]]) -> Void
    ) async throws(CloudSyncError)
        -> (unopened: [(pack: String, trees: Set<String>, error: CloudSyncError)], malformed: Set<String>)
    {
        var byPack: [String: [(id: String, location: Location)]] = [:]
        for tree in placed { byPack[tree.location.pack, default: []].append(tree) }
        var unopened: [(pack: String, trees: Set<String>, error: CloudSyncError)] = []
        var malformed: Set<String> = []
        for pack in byPack.keys.sorted() {
            let bytes: [UInt8]
            switch try await openEach([Self.prefix + "data." + pack])[0] {
            case .success(let opened): bytes = opened
            case .failure(let error):
                unopened.append((pack, Set(byPack[pack]!.map(\.id)), error))
                continue
            }
            for (id, location) in byPack[pack]! {
                let end = location.offset + location.length
                guard end <= bytes.count, let run = Self.treeRows(bytes[location.offset..<end]) else {
                    malformed.insert(id)
                    continue
                }
                visit(id, run)
            }
        }
        return (unopened, malformed)
    }

    /// The rows of a tree's bytes (`[key, value id]`, or with a version tag third); nil when they are not a tree.
    static func treeRows(_ bytes: ArraySlice<UInt8>) -> [[String]]? {
        guard let run = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [[String]],
            run.allSatisfy({ $0.count == 2 || $0.count == 3 })
        else { return nil }
        return run
    }
}
