import CloudSync
import CloudSyncLocal
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A full listing (pages of 1,000, as the store asks) of a directory provider holding 100,000 files
/// (`CLOUDSYNC_BENCH_FILES` when set), beside `find` of the same tree sorted in byte order: printing each file's inode,
/// size and times, the status the listing's version tags take (one `stat` a file), and the names alone as the floor.
func benchDirectoryListing(_ context: BenchContext) async throws -> [BenchRow] {
    let count = ProcessInfo.processInfo.environment["CLOUDSYNC_BENCH_FILES"].flatMap(Int.init) ?? 100_000
    let root = try context.directory("listing")
    // Written plainly (no fsync): the listing only reads names.
    for index in 0..<count {
        let descriptor = open(
            String(format: "%@/settings.item.%06d", root, index), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0, write(descriptor, "v", 1) == 1 else { fatalError("cannot write under \(root)") }
        close(descriptor)
    }
    let ours = try await context.medianSeconds { _ in
        let provider = try DirectoryProvider(id: "files", root: root)
        var listed = 0
        var cursor: String?
        repeat {
            let page = try await provider.listKeys(after: cursor, limit: 1000)
            listed += page.keys.count
            cursor = page.nextCursor
        } while cursor != nil
        guard listed == count else { fatalError("listed \(listed) of \(count)") }
    }
    let statted = try await context.medianSeconds { _ in
        try context.shell("find '\(root)' -type f -printf '%i %s %T@ %C@ %p\\n' | LC_ALL=C sort > /dev/null")
    }
    let names = try await context.medianSeconds { _ in
        try context.shell("find '\(root)' -type f | LC_ALL=C sort > /dev/null")
    }
    try context.shell("rm -rf '\(root)'")
    return [
        BenchRow(
            measure: "list \(count.formatted()) keys with version tags, directory", unit: "s", ours: ours,
            peerName: "find -printf inode, size, times | sort", peer: statted, target: .atMost(2.0), runs: context.runs
        ),
        BenchRow(
            measure: "list \(count.formatted()) keys with version tags, directory", unit: "s", ours: ours,
            peerName: "find | sort (names only, the floor)", peer: names, target: nil, runs: context.runs),
    ]
}
