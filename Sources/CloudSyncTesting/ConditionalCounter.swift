import CloudSync

/// Writers incrementing one counter by compare-and-swap, for checking that a provider's conditions exclude each other.
///
/// Each reads the counter's version, writes the next number on the condition that it is still that version, and reads
/// again when refused. With conditions that hold, no increment is lost.
public enum ConditionalCounter {
    /// Each provider of `writers` (several may be one instance, or several may share one database or directory) adds
    /// `increments` to the counter under `key`, which holds a number; answers the final value.
    public static func run(writers: [any Provider], key: String = "n", increments: Int) async throws -> Int {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for provider in writers {
                group.addTask {
                    var done = 0
                    while done < increments {
                        guard let read = try await provider.getVersioned([key])[0].get(), let version = read.version,
                            let number = Int(read.value)
                        else {
                            throw CloudSyncError(
                                .provider, "the counter is missing, untagged or not a number", provider: provider.id,
                                key: key)
                        }
                        switch try await provider.set(
                            [KeyValue(key, String(number + 1))], conditions: [.version(version)])[0]
                        {
                        case .success: done += 1
                        case .failure(let error) where error.code == .changedSinceRead: continue
                        case .failure(let error): throw error
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        return Int(try await writers[0].get([key])[0].get() ?? "") ?? -1
    }
}
