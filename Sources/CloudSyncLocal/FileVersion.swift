#if canImport(Glibc)
    import Glibc
#endif

/// A directory provider's version tag of one key file, from its status: inode, size, and modification and change
/// times to the nanosecond.
///
/// The provider writes a key by renaming a new file over it, so every write of its own is a new inode; an edit in
/// place by someone else moves the change time, which no program can set back. A file whose change time is within
/// ``racyWindow`` of the listing gets no tag: file systems stamp times from a coarse clock (a few milliseconds, two
/// seconds on FAT), so a second edit in that tick, of the same size, would keep every figure, and a backup or mirror
/// that compares tags would pass it over. Such a file is read, and tagged by a later listing.
struct FileVersion {
    static let racyWindowNanoseconds: Int64 = 2_000_000_000

    var inode: UInt64
    var size: Int64
    var modified: Int64
    var changed: Int64

    /// The version of the file `status` describes, nil when it changed too recently to be told apart from an edit
    /// still to come (`now`: nanoseconds since the epoch).
    init?(_ status: stat, now: Int64) {
        changed = Int64(status.st_ctim.tv_sec) * 1_000_000_000 + Int64(status.st_ctim.tv_nsec)
        guard now - changed >= Self.racyWindowNanoseconds else { return nil }
        inode = UInt64(status.st_ino)
        size = Int64(status.st_size)
        modified = Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec)
    }

    /// The version of the file `status` describes, however recently it changed: what a conditional write compares
    /// under the directory's lock, where a write of this provider (a new file renamed in) always changes the inode.
    init(exactly status: stat) {
        changed = Int64(status.st_ctim.tv_sec) * 1_000_000_000 + Int64(status.st_ctim.tv_nsec)
        inode = UInt64(status.st_ino)
        size = Int64(status.st_size)
        modified = Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec)
    }

    /// The tag a listing gives.
    var tag: String {
        "file:\(String(inode, radix: 16)):\(String(size, radix: 16)):\(String(modified, radix: 16))"
            + ":\(String(changed, radix: 16))"
    }

    /// Nanoseconds since the epoch, on the clock file systems stamp times from.
    static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }
}
