import CloudSync
import CloudSyncSodium
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Writing values: each staged in a temporary file beside its place, made durable, then put in place; a
/// conditional write checks its condition under the key's directory lock.
extension DirectoryProvider {
    /// Writes each value atomically, positionally, creating the subdirectories a key's file name needs.
    ///
    /// Durability is paid per batch, not per file: every value goes to its own temporary file (several written at
    /// once), the batch's files are made durable together (`LocalFiles.makeDurable(_:in:)`), only then renamed over
    /// their keys' files, and each directory touched is fsynced once. A crash at any moment leaves each key's old
    /// value or its new one, never a torn file. A full disk or exhausted disk quota is `ERR_QUOTA_EXCEEDED` in that
    /// key's slot, any other failure `ERR_PROVIDER`; a failed write leaves the previous value in place. Throws
    /// `ERR_CLOSED` after ``close()``.
    public func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] {
        try ensureOpen()
        let results = try await LocalFiles.offload { [self] in writeBatch(items) }
        metrics.recordWrite(items, results)
        return results
    }

    /// ``set(_:)``, each value put in place only if its condition (if any) holds for the file it replaces, checked
    /// under the directory's lock (an exclusive `flock` every write and removal of this provider takes); each success
    /// carries the new file's version tag.
    public func set(_ items: [KeyValue], conditions: [WriteCondition?]) async throws
        -> [Result<String?, CloudSyncError>]
    {
        try ensureOpen()
        let results = try await LocalFiles.offload { [self] in writeBatch(items, conditions: conditions) }
        metrics.recordWrite(items, results.map { $0.map { _ in () } })
        return results
    }

    /// ``get(_:)`` with each file's version tag as it was read: the listing's tag, given even for a file changed
    /// within the listing's racy window.
    public func getVersioned(_ keys: [String]) async throws -> [Result<VersionedValue?, CloudSyncError>] {
        try await readEach(keys) { value, status in VersionedValue(value, version: FileVersion(exactly: status).tag) }
    }

    /// Files a batch holds open at once (two descriptors each): 1,000 at once would pass a service's default 1,024.
    static let stagedAtOnce = 256

    func writeBatch(_ items: [KeyValue]) -> [Result<Void, CloudSyncError>] {
        writeBatch(items, conditions: nil).map { $0.map { _ in () } }
    }

    /// Writes `items` as ``set(_:)`` does, each only if its condition (if any) holds when its file is put in place;
    /// with `conditions`, each success carries the new file's version tag.
    func writeBatch(_ items: [KeyValue], conditions: [WriteCondition?]?) -> [Result<String?, CloudSyncError>] {
        var outcome = [Result<String?, CloudSyncError>](repeating: .success(nil), count: items.count)
        // Paths are bytes too: a set of `String`s would merge directories whose names are canonically equivalent.
        var touched = Set<StoreKey>()
        for start in stride(from: 0, to: items.count, by: Self.stagedAtOnce) {
            writeStaged(
                items, start..<min(start + Self.stagedAtOnce, items.count), conditions: conditions, outcome: &outcome,
                touched: &touched)
        }
        LocalFiles.syncDirectories(touched.map(\.string))
        return outcome
    }

    /// Stages `range` of `items`, makes the files durable, and names each; the directories to sync go to `touched`.
    func writeStaged(
        _ items: [KeyValue], _ range: Range<Int>, conditions: [WriteCondition?]?,
        outcome: inout [Result<String?, CloudSyncError>], touched: inout Set<StoreKey>
    ) {
        let stagings = LocalFiles.concurrentMap(range.count, width: 4) { [self] offset in
            stage(items[range.lowerBound + offset])
        }
        var staged: [(index: Int, file: DirectoryStagedFile)] = []
        for (offset, staging) in stagings.enumerated() {
            switch staging {
            case .success(let file): staged.append((range.lowerBound + offset, file))
            case .failure(let error): outcome[range.lowerBound + offset] = .failure(error)
            }
        }
        let synced = LocalFiles.makeDurable(
            staged.map(\.file.descriptor), in: staged.map(\.file.directory).keySet().map(\.string))
        for ((index, file), code) in zip(staged, synced) {
            defer {
                Glibc.close(file.descriptor)
                Glibc.close(file.directoryDescriptor)
            }
            guard code == 0 else {
                if let temporary = file.temporary { unlinkat(file.directoryDescriptor, temporary, 0) }
                outcome[index] = .failure(failure("write", file.temporary ?? file.target, code, key: file.key))
                continue
            }
            if let conditions {
                let placed = putInPlace(file, condition: conditions[index])
                outcome[index] = placed
                guard case .success = placed else { continue }
            } else if let error = putInPlace(file) {
                outcome[index] = .failure(error)
                continue
            }
            touched.formUnion(file.touchedDirectories.lazy.map { StoreKey($0) })
        }
    }

    /// Gives a durable staged file its key's name; nil when it is in place.
    ///
    /// An unnamed file is linked in where the key has no file yet, else linked under a temporary name and renamed
    /// over the key's file; a named one is renamed.
    ///
    /// Names are relative to the directory's descriptor, and a rename replaces whatever has the key's name (a planted
    /// link included) rather than following it.
    ///
    /// It holds the directory's lock meanwhile (``withDirectoryLock(_:_:)``), so a conditional write or removal of
    /// this provider, in this process or another, never checks a file that is being replaced.
    func putInPlace(_ file: DirectoryStagedFile) -> CloudSyncError? {
        withDirectoryLock(file.directoryDescriptor) { placeLocked(file) }
    }

    /// Puts `file` in place if `condition` (if any) holds for the file it replaces, checked under the directory's
    /// lock.
    ///
    /// Answers the new file's version tag as a listing would give it (none within the racy window). A condition that does not hold removes the staged file.
    func putInPlace(_ file: DirectoryStagedFile, condition: WriteCondition?) -> Result<String?, CloudSyncError> {
        withDirectoryLock(file.directoryDescriptor) {
            if let condition {
                switch currentTag(of: file.name, in: file.directoryDescriptor, path: file.target, key: file.key) {
                case .failure(let error): return .failure(error)
                case .success(let tag):
                    guard condition.holds(forTag: tag) else {
                        if let temporary = file.temporary { unlinkat(file.directoryDescriptor, temporary, 0) }
                        return .failure(condition.unmet(key: file.key, provider: id))
                    }
                }
            }
            if let error = placeLocked(file) { return .failure(error) }
            // The tag a listing will give, which is none while the file's change is within the racy window: just
            // written, it is, unless the clock says otherwise.
            var status = stat()
            guard fstat(file.descriptor, &status) == 0 else { return .success(nil) }
            return .success(FileVersion(status, now: fileTimeNow())?.tag)
        }
    }

    /// The version tag of the file `name` in `directory` now; nil when there is none.
    func currentTag(of name: String, in directory: Int32, path: String, key: String) -> Result<String?, CloudSyncError>
    {
        var status = stat()
        guard fstatat(directory, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else {
            return errno == ENOENT ? .success(nil) : .failure(failure("read the status of", path, errno, key: key))
        }
        guard status.st_mode & S_IFMT == S_IFREG else { return .failure(notOurs(path, what: "a file", key: key)) }
        return .success(FileVersion(exactly: status).tag)
    }

    /// Runs `body` holding an exclusive `flock` on the directory `descriptor` opens.
    ///
    /// Writes and removals of this provider, in any process, take it to change a file there, so a conditional one
    /// checks and changes with nobody of them in between. Programs other than CloudSync take no such lock.
    func withDirectoryLock<T>(_ descriptor: Int32, _ body: () -> T) -> T {
        while flock(descriptor, LOCK_EX) != 0 && errno == EINTR {}
        defer { flock(descriptor, LOCK_UN) }
        return body()
    }

    func placeLocked(_ file: DirectoryStagedFile) -> CloudSyncError? {
        let directory = file.directoryDescriptor
        var temporary = file.temporary
        if temporary == nil {
            let handle = "/proc/self/fd/\(file.descriptor)"
            if linkat(AT_FDCWD, handle, directory, file.name, AT_SYMLINK_FOLLOW) == 0 { return nil }
            guard errno == EEXIST else { return failure("name", file.target, errno, key: file.key) }
            var name: String
            var linked: Int32
            repeat {
                name = Self.temporaryName()
                linked = linkat(AT_FDCWD, handle, directory, name, AT_SYMLINK_FOLLOW)
            } while linked != 0 && errno == EEXIST
            guard linked == 0 else { return failure("name", file.directory + "/" + name, errno, key: file.key) }
            temporary = name
        }
        guard let temporary else { return nil }
        guard renameat(directory, temporary, directory, file.name) == 0 else {
            let code = errno
            unlinkat(directory, temporary, 0)
            return failure("rename into place", file.target, code, key: file.key)
        }
        return nil
    }

    /// Whether files can be created unnamed (`O_TMPFILE`) and named later through `/proc/self/fd`: both Linux's,
    /// `/proc` where it is mounted.
    static let unnamedFilesWork = access("/proc/self/fd", X_OK) == 0

    /// `O_TMPFILE` (with `O_DIRECTORY`, as the kernel requires), which Swift's Glibc module leaves out.
    static let unnamedFileFlag: Int32 = 0o20_000_000 | O_DIRECTORY

    /// Creates the directories `item`'s file needs and writes its value to a new temporary file beside it, left open.
    func stage(_ item: KeyValue) -> Result<DirectoryStagedFile, CloudSyncError> {
        stage(item.key) { LocalFiles.writeAll(item.value, to: $0) }
    }

    /// Creates the directories `key`'s file needs and a new temporary file beside it, which `fill` writes (answering
    /// 0, or the errno that stopped it); left open.
    ///
    /// The file is unnamed (`O_TMPFILE`) where the file system allows: nothing to rename or clean up, and creating it
    /// does not lock the directory, so several are created at once. Elsewhere it is a `.tmp-` file.
    func stage(_ key: String, fill: (Int32) -> Int32) -> Result<DirectoryStagedFile, CloudSyncError> {
        let components = FileNameMapping.components(of: FileNameMapping.encode(key))
        var touched: [String] = []
        let parent: (descriptor: Int32, path: String)
        switch openDirectory(components.dropLast(), creating: true, key: key, created: &touched) {
        case .failure(let error): return .failure(error)
        case .success(let opened?): parent = opened
        case .success(nil):
            return .failure(failure("create the directory for", path(of: key), ENOENT, key: key))
        }
        let directory = parent.path
        touched.append(directory)
        var temporary: String?
        var descriptor: Int32 = -1
        if Self.unnamedFilesWork {
            descriptor = openat(parent.descriptor, ".", Self.unnamedFileFlag | O_WRONLY | O_CLOEXEC, 0o600)
        }
        if descriptor < 0 {
            // A name another process took (its own counter met ours) is tried again with the next number.
            repeat {
                temporary = Self.temporaryName()
                descriptor = openat(
                    parent.descriptor, temporary!, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            } while descriptor < 0 && errno == EEXIST
        }
        guard descriptor >= 0 else {
            let code = errno
            Glibc.close(parent.descriptor)
            return .failure(failure("create", directory + "/" + (temporary ?? ""), code, key: key))
        }
        let written = fill(descriptor)
        guard written == 0 else {
            Glibc.close(descriptor)
            if let temporary { unlinkat(parent.descriptor, temporary, 0) }
            Glibc.close(parent.descriptor)
            return .failure(failure("write", directory + "/" + (temporary ?? ""), written, key: key))
        }
        return .success(
            DirectoryStagedFile(
                key: key, descriptor: descriptor, directoryDescriptor: parent.descriptor, temporary: temporary,
                directory: directory, name: components.last!, touchedDirectories: touched))
    }
}
