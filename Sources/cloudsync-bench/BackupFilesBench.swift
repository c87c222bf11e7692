import CloudSync
import CloudSyncSodium
import Foundation

/// Backups of files beside restic, each side a child process under GNU `time` (CPU seconds and peak memory), our
/// side the `backup` and `restore` jobs of a pipeline: 20,000 × 1 KB backed up twice, 500 × 256 KB (half JSON, half
/// random bytes), one 1 GiB file, and the bytes a one-byte edit of a 64 MiB value adds.
func benchBackupFiles(_ context: BenchContext) async throws -> [BenchRow] {
    guard context.has("restic") else {
        print("backup-files: skipped (needs restic: apt-get install restic)")
        return []
    }
    let bench = try FilesBackupBench(context)
    var rows = try bench.smallValues()
    rows += try bench.mixed()
    rows += try bench.oneLargeFile()
    rows += try bench.oneByteEdit()
    return rows
}

private struct FilesBackupBench {
    let context: BenchContext
    let root: String
    let executable = Bundle.main.executablePath ?? CommandLine.arguments[0]

    init(_ context: BenchContext) throws {
        self.context = context
        root = try context.directory("backup-files")
        let password = root + "/restic-password"
        try "bench-password\n".write(toFile: password, atomically: true, encoding: .utf8)
        setenv("RESTIC_PASSWORD_FILE", password, 1)
        setenv("RESTIC_CACHE_DIR", root + "/restic-cache", 1)
        _ = try runChild("/usr/bin/sh", ["-c", "head -c 32 /dev/urandom | base64 > '\(root)/vault.key'"])
    }

