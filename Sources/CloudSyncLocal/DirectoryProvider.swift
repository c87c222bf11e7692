import CloudSync
import CloudSyncSodium
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One file per key under a root directory, holding the plain bytes of the (encoded) value, so rsync, rclone or a
/// person with `cat` can read it.
///
/// Key to file name: see `FileNameMapping`.
///
/// Writes are atomic and durable per batch: each value goes to a temporary file (unnamed, `O_TMPFILE`, where the file
/// system allows; else one whose name starts with `.`), the batch's files are made durable together, only then given
/// the keys' names (linked in, or renamed over an existing file), and each directory touched fsynced once, so a crash
/// leaves the old value or the new one, never a torn file, and a leftover temporary file is ignored. Quota is the
/// file system's (`statvfs`): its used and total bytes, shared with everything else on that file system.
public final class DirectoryProvider: Provider {
    /// The provider's name in the store, errors and reports (`directory` unless given).
    public let id: String
    /// A file-tier provider taking batches of up to 1,000 keys, listing and reporting quota; see
    /// ``capabilities(maxValueBytes:)``.
    public let capabilities: ProviderCapabilities
    /// The root directory.
    public let root: String
    /// Counts each call as one request.
    public let metrics: ProviderMetrics
    private let closed = Mutex(false)
    private let listings = DirectoryListings()
    private let fileTimeNow: @Sendable () -> Int64

    /// A provider over `root`, created (mode 0700) when missing.
    ///
    /// With `removesStaleTemporaryFiles` (every open but a dry run's), the temporary files that writes killed midway
    /// left anywhere under the root are removed first, when older than this process (see
    /// ``removeStaleTemporaryFiles(under:olderThan:)``).
    public convenience init(
        id: String = "directory", root: String, maxValueBytes: Int? = nil, metrics: ProviderMetrics = ProviderMetrics(),
        removesStaleTemporaryFiles: Bool = true
    ) throws(CloudSyncError) {
        try self.init(
            id: id, root: root, maxValueBytes: maxValueBytes, metrics: metrics,
            removesStaleTemporaryFiles: removesStaleTemporaryFiles, fileTimeNow: FileVersion.now)
    }

    /// ``init(id:root:maxValueBytes:metrics:removesStaleTemporaryFiles:)`` with the clock its listings compare files'
    /// change times with (nanoseconds since the epoch), for tests that cannot wait out ``FileVersion`` 's window.
    init(
        id: String, root: String, maxValueBytes: Int?, metrics: ProviderMetrics, removesStaleTemporaryFiles: Bool,
        fileTimeNow: @escaping @Sendable () -> Int64
    ) throws(CloudSyncError) {
        self.fileTimeNow = fileTimeNow
        self.id = id
        self.metrics = metrics
        self.root = root.hasSuffix("/") && root.count > 1 ? String(root.dropLast()) : root
        self.capabilities = Self.capabilities(maxValueBytes: maxValueBytes)
        do {
            try LocalFiles.createDirectory(self.root)
        } catch {
            throw error.attributed(provider: id)
        }
        if removesStaleTemporaryFiles {
            Self.removeStaleTemporaryFiles(under: self.root, olderThan: Self.runStarted)
        }
    }

