import CloudSync
import CloudSyncLocal
import Foundation

/// The outbox of a pipeline whose state is a state directory: `outbox.db` beside `state.db`, a SQLite file of its
/// own (``SQLiteOutboxStorage``), so that a store's writes queue without waiting on the state's transactions.
extension StateDatabase {
    /// `outbox.db` in the state file's directory.
    var outboxPath: String { (path as NSString).deletingLastPathComponent + "/outbox.db" }

    /// The outbox file, created when missing.
    public func outboxStorage() throws -> any OutboxStorage { try SQLiteOutboxStorage(path: outboxPath) }

    /// The outbox file's entries, read without changing the file; none when there is no file.
    public func outboxEntries() throws -> [OutboxEntry] {
        guard FileManager.default.fileExists(atPath: outboxPath) else { return [] }
        return try SQLiteOutboxStorage.snapshot(path: outboxPath)
    }
}