    /// A pipeline backing up the directory `source` into a directory repository and restoring it into `restored`.
    private func pipeline(_ name: String, source: String) throws -> String {
        let path = "\(root)/\(name).yaml"
        try """
        version: 1
        name: \(name)
        providers:
          files: { type: directory, path: \(source) }
          vault: { type: directory, path: \(root)/\(name)-vault, create: true }
          restored: { type: directory, path: \(root)/\(name)-restored, create: true }
        codecs:
          sealed: { type: xchacha20poly1305, keys: [{ id: k1, file: \(root)/vault.key }] }
        store: { providers: [files] }
        jobs:
          - { type: backup, name: backup, from: files, to: vault, codec: sealed }
          - { type: restore, name: restore, from: vault, to: restored, codec: sealed }
          - { type: forget, name: prune, repository: vault, codec: sealed, keep: { last: 2 }, prune: true }

        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    private func ours(_ pipeline: String, _ job: String) throws -> ChildRun {
        sync()
        return try runChild(executable, ["--pipeline-child", pipeline, "--job", job])
    }

    private func restic(_ arguments: [String]) throws -> ChildRun {
        sync()
        return try runChild("/usr/bin/restic", arguments + ["-q"])
    }

    /// Fresh repositories and restore targets for a run of `name`.
    private func clean(_ name: String) throws {
        try context.shell(
            "rm -rf '\(root)/\(name)-vault' '\(root)/\(name)-restored' '\(root)/\(name)-restic' "
                + "'\(root)/\(name)-restic-restored'")
        _ = try restic(["init", "--repo", "\(root)/\(name)-restic"])
    }

    /// 20,000 files of 1 KB of hexadecimal text (`CLOUDSYNC_BENCH_FILES` sets the count), backed up, 1% changed,
    /// backed up again, then a forget and prune that keep both: CPU of each step and the repository's bytes.
    func smallValues() throws -> [BenchRow] {
        let count = ProcessInfo.processInfo.environment["CLOUDSYNC_BENCH_FILES"].flatMap(Int.init) ?? 20_000
        let source = try context.directory("backup-files/small-source")
        var generator = SeededRandom(seed: 42)
        func write(_ index: Int) throws {
            let text = (0..<64).map { _ in String(format: "%016llx", generator.next()) }.joined()
            try text.write(toFile: String(format: "%@/item%06d", source, index), atomically: false, encoding: .utf8)
        }
        for index in 0..<count { try write(index) }
        // A file changed in the last two seconds gets no version tag (and would be read again by the second backup).
        Thread.sleep(forTimeInterval: 2.5)
        let pipeline = try pipeline("small", source: source)
        var figures: [[Double]] = [[], [], [], [], [], [], [], []]
        for run in 0..<context.runs {
            try clean("small")
            figures[0].append(try ours(pipeline, "backup").cpuSeconds)
            figures[1].append(try restic(["backup", "--repo", "\(root)/small-restic", source]).cpuSeconds)
            for index in stride(from: run, to: count, by: 100) { try write(index) }
            Thread.sleep(forTimeInterval: 2.5)
            figures[2].append(try ours(pipeline, "backup").cpuSeconds)
            figures[3].append(try restic(["backup", "--repo", "\(root)/small-restic", source]).cpuSeconds)
            figures[4].append(Double(try directoryBytes("\(root)/small-vault")) / 1_048_576)
            figures[5].append(Double(try directoryBytes("\(root)/small-restic")) / 1_048_576)
            // Both snapshots kept: a forget and prune with nothing to remove, which reads what every snapshot needs.
            figures[6].append(try ours(pipeline, "prune").cpuSeconds)
            figures[7].append(
                try restic(["forget", "--repo", "\(root)/small-restic", "--keep-last", "2", "--prune"]).cpuSeconds)
        }
        try context.shell("rm -rf '\(source)' '\(root)'/small-*")
        let size = "\(count.formatted()) × 1 KB"
        return [
            ("first backup of \(size): CPU", "s", "restic backup", 0.5),
            ("second backup, 1% changed: CPU", "s", "restic backup", 0.5),
            ("bytes the repository holds after both", "MiB", "restic repository", 0.9),
            ("forget + prune with nothing to remove: CPU", "s", "restic forget --prune", 2.0),
        ].enumerated().map { index, row in
            BenchRow(
                measure: row.0, unit: row.1, ours: median(figures[2 * index]), peerName: row.2,
                peer: median(figures[2 * index + 1]), target: .atMost(row.3), runs: context.runs)
        }
    }

    /// 500 files of 256 KB: 250 of JSON, 250 of random bytes.
    func mixed() throws -> [BenchRow] {
        let source = try context.directory("backup-files/mixed-source")
        var generator = SeededRandom(seed: 58)
        for index in 0..<500 {
            var bytes: [UInt8]
            if index % 2 == 0 {
                var text = "["
                while text.utf8.count < 256 << 10 {
                    let n = generator.next() % 100_000
                    text += #"{"id":\#(n),"name":"user \#(n)","theme":"\#(n % 3 == 0 ? "dark" : "light")","#
                    text += #""score":\#(generator.next() % 1_000),"tags":["a\#(n % 7)","b\#(n % 11)"]},"#
                }
                bytes = Array(text.utf8.prefix(256 << 10))
            } else {
                bytes = SecureRandom.bytes(count: 256 << 10)
            }
            try Data(bytes).write(to: URL(fileURLWithPath: String(format: "%@/file%03d", source, index)))
        }
        let pipeline = try pipeline("mixed", source: source)
        var figures: [[ChildRun]] = [[], [], [], []]
        var bytes: [[Double]] = [[], []]
        for _ in 0..<context.runs {
            try clean("mixed")
            figures[0].append(try ours(pipeline, "backup"))
            figures[1].append(try restic(["backup", "--repo", "\(root)/mixed-restic", source]))
            bytes[0].append(Double(try directoryBytes("\(root)/mixed-vault")) / 1_048_576)
            bytes[1].append(Double(try directoryBytes("\(root)/mixed-restic")) / 1_048_576)
            figures[2].append(try ours(pipeline, "restore"))
            figures[3].append(
                try restic([
                    "restore", "latest", "--repo", "\(root)/mixed-restic", "--target", "\(root)/mixed-restic-restored",
                ]))
        }
        let runs = context.runs
        func row(
            _ measure: String, _ unit: String, _ index: Int, peer: String, _ value: (ChildRun) -> Double,
            _ target: Double
        )
            -> BenchRow
        {
            BenchRow(
                measure: measure, unit: unit, ours: median(figures[index].map(value)), peerName: peer,
                peer: median(figures[index + 1].map(value)), target: .atMost(target), runs: runs)
        }
        let size = "500 × 256 KB (half JSON, half random)"
        return [
            row("first backup of \(size): CPU", "s", 0, peer: "restic backup", \.cpuSeconds, 0.8),
            row("  peak memory", "MB", 0, peer: "restic backup", \.peakMegabytes, 1.0),
            BenchRow(
                measure: "  bytes the repository holds", unit: "MiB", ours: median(bytes[0]),
                peerName: "restic repository", peer: median(bytes[1]), target: .atMost(1.0), runs: runs),
            row("restore of it: CPU", "s", 2, peer: "restic restore", \.cpuSeconds, 1.0),
            row("  peak memory", "MB", 2, peer: "restic restore", \.peakMegabytes, 1.0),
        ]
    }

    /// One 1 GiB file of random bytes: the memory a backup and a restore take, against a 200 MB budget (restic's
    /// figures printed beside).
    func oneLargeFile() throws -> [BenchRow] {
        let source = try context.directory("backup-files/large-source")
        _ = try runChild(
            "/usr/bin/sh", ["-c", "head -c \(1 << 30) /dev/urandom > '\(source)/large.bin'"])
        let pipeline = try pipeline("large", source: source)
        try clean("large")
        let backup = try ours(pipeline, "backup")
        let restore = try ours(pipeline, "restore")
        let peerBackup = try restic(["backup", "--repo", "\(root)/large-restic", source])
        let peerRestore = try restic([
            "restore", "latest", "--repo", "\(root)/large-restic", "--target", "\(root)/large-restic-restored",
        ])
        print(
            String(
                format:
                    "  1 GiB file: backup %.1f s CPU, %.0f MB (restic %.1f s, %.0f MB); restore %.1f s CPU, %.0f MB "
                    + "(restic %.1f s, %.0f MB)", backup.cpuSeconds, backup.peakMegabytes, peerBackup.cpuSeconds,
                peerBackup.peakMegabytes, restore.cpuSeconds, restore.peakMegabytes, peerRestore.cpuSeconds,
                peerRestore.peakMegabytes))
        try context.shell("rm -rf '\(source)' '\(root)'/large-*")
        return [
            BenchRow(
                measure: "backup of one 1 GiB file: peak memory", unit: "MB", ours: backup.peakMegabytes,
                peerName: "budget", peer: 200, target: .atMost(1.0), runs: 1),
            BenchRow(
                measure: "restore of it: peak memory", unit: "MB", ours: restore.peakMegabytes, peerName: "budget",
                peer: 200, target: .atMost(1.0), runs: 1),
        ]
    }

    /// A 64 MiB text value backed up, one byte in its middle changed, backed up again: the bytes the second backup
    /// adds, beside restic's and against two chunks' worth (16 MiB).
    func oneByteEdit() throws -> [BenchRow] {
        let source = try context.directory("backup-files/edit-source")
        let words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
        var generator = SeededRandom(seed: 64)
        var text: [UInt8] = []
        text.reserveCapacity(64 << 20)
        while text.count < 64 << 20 {
            text += words[Int(generator.next() % 10)].utf8
            text.append(generator.next() % 12 == 0 ? 10 : 32)
        }
        text.removeLast(text.count - (64 << 20))
        let file = URL(fileURLWithPath: source + "/large.txt")
        try Data(text).write(to: file)
        let pipeline = try pipeline("edit", source: source)
        try clean("edit")
        _ = try ours(pipeline, "backup")
        _ = try restic(["backup", "--repo", "\(root)/edit-restic", source])
        let before = (try directoryBytes("\(root)/edit-vault"), try directoryBytes("\(root)/edit-restic"))
        text[text.count / 2] = UInt8(ascii: "#")
        try Data(text).write(to: file)
        _ = try ours(pipeline, "backup")
        _ = try restic(["backup", "--repo", "\(root)/edit-restic", source])
        let added = (
            Double(try directoryBytes("\(root)/edit-vault") - before.0) / 1_048_576,
            Double(try directoryBytes("\(root)/edit-restic") - before.1) / 1_048_576
        )
        print(String(format: "  1-byte edit of 64 MiB: %.2f MiB added (restic %.2f MiB)", added.0, added.1))
        try context.shell("rm -rf '\(source)' '\(root)'/edit-*")
        return [
            BenchRow(
                measure: "bytes a 1-byte edit of a 64 MiB value adds", unit: "MiB", ours: added.0,
                peerName: "two chunks", peer: 16, target: .atMost(1.0), runs: 1),
            BenchRow(
                measure: "  the same beside restic", unit: "MiB", ours: added.0, peerName: "restic", peer: added.1,
                target: nil, runs: 1),
        ]
    }
}
