import CloudSync

/// Every key `provider` lists, page after page of `pageSize`, in the order it lists them.
public func listEveryKey(of provider: any Provider, pageSize: Int = 1000) async throws -> [String] {
    var keys: [String] = []
    var cursor: String?
    repeat {
        let page = try await provider.listKeys(after: cursor, limit: pageSize)
        keys += page.keys
        cursor = page.nextCursor
    } while cursor != nil
    return keys
}
