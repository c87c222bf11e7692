import CloudSync

extension JobContext {
    /// Hands `body` each page of `provider`'s keys in ``range`` (every key for a job run whole), until the listing
    /// ends, the run is interrupted or `body` answers false (a sharded job's runner lost its range).
    ///
    /// A provider that lists in key order is listed from the range's start where its cursor is a key, and no further
    /// than its end; another is listed whole and each page filtered to the range. Pages that the filter empties are
    /// skipped.
    public func forEachPageInRange(
        of provider: String, pageSize: Int, _ body: ([String]) async throws(CloudSyncError) -> Bool
    ) async throws(CloudSyncError) {
        let capabilities = providers[provider]?.capabilities ?? ProviderCapabilities(canList: true)
        var cursor = range.firstCursor(listing: capabilities)
        repeat {
            if isInterrupted { break }
            let page = try await store.keyPage(of: provider, after: cursor, limit: pageSize)
            let (keys, pastEnd) = range.keys(of: page.keys, ordered: capabilities.listsInKeyOrder)
            cursor = pastEnd ? nil : page.nextCursor
            if !keys.isEmpty, try await !body(keys) { break }
        } while cursor != nil
    }
}
