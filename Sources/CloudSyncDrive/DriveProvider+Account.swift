import CloudSync
import CloudSyncHTTP
import Foundation
import Synchronization

/// The account: availability, quota and identity from `about.get`, and account events.
extension DriveProvider {
    // MARK: Account

    /// Available when `about.get` answers; otherwise why not.
    public func availability() async -> Availability {
        if closed.withLock({ $0 }) { return .unavailable(.closed, "the googleDrive provider \(id) was closed") }
        do {
            _ = try await about(fields: "user")
            return .available
        } catch {
            return Availability(probeFailure: error)
        }
    }

    func about(fields: String) async throws(CloudSyncError) -> [String: Any] {
        let request = HTTPRequest(method: .get, url: url("/drive/v3/about", [("fields", fields)]))
        return try json(try await sendExpectingSuccess(request), request)
    }

    /// `about.get`: `usage` is the used bytes, `limit` the total; no `limit` means unlimited (a nil total).
    public func quota() async throws -> ProviderQuota? {
        try ensureOpen()
        let quota = try await about(fields: "storageQuota,user")["storageQuota"] as? [String: Any] ?? [:]
        func number(_ name: String) -> Int64? { (quota[name] as? String).flatMap { Int64($0) } }
        return ProviderQuota(usedBytes: number("usage"), totalBytes: number("limit"))
    }

    /// The signed-in user's `permissionId`; when it differs from the one the provider's state remembers, the caches
    /// are cleared and subscribers get an account event with `identityChanged`.
    public func accountIdentity() async throws -> String? {
        try ensureOpen()
        let user = try await about(fields: "user")["user"] as? [String: Any]
        guard let permissionID = user?["permissionId"] as? String, !permissionID.isEmpty else {
            throw CloudSyncError(.provider, "Drive's about.get carried no user.permissionId", provider: id)
        }
        let previous = try state.value(Self.identityStateName)
        // A dry run may keep no state; the identity is still the answer.
        if previous != permissionID { try? state.set(permissionID, for: Self.identityStateName) }
        if let previous, previous != permissionID {
            logger.log(.warning, "the Google account behind \(id) changed; its cached file ids are forgotten")
            await clearCaches()
            let event = AccountEvent(
                identityChanged: true, status: .available, provider: id, eventID: "drive:\(id):\(permissionID)")
            for handler in subscribers.withLock({ Array($0.values) }) { handler(event) }
        }
        return permissionID
    }

    /// Calls `handler` when ``accountIdentity()`` finds another account signed in than before.
    public func subscribeToAccountChanges(_ handler: @escaping @Sendable (AccountEvent) -> Void)
        -> ProviderSubscription?
    {
        let number = nextSubscriber.withLock { value -> Int in
            defer { value += 1 }
            return value
        }
        subscribers.withLock { $0[number] = handler }
        return ProviderSubscription { [weak self] in _ = self?.subscribers.withLock { $0.removeValue(forKey: number) } }
    }

    /// Forgets every file id (an account switch makes them someone else's).
    public func clearCaches() async {
        cache.withLock { cache in
            cache.entries.removeAll()
            cache.names.removeAll()
            cache.lastListingCount = nil
            cache.listedAtMs = nil
            cache.feedCursor = nil
            cache.doubtful.removeAll()
        }
        try? state.set(nil, for: Self.largeFolderStateName)
    }
}
