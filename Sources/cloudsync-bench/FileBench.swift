import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation

/// Files under keys: `putFile` of a 512 MiB file into a directory provider and `getFile` of it back out, each in a
/// child process of its own (so its peak memory is the transfer's), beside `cp` and `sync` of the same file (the
/// store makes its copies durable too); and each one's peak memory against a 100 MB budget, since files stream.
func benchFiles(_ context: BenchContext) async throws -> [BenchRow] {
    let megabytes = 512
    let directory = try context.directory("files")
    let source = directory + "/source.bin"
    try context.shell("head -c \(megabytes)M /dev/urandom > '\(source)'")
    let executable = Bundle.main.executablePath ?? CommandLine.arguments[0]
    var puts: [ChildRun] = []
    var gets: [ChildRun] = []
    var copies: [ChildRun] = []
    for run in 0..<context.runs {
        let root = directory + "/root-\(run)"
        let back = directory + "/back-\(run).bin"
        puts.append(try runChild(executable, ["--file-child", "put", source, root]))
        gets.append(try runChild(executable, ["--file-child", "get", back, root]))
        copies.append(
            try runChild(
                "/bin/sh",
                ["-c", "cp '\(source)' '\(directory)/copy-\(run).bin' && sync '\(directory)/copy-\(run).bin'"]))
        for path in [root, back, directory + "/copy-\(run).bin"] { try? FileManager.default.removeItem(atPath: path) }
    }
    let size = "\(megabytes) MiB"
    let s3Rows = try benchS3Files(context, executable: executable)
    return s3Rows + [
        BenchRow(
            measure: "putFile \(size) → directory: s", unit: "s", ours: median(puts.map(\.seconds)),
            peerName: "cp; sync", peer: median(copies.map(\.seconds)), target: .atMost(1.2), runs: context.runs),
        BenchRow(
            measure: "getFile \(size) directory → file: s", unit: "s", ours: median(gets.map(\.seconds)),
            peerName: "cp; sync", peer: median(copies.map(\.seconds)), target: .atMost(1.2), runs: context.runs),
        .peakMemory("putFile \(size): peak memory", of: puts, runs: context.runs),
        .peakMemory("getFile \(size): peak memory", of: gets, runs: context.runs),
    ]
}

/// The same through the s3 provider to moto, a 128 MiB file (multipart, parts read from the file): the time beside
/// `rclone copyto` of the same file, taking turns, and each transfer's peak memory against the 100 MB budget.
private func benchS3Files(_ context: BenchContext, executable: String) throws -> [BenchRow] {
    let megabytes = 128
    guard context.has("rclone"),
        let moto = try? MotoS3Server(
            repository: FileManager.default.currentDirectoryPath,
            buckets: (0..<context.runs).flatMap { ["bench-files-\($0)", "bench-files-rclone-\($0)"] })
    else {
        print("s3 files: skipped (needs .build/pyenv from scripts/python-env.sh and Debian's rclone)")
        return []
    }
    defer { moto.stop() }
    let directory = try context.directory("s3-files")
    let source = directory + "/source.bin"
    try context.shell("head -c \(megabytes)M /dev/urandom > '\(source)'")
    var puts: [ChildRun] = []
    var gets: [ChildRun] = []
    var peers: [ChildRun] = []
    for run in 0..<context.runs {
        let bucket = "s3:" + moto.endpoint.absoluteString + "/bench-files-\(run)"
        puts.append(try runChild(executable, ["--file-child", "put", source, bucket]))
        gets.append(try runChild(executable, ["--file-child", "get", directory + "/back-\(run).bin", bucket]))
        peers.append(
            try runChild(
                "/bin/sh",
                [
                    "-c",
                    "\(rcloneOnMoto(moto.endpoint)) rclone copyto '\(source)' moto:bench-files-rclone-\(run)/file.bin",
                ]))
        try? FileManager.default.removeItem(atPath: directory + "/back-\(run).bin")
    }
    let size = "\(megabytes) MiB"
    return [
        BenchRow(
            measure: "putFile \(size) → S3 (moto): s", unit: "s", ours: median(puts.map(\.seconds)),
            peerName: "rclone copyto", peer: median(peers.map(\.seconds)), target: .atMost(1.2), runs: context.runs),
        .peakMemory("putFile \(size) → S3: peak memory", of: puts, runs: context.runs),
        .peakMemory("getFile \(size) S3 → file: peak memory", of: gets, runs: context.runs),
    ]
}

/// In the child the file bench starts (`--file-child put|get PATH ROOT`): one transfer, then exits.
///
/// Stores the file at PATH under a key of a directory provider at ROOT (or of the bucket `s3:ENDPOINT/BUCKET`), or
/// writes that key's file to PATH; exits 0 on success. Returns at once in any other process.
func fileChild(_ arguments: [String]) async {
    guard let index = arguments.firstIndex(of: "--file-child"), index + 3 < arguments.count else { return }
    let (mode, path, root) = (arguments[index + 1], arguments[index + 2], arguments[index + 3])
    do {
        let provider: any Provider
        if root.hasPrefix("s3:"), let slash = root.lastIndex(of: "/"),
            let endpoint = URL(string: String(root[root.index(root.startIndex, offsetBy: 3)..<slash]))
        {
            // s3:ENDPOINT/BUCKET, as the S3 rows pass it.
            provider = motoBucket(endpoint, String(root[root.index(after: slash)...]), id: "files")
        } else {
            provider = try DirectoryProvider(id: "files", root: root)
        }
        var options = StoreOptions()
        options.timeout = nil
        let store = try CloudStore(providers: [provider], options: options)
        let receipt =
            mode == "put"
            ? try await store.putFile("bench/file.bin", from: path)
            : try await store.getFile("bench/file.bin", to: path)
        print("\(mode): \(receipt?.size ?? -1) bytes")
        exit(receipt == nil ? 1 : 0)
    } catch {
        print("error: \(error)")
        exit(2)
    }
}
