import CloudSync
import CloudSyncAuth
import CloudSyncHTTP
import Foundation
import Synchronization

/// The zone's changes after a sync token (`changes/zone`), whole or a page at a time; a missing zone that exists is
/// the token refused.
extension CloudKitBridge {
    /// Everything changed in the zone since `token` (nil: from the beginning), following `moreComing` to the end:
    /// each changed record once in its latest state, the deleted names, and the token to keep.
    ///
    /// An expired or refused token is `CK_TOKEN_EXPIRED`: fetch again from nil.
    public func fetchChanges(since token: String?) async throws(CloudKitError) -> CloudKitChanges {
        // Record names compare as bytes, as CloudKit compares them.
        var latest: [StoreKey: CloudKitRecord] = [:]
        var order: [String] = []
        var deleted: Set<StoreKey> = []
        var token = token
        var pages = 0
        while true {
            let page = try await fetchChangesPage(since: token, limit: changesPageSize)
            pages += 1
            for record in page.records {
                let name = StoreKey(record.recordName)
                if latest[name] == nil { order.append(record.recordName) }
                latest[name] = record
                deleted.remove(name)
            }
            for name in page.deletedRecordNames {
                latest[StoreKey(name)] = nil
                deleted.insert(StoreKey(name))
            }
            token = page.syncToken ?? token
            guard page.moreComing else { break }
            guard pages < 100_000 else {
                throw CloudKitError(.error, "changes/zone kept answering moreComing after \(pages) pages")
            }
        }
        return CloudKitChanges(
            records: order.compactMap { latest[StoreKey($0)] }, deletedRecordNames: deleted.sorted().map(\.string),
            syncToken: token)
    }

    /// One `changes/zone` page after `token` of at most `limit` records (nil: the server's default), each with only
    /// the fields `desiredKeys` names (nil: every field; `[]`: none, for a caller that needs only names and tags).
    ///
    /// A `ZONE_NOT_FOUND` for a token while the zone exists (asked with `zones/list`) is the token refused, in the
    /// words of a server that names the zone of its history rather than the token: `CK_TOKEN_EXPIRED`.
    public func fetchChangesPage(since token: String?, limit: Int?, desiredKeys: [String]? = nil)
        async throws(CloudKitError) -> CloudKitChangesPage
    {
        do {
            return try await fetchChangesPageOnce(since: token, limit: limit, desiredKeys: desiredKeys)
        } catch  where token != nil && error.code == .zoneNotFound {
            var expired = error
            if (try? await zoneExists()) == true {
                expired.code = .tokenExpired
                expired.message += "; the zone exists, so the sync token is what is gone"
                expired.advice = CloudKitError.advice(for: .tokenExpired)
            }
            throw expired
        }
    }

    func fetchChangesPageOnce(since token: String?, limit: Int?, desiredKeys: [String]? = nil)
        async throws(CloudKitError) -> CloudKitChangesPage
    {
        var zone: [String: Any] = ["zoneID": ["zoneName": configuration.zoneName]]
        if let token { zone["syncToken"] = token }
        if let desiredKeys { zone["desiredKeys"] = desiredKeys }
        if let limit { zone["resultsLimit"] = max(1, min(limit, Self.maxOperationsPerRequest)) }
        let what = "fetching changes of the zone \(configuration.zoneName)"
        let answer = try await call(
            .post, configuration.url("changes/zone"), body: ["zones": [zone]], doing: what, retrySafe: true,
            aboutSyncToken: token != nil)
        guard let entry = (answer["zones"] as? [[String: Any]])?.first else {
            throw CloudKitError(.error, "CloudKit answered changes/zone without a zone")
        }
        if entry["serverErrorCode"] is String {
            var error = CloudKitError.from(
                dictionary: entry, httpStatus: nil, doing: what, secrets: secrets, aboutSyncToken: token != nil)
            if token == nil, error.code == .tokenExpired { error.code = .badInput }
            throw error
        }
        var page = CloudKitChangesPage()
        for item in entry["records"] as? [[String: Any]] ?? [] {
            guard let name = item["recordName"] as? String else { continue }
            if Self.bool(item["deleted"]) {
                page.deletedRecordNames.append(name)
            } else if let record = CloudKitRecord(json: item) {
                page.records.append(record)
            }
        }
        page.syncToken = entry["syncToken"] as? String
        page.moreComing = Self.bool(entry["moreComing"])
        return page
    }
}
