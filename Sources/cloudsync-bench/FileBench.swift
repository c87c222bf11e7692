import CloudSync
import CloudSyncLocal
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
    return [
        BenchRow(
            measure: "putFile \(size) → directory: s", unit: "s", ours: median(puts.map(\.seconds)),
            peerName: "cp; sync", peer: median(copies.map(\.seconds)), target: .atMost(1.2), runs: context.runs),
        BenchRow(
            measure: "getFile \(size) directory → file: s", unit: "s", ours: median(gets.map(\.seconds)),
            peerName: "cp; sync", peer: median(copies.map(\.seconds)), target: .atMost(1.2), runs: context.runs),
        BenchRow(
            measure: "putFile \(size): peak memory", unit: "MB", ours: median(puts.map(\.peakMegabytes)),
            peerName: "budget", peer: 100, target: .atMost(1.0), runs: context.runs),
        BenchRow(
            measure: "getFile \(size): peak memory", unit: "MB", ours: median(gets.map(\.peakMegabytes)),
            peerName: "budget", peer: 100, target: .atMost(1.0), runs: context.runs),
    ]
}

/// In the child the file bench starts (`--file-child put|get PATH ROOT`): one transfer, then exits.
///
/// Stores the file at PATH under a key of a directory provider at ROOT, or writes that key's file to PATH; exits 0
/// on success. Returns at once in any other process.
func fileChild(_ arguments: [String]) async {
    guard let index = arguments.firstIndex(of: "--file-child"), index + 3 < arguments.count else { return }
    let (mode, path, root) = (arguments[index + 1], arguments[index + 2], arguments[index + 3])
    do {
        let provider = try DirectoryProvider(id: "files", root: root)
        let store = try CloudStore(providers: [provider])
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
