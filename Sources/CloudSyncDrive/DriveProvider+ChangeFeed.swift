import CloudSync
import CloudSyncHTTP
import Foundation
import Synchronization

/// The change feed: Drive's `changes` of the app data folder, and its cursor.
extension DriveProvider {
    // MARK: Changes

    /// What changed in the app data folder since a cursor.
    public struct Changes: Sendable, Equatable {
        /// Keys whose file was created or changed.
        public var changed: [String]
        /// Keys whose file was deleted (or trashed); a deleted file this provider never saw is in ``removedFileIDs``.
        public var removed: [String]
        /// Ids of deleted files whose names were not known here.
        public var removedFileIDs: [String]
        /// The cursor for the next call.
        public var cursor: String
    }

    /// The changes since `cursor` (Drive's page token); nil starts the feed now and returns no changes.
    public func changes(since cursor: String?) async throws(CloudSyncError) -> Changes {
        try ensureOpen()
        guard let cursor else {
            let request = HTTPRequest(
                method: .get, url: url("/drive/v3/changes/startPageToken", [("fields", "startPageToken")]))
            let token = try json(try await sendExpectingSuccess(request), request)["startPageToken"] as? String
            guard let token else {
                throw CloudSyncError(.provider, "Drive answered without a startPageToken", provider: id)
            }
            return Changes(changed: [], removed: [], removedFileIDs: [], cursor: token)
        }
        let feed = try await readFeed(since: cursor)
        var result = Changes(changed: [], removed: [], removedFileIDs: [], cursor: feed.cursor)
        for change in feed.changes {
            guard let name = change.name ?? cache.withLock({ $0.names[change.fileID] }) else {
                if change.removed { result.removedFileIDs.append(change.fileID) }
                continue
            }
            // Another device wrote or deleted it: the cached id may be stale or a duplicate now.
            doubt(name)
            if change.removed {
                result.removed.append(name)
            } else {
                result.changed.append(name)
            }
        }
        return result
    }

    /// One change the feed reports: a file created, changed, trashed or deleted.
    struct FeedChange {
        var fileID: String
        /// The file's name; nil when Drive gave none (a deleted file).
        var name: String?
        var removed: Bool
    }

    /// Every change since `cursor`, all pages, and the cursor after them.
    func readFeed(since cursor: String) async throws(CloudSyncError) -> (changes: [FeedChange], cursor: String) {
        var changes: [FeedChange] = []
        var token = cursor
        while true {
            let request = HTTPRequest(
                method: .get,
                url: url(
                    "/drive/v3/changes",
                    [
                        ("pageToken", token), ("spaces", "appDataFolder"), ("pageSize", "1000"),
                        ("fields", "nextPageToken,newStartPageToken,changes(fileId,removed,file(id,name,trashed))"),
                    ]))
            let object = try json(try await sendExpectingSuccess(request), request)
            for change in object["changes"] as? [[String: Any]] ?? [] {
                let file = change["file"] as? [String: Any]
                changes.append(
                    FeedChange(
                        fileID: change["fileId"] as? String ?? "", name: file?["name"] as? String,
                        removed: change["removed"] as? Bool == true || file?["trashed"] as? Bool == true))
            }
            if let next = object["nextPageToken"] as? String {
                token = next
                continue
            }
            return (changes, object["newStartPageToken"] as? String ?? token)
        }
    }

    /// The change feed's position now: Drive's start page token.
    public func changeFeedCursor() async throws -> String? { try await changes(since: nil).cursor }

    /// The keys changed since `cursor` (a Drive page token), every page read at once; expired when Drive reports a
    /// removed file whose name this provider does not know (its key cannot be named, so only a full comparison sees
    /// the removal).
    public func changes(since cursor: String, limit: Int) async throws -> ChangeFeedAnswer {
        let changes = try await changes(since: cursor)
        guard changes.removedFileIDs.isEmpty else {
            return .expired(
                "Drive reported \(changes.removedFileIDs.count) removed file(s) without their names, so the keys "
                    + "they held are unknown")
        }
        var seen = Set<StoreKey>()
        var keys: [KeyChange] = []
        for key in changes.removed where seen.insert(StoreKey(key)).inserted {
            keys.append(KeyChange(key: key, removed: true))
        }
        for key in changes.changed where seen.insert(StoreKey(key)).inserted {
            keys.append(KeyChange(key: key, removed: false))
        }
        return .changes(ChangePage(changes: keys, cursor: changes.cursor, hasMore: false))
    }
}