    /// When this process started (from `/proc`, to a clock tick), or when it first opened a directory provider where
    /// `/proc` cannot tell: a temporary file older than that belongs to no write of this run.
    private static let runStarted: Date = {
        var boot = timespec()
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")"), clock_gettime(CLOCK_BOOTTIME, &boot) == 0
        else { return Date() }
        // Fields after the command's closing parenthesis start at the third; the start time is the 22nd, in clock
        // ticks since boot.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 19, let ticks = Double(fields[19]) else { return Date() }
        let sinceBoot = Double(boot.tv_sec) + Double(boot.tv_nsec) / 1e9
        let age = sinceBoot - ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
        return Date(timeIntervalSinceNow: -max(0, age))
    }()

    /// This process's temporary file names: `.tmp-` and 16 hex digits, a random start counted up, so no file needs
    /// random bytes of its own.
    private static let temporaryNames = Atomic<UInt64>(
        SecureRandom.bytes(count: 8).reduce(0) { $0 << 8 | UInt64($1) })

    private static func temporaryName() -> String {
        let number = temporaryNames.add(1, ordering: .relaxed).oldValue
        let hex = String(number, radix: 16)
        return ".tmp-" + String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// Removes the temporary files (`.tmp-` and 16 hex digits, regular files only) anywhere under `root` last
    /// modified before `date`, which a write killed between creating and renaming one leaves behind; returns how
    /// many went.
    ///
    /// A younger one may be another process's write in progress and stays. Symbolic links are not followed, and a
    /// file that cannot be removed is left for the next open.
    @discardableResult
    public static func removeStaleTemporaryFiles(under root: String, olderThan date: Date) -> Int {
        let cutoff = date.timeIntervalSince1970
        var removed = 0
        var pending = [root]
        while let directory = pending.popLast() {
            // Only directories and temporary names are looked at further: a key file costs its directory entry alone.
            _ = DirectoryEntries.forEach(in: directory) { name, type, _ in
                guard type == DirectoryEntries.unknown || type == DirectoryEntries.directory || isTemporaryName(name)
                else { return }
                let path = directory + "/" + String(decoding: name, as: UTF8.self)
                var status = stat()
                guard lstat(path, &status) == 0 else { return }
                switch status.st_mode & S_IFMT {
                case S_IFDIR:
                    pending.append(path)
                case S_IFREG where isTemporaryName(name):
                    let modified = Double(status.st_mtim.tv_sec) + Double(status.st_mtim.tv_nsec) / 1e9
                    if modified < cutoff, unlink(path) == 0 { removed += 1 }
                default:
                    return
                }
            }
        }
        return removed
    }

    private static func isTemporaryName(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        name.count == 21 && name.starts(with: ".tmp-".utf8)
            && name.dropFirst(5).allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// What a directory provider can do; the pipeline planner reads it before any directory is created.
    ///
    /// Batches of up to 1,000 keys: each batch pays one `syncfs` (which flushes the whole file system) and one
    /// `fsync` per directory touched, so larger batches pay them less often.
    ///
    /// Keys are at most ``maxKeyBytes`` bytes of UTF-8, refused before any file is touched: escaped, a longer key's
    /// path would pass the kernel's 4,096-byte limit.
    public static func capabilities(maxValueBytes: Int?) -> ProviderCapabilities {
        ProviderCapabilities(
            maxValueBytes: maxValueBytes, tier: .file, keyRules: [.maxUTF8Bytes(maxKeyBytes)], batchLimit: 1000,
            canList: true, reportsQuota: true, listsInKeyOrder: true, cursorIsKey: true, conditionalWrites: true)
    }

    /// The longest key, in UTF-8 bytes, as S3 allows: escaped (up to three bytes each) and cut into pieces, its path
    /// stays well inside the 4,096 bytes the kernel takes.
    public static let maxKeyBytes = 1024

    /// Stops serving.
    ///
    /// Later calls fail with `ERR_CLOSED` and ``availability()`` reports it; closing twice is harmless. The provider keeps no file open between calls, so a call already running finishes normally.
    public func close() async { closed.withLock { $0 = true } }

    func ensureOpen() throws(CloudSyncError) {
        if closed.withLock({ $0 }) {
            throw CloudSyncError(
                .closed, "the directory provider \(id) was closed; open a new provider on \(root) to use it again",
                provider: id)
        }
    }

    /// Available while the root is an existing directory this user can read, write and enter; otherwise why not:
    /// `closed` after ``close()``, `offline` when the root is missing (an unmounted disk), `misconfigured` when it is
    /// not a directory or its permissions forbid access.
    public func availability() async -> Availability {
        if closed.withLock({ $0 }) {
            return .unavailable(
                .closed, "the directory provider \(id) was closed; open a new provider on \(root) to use it again")
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root, isDirectory: &isDirectory) else {
            return .unavailable(.offline, "the directory \(root) does not exist; mount or create it")
        }
        guard isDirectory.boolValue else {
            return .unavailable(.misconfigured, "\(root) is not a directory; point the provider at a directory")
        }
        guard access(root, R_OK | W_OK | X_OK) == 0 else {
            return .unavailable(
                .misconfigured, "the directory \(root) is not readable and writable by this user; fix its permissions")
        }
        return .available
    }

    private func path(of key: String) -> String {
        ([root] + FileNameMapping.components(of: FileNameMapping.encode(key))).joined(separator: "/")
    }

    /// Opens the directory that holds a key's file, component by component from the root, never following a
    /// symbolic link (`O_NOFOLLOW` on every component), so nothing planted in the root can lead a read or a write
    /// out of it; `creating` makes missing directories (mode 0700) and names, in `created`, the parent of each.
    ///
    /// Answers the directory's descriptor (the caller closes it) and its path; nil when a directory is missing and
    /// `creating` is false (the key has no file).
    private func openDirectory(
        _ pieces: ArraySlice<String>, creating: Bool, key: String, created: inout [String]
    ) -> Result<(descriptor: Int32, path: String)?, CloudSyncError> {
        var descriptor = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else {
            return errno == ENOENT && !creating ? .success(nil) : .failure(failure("open", root, errno, key: key))
        }
        var path = root
        for piece in pieces {
            let parent = path
            path += "/" + piece
            if creating {
                if mkdirat(descriptor, piece, 0o700) == 0 {
                    created.append(parent)
                } else if errno != EEXIST {
                    let code = errno
                    Glibc.close(descriptor)
                    return .failure(failure("create the directory", path, code, key: key))
                }
            }
            let next = openat(descriptor, piece, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            let code = errno
            Glibc.close(descriptor)
            guard next >= 0 else {
                if code == ENOENT && !creating { return .success(nil) }
                if code == ELOOP || code == ENOTDIR { return .failure(notOurs(path, what: "a directory", key: key)) }
                return .failure(failure("open the directory", path, code, key: key))
            }
            descriptor = next
        }
        return .success((descriptor, path))
    }

    /// `ERR_PROVIDER`: something other than what the provider made sits where it keeps a key's file or directory.
    func notOurs(_ path: String, what: String, key: String) -> CloudSyncError {
        CloudSyncError(
            .provider,
            "\(path) is not \(what) this provider made (a symbolic link, device, FIFO or other file); it never follows "
                + "links or reads special files, so nothing under the root can reach outside it. Remove it",
            provider: id, key: key)
    }

    func failure(_ action: String, _ path: String, _ code: Int32, key: String? = nil) -> CloudSyncError {
        let reason = String(cString: strerror(code))
        let errorCode: ErrorCode = code == ENOSPC || code == EDQUOT ? .quotaExceeded : .provider
        return CloudSyncError(errorCode, "cannot \(action) \(path): \(reason)", provider: id, key: key)
    }

    /// Reads each key's file, positionally: nil for a key with no file, `ERR_DECODE` for a file that is not UTF-8 text,
    /// `ERR_PROVIDER` for any other read failure.
    ///
    /// Several files are read at once (`readWidth(forKeys:)`). Throws `ERR_CLOSED` after ``close()``.
    public func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] {
        try await readEach(keys) { value, _ in value }
    }

    /// Reads each key's file as ``get(_:)`` does, several at once, answering what `answer` makes of its value and
    /// the status of the file it was read from; counts one request and the bytes read.
    private func readEach<Answer: Sendable>(
        _ keys: [String], _ answer: @escaping @Sendable (String, stat) -> Answer
    ) async throws -> [Result<Answer?, CloudSyncError>] {
        try ensureOpen()
        let results = try await LocalFiles.offload { [self] in
            LocalFiles.concurrentMap(keys.count, width: Self.readWidth(forKeys: keys.count)) { [self] index in
                readWithStatus(keys[index]).map { read in
                    read.map { (answer: answer($0.value, $0.status), bytes: $0.value.utf8.count) }
                }
            }
        }
        metrics.recordRequest(bytesRead: results.reduce(0) { $0 + ((try? $1.get())??.bytes ?? 0) })
        return results.map { result in result.map { $0?.answer } }
    }

    /// How many files a batch get reads at once: two for a few keys, up to 16 for a large batch (one thread per 32
    /// keys).
    ///
    /// Files not in the page cache (a migrate's source, read once; or dropped from the cache, as `rclone` asks for
    /// the files it read) each wait for the disk, and a disk serves many reads at once: 5,000 such files of 1 KB took
    /// 0.23-0.29 s two at a time and 0.09 s sixteen at a time here. A thread costs tens of microseconds to start, so a
    /// small batch keeps to two.
    static func readWidth(forKeys count: Int) -> Int {
        min(16, max(2, count / 32))
    }

    /// `key`'s value with the status of the file it was read from (for its version tag); nil when it has no file.
    func readWithStatus(_ key: String) -> Result<(value: String, status: stat)?, CloudSyncError> {
        let opened: (descriptor: Int32, path: String, info: stat)
        switch openForReading(key) {
        case .failure(let error): return .failure(error)
        case .success(nil): return .success(nil)
        case .success(let file?): opened = file
        }
        let (descriptor, path, info) = opened
        defer { Glibc.close(descriptor) }
        // No value is larger than the provider takes: a file past that (or growing past it while read) is refused
        // rather than read until memory runs out.
        let limit = capabilities.maxValueBytes ?? Int.max
        guard Int(info.st_size) <= limit else {
            return .failure(
                CloudSyncError(
                    .payloadTooLarge,
                    "\(path) holds \(info.st_size) bytes, more than the \(limit) this provider takes; it is not a value "
                        + "this provider wrote",
                    provider: id, key: key))
        }
        // Into one buffer the file's size and a byte more (its end then shows in the second read), grown if the
        // file grows meanwhile; validated as UTF-8 straight from it.
        var buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(Int(info.st_size) + 1, 64), alignment: 1)
        defer { buffer.deallocate() }
        var filled = 0
        while true {
            if filled > limit {
                return .failure(
                    CloudSyncError(
                        .payloadTooLarge, "\(path) grew past the \(limit) bytes this provider takes while it was read",
                        provider: id, key: key))
            }
            if filled == buffer.count {
                let larger = UnsafeMutableRawBufferPointer.allocate(byteCount: buffer.count * 2, alignment: 1)
                larger.copyMemory(from: UnsafeRawBufferPointer(buffer))
                buffer.deallocate()
                buffer = larger
            }
            let count = Glibc.read(descriptor, buffer.baseAddress! + filled, buffer.count - filled)
            if count < 0 {
                if errno == EINTR { continue }
                return .failure(failure("read", path, errno, key: key))
            }
            if count == 0 { break }
            filled += count
        }
        let bytes = UnsafeBufferPointer(start: buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), count: filled)
        guard let value = String(validating: bytes, as: UTF8.self) else {
            return .failure(
                CloudSyncError(.decode, "\(path) does not hold UTF-8 text; values are strings", provider: id, key: key))
        }
        return .success((value, info))
    }

    /// Opens `key`'s file for reading: its descriptor, path and status; nil when the key has no file, and a failure
    /// for a link or anything else that is not a regular file (planted, not written here).
    func openForReading(_ key: String) -> Result<(descriptor: Int32, path: String, info: stat)?, CloudSyncError> {
        let components = FileNameMapping.components(of: FileNameMapping.encode(key))
        var created: [String] = []
        let parent: (descriptor: Int32, path: String)
        switch openDirectory(components.dropLast(), creating: false, key: key, created: &created) {
        case .failure(let error): return .failure(error)
        case .success(nil): return .success(nil)
        case .success(let opened?): parent = opened
        }
        let path = parent.path + "/" + components.last!
        // O_NOFOLLOW: a planted link is refused, not served; O_NONBLOCK: opening a FIFO does not wait for a writer.
        let descriptor = openat(
            parent.descriptor, components.last!, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        let code = errno
        Glibc.close(parent.descriptor)
        guard descriptor >= 0 else {
            if code == ENOENT { return .success(nil) }
            if code == ELOOP { return .failure(notOurs(path, what: "a file", key: key)) }
            return .failure(failure("read", path, code, key: key))
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            let code = errno
            Glibc.close(descriptor)
            return .failure(failure("read", path, code, key: key))
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            Glibc.close(descriptor)
            return .failure(notOurs(path, what: "a file", key: key))
        }
        return .success((descriptor, path, info))
    }

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

    private func writeBatch(_ items: [KeyValue]) -> [Result<Void, CloudSyncError>] {
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
    private func writeStaged(
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

    private func placeLocked(_ file: DirectoryStagedFile) -> CloudSyncError? {
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
    private static let unnamedFilesWork = access("/proc/self/fd", X_OK) == 0

    /// `O_TMPFILE` (with `O_DIRECTORY`, as the kernel requires), which Swift's Glibc module leaves out.
    private static let unnamedFileFlag: Int32 = 0o20_000_000 | O_DIRECTORY

    /// Creates the directories `item`'s file needs and writes its value to a new temporary file beside it, left open.
    private func stage(_ item: KeyValue) -> Result<DirectoryStagedFile, CloudSyncError> {
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

    /// Deletes each key's file, positionally, then fsyncs each directory touched once; a key with no file succeeds.
    ///
    /// Throws `ERR_CLOSED` after ``close()``.
    public func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] {
        try await remove(keys, conditions: keys.map { _ in nil })
    }

    /// Deletes each key's file if its condition (if any) holds for the file there, checked under the directory's lock.
    ///
    /// The lock is an exclusive `flock` of the key's directory, which every write and removal of this provider takes.
    /// A key with no file succeeds. Throws `ERR_CLOSED` after ``close()``.
    public func remove(_ keys: [String], conditions: [WriteCondition?]) async throws
        -> [Result<Void, CloudSyncError>]
    {
        try ensureOpen()
        metrics.recordRequest()
        return try await LocalFiles.offload { [self] in
            var touched = Set<StoreKey>()
            let results = zip(keys, conditions).map { key, condition -> Result<Void, CloudSyncError> in
                let components = FileNameMapping.components(of: FileNameMapping.encode(key))
                var created: [String] = []
                let parent: (descriptor: Int32, path: String)
                switch openDirectory(components.dropLast(), creating: false, key: key, created: &created) {
                case .failure(let error): return .failure(error)
                case .success(nil): return .success(())
                case .success(let opened?): parent = opened
                }
                defer { Glibc.close(parent.descriptor) }
                let name = components.last!
                let path = parent.path + "/" + name
                let removed = withDirectoryLock(parent.descriptor) { () -> Result<Void, CloudSyncError> in
                    if let condition {
                        switch currentTag(of: name, in: parent.descriptor, path: path, key: key) {
                        case .failure(let error): return .failure(error)
                        case .success(nil): return .success(())
                        case .success(let tag?):
                            guard condition.holds(forTag: tag) else {
                                return .failure(condition.unmet(key: key, provider: id))
                            }
                        }
                    }
                    // unlinkat removes a link itself, never what it points to.
                    guard unlinkat(parent.descriptor, name, 0) == 0 else {
                        return errno == ENOENT ? .success(()) : .failure(failure("remove", path, errno, key: key))
                    }
                    touched.insert(StoreKey(parent.path))
                    return .success(())
                }
                return removed
            }
            LocalFiles.syncDirectories(touched.map(\.string))
            return results
        }
    }

    /// Pages in bytewise (UTF-8) order of the keys, as every listing a sync merges must.
    ///
    /// The encoded file names sort differently, so each name is decoded and the keys sorted. A listing's first page
    /// walks the tree once and keeps its keys (up to `DirectoryListings.windowKeys`, so memory stays bounded however
    /// many files there are); its later pages come from that walk, so a full listing costs one walk and one sort, not
    /// one walk per page. See `DirectoryListings` for what a listing sees of files added or removed meanwhile.
    public func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage {
        try ensureOpen()
        metrics.recordRequest()
        let limit = max(limit, 1)
        if let cursor, let page = listings.page(after: cursor, limit: limit, now: .now) { return page }
        return try await LocalFiles.offload { [self] in
            let window = try walkWindow(after: cursor, keeping: max(limit, DirectoryListings.windowKeys))
            return listings.firstPage(of: window, limit: limit, now: .now)
        }
    }

    /// The smallest `keeping` keys after `cursor`, sorted, with their files' versions, from one walk of the tree.
    private func walkWindow(after cursor: String?, keeping: Int) throws -> DirectoryListingWindow {
        var smallest = SmallestKeys(after: cursor, keeping: keeping)
        let now = fileTimeNow()
        try walk(root, pieces: []) { key, status in
            smallest.offer(key, version: status.flatMap { FileVersion($0, now: now) })
        }
        let (keys, versions) = smallest.sortedKeys()
        return DirectoryListingWindow(keys: keys, versions: versions, complete: !smallest.truncated, now: .now)
    }

    /// Calls `visit` with the key (UTF-8 bytes) of every key file under `directory`, skipping temporary and foreign
    /// files, and the file's status (nil when it could not be read: the file went meanwhile).
    ///
    /// `pieces` are the path components from the root down to `directory`.
    private func walk(
        _ directory: String, pieces: [String], _ visit: (UnsafeBufferPointer<UInt8>, stat?) -> Void
    ) throws {
        let code = try DirectoryEntries.forEach(in: directory) { name, type, descriptor in
            guard name.first != UInt8(ascii: ".") else { return }
            var kind: mode_t
            var info = stat()
            var known = false
            switch type {
            case DirectoryEntries.directory: kind = S_IFDIR
            case DirectoryEntries.regularFile: kind = S_IFREG
            case DirectoryEntries.unknown:
                guard fstatat(descriptor, cName(name), &info, AT_SYMLINK_NOFOLLOW) == 0 else { return }
                kind = info.st_mode & S_IFMT
                known = true
            default: return
            }
            if kind == S_IFREG, !known {
                // The version tag: one fstatat a file, far less than reading it to see whether it changed.
                known = fstatat(descriptor, cName(name), &info, AT_SYMLINK_NOFOLLOW) == 0
            }
            let status = known ? info : nil
            if kind == S_IFREG, pieces.isEmpty {
                // Only names encoding produces, in the place it puts them, are keys. Most escape nothing: such a
                // name is its own key, passed on as it lies in the directory.
                guard name.count <= FileNameMapping.maxFileNameBytes else { return }
                if FileNameMapping.isOwnKey(name) {
                    visit(name, status)
                } else if var key = FileNameMapping.decode(String(decoding: name, as: UTF8.self)) {
                    key.withUTF8 { visit($0, status) }
                }
            } else if kind == S_IFREG {
                let components = pieces + [String(decoding: name, as: UTF8.self)]
                let encoded = components.map { String($0.dropFirst()) }.joined()
                if var key = FileNameMapping.decode(encoded), FileNameMapping.components(of: encoded) == components {
                    key.withUTF8 { visit($0, status) }
                }
            } else if kind == S_IFDIR, name.first == UInt8(ascii: "+") {
                let piece = String(decoding: name, as: UTF8.self)
                try walk(directory + "/" + piece, pieces: pieces + [piece], visit)
            }
        }
        guard code == 0 else { throw failure("read the directory", directory, code) }
    }

    /// A directory entry's name as the C string it is in place (the kernel's record ends it with NUL).
    private func cName(_ name: UnsafeBufferPointer<UInt8>) -> UnsafePointer<CChar> {
        UnsafeRawPointer(name.baseAddress!).assumingMemoryBound(to: CChar.self)
    }

    /// The file system's figures: used and total bytes of the whole file system the root is on.
    public func quota() async throws -> ProviderQuota? {
        try ensureOpen()
        metrics.recordRequest()
        var info = statvfs()
        guard statvfs(root, &info) == 0 else { throw failure("measure the file system of", root, errno) }
        let blockSize = Int64(info.f_frsize)
        return ProviderQuota(
            usedBytes: (Int64(info.f_blocks) - Int64(info.f_bfree)) * blockSize,
            totalBytes: Int64(info.f_blocks) * blockSize)
    }
}
