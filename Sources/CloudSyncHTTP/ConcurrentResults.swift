import CloudSync

/// Runs `body` for every element at once and returns the results in the elements' order.
///
/// Meant for a provider's batch over one ``HTTPClient``: the client's concurrency limit paces the requests, so every
/// element gets its own task without opening more connections than `maxConcurrency`.
public func concurrentResults<Element: Sendable, Value: Sendable>(
    _ elements: [Element], _ body: @escaping @Sendable (Element) async -> Result<Value, CloudSyncError>
) async -> [Result<Value, CloudSyncError>] {
    await withTaskGroup(of: (Int, Result<Value, CloudSyncError>).self) { group in
        for (index, element) in elements.enumerated() {
            group.addTask { (index, await body(element)) }
        }
        var results = [Result<Value, CloudSyncError>?](repeating: nil, count: elements.count)
        for await (index, result) in group { results[index] = result }
        return results.map { $0! }
    }
}
