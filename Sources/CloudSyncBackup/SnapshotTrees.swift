import CloudSync
import Foundation

/// How a snapshot object names its trees: their ids (`trees`), or for a snapshot of very many, ids of tree lists
/// (`treeLists`) to be replaced `levels` times by the ids each list holds (`treeLevels`).
struct SnapshotTrees: Sendable {
    /// Tree ids when `levels` is 0, else the ids of the top lists.
    var ids: [String]
    /// How many times to replace each id by its list's ids to reach tree ids.
    var levels: Int

    /// The trees the snapshot object `object` (named `name`) names; `ERR_DECODE` when it names none: a prune must
    /// not take it for a snapshot that needs nothing.
    init(_ object: [String: Any], name: String, provider: String) throws(CloudSyncError) {
        if let trees = object["trees"] as? [String] {
            (ids, levels) = (trees, 0)
        } else if let lists = object["treeLists"] as? [String], let levels = object["treeLevels"] as? Int,
            (1...8).contains(levels)
        {
            (ids, self.levels) = (lists, levels)
        } else {
            throw CloudSyncError(.decode, "\(name) in \(provider) names no trees", provider: provider, key: name)
        }
    }
}

extension BackupRepository {
    /// The tree ids `named` (of the snapshot object `name`) comes to, in order, and the ids of the tree lists read
    /// on the way (blobs the snapshot needs too).
    func treeIDs(_ named: SnapshotTrees, in name: String) async throws(CloudSyncError)
        -> (trees: [String], lists: [String])
    {
        var ids = named.ids
        var lists: [String] = []
        for _ in 0..<named.levels {
            lists += ids
            var next: [String] = []
            for list in try await blobs(ids, of: name) {
                guard let listed = try? JSONSerialization.jsonObject(with: Data(list)) as? [String] else {
                    throw CloudSyncError(
                        .decode, "a tree list of \(name) in \(provider) is damaged", provider: provider, key: name)
                }
                next += listed
            }
            ids = next
        }
        return (ids, lists)
    }
}
