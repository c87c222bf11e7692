// libFuzzer's entry points for `make fuzz`: built only with CLOUDSYNC_FUZZ=1 and `--sanitize=fuzzer` (see
// Package.swift), which links libFuzzer's own `main`; the entry point to fuzz is named by CLOUDSYNC_FUZZ_TARGET.
import CloudSyncFuzzing
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The entry point chosen once, before the first input.
nonisolated(unsafe) private var chosen = FuzzEntry.yaml

/// Reads CLOUDSYNC_FUZZ_TARGET (`yaml`, `pipeline` or `envelope`) and writes its seeds.
@_cdecl("LLVMFuzzerInitialize")
public func initialize(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> CInt {
    let name = ProcessInfo.processInfo.environment["CLOUDSYNC_FUZZ_TARGET"] ?? ""
    guard let entry = FuzzEntry(rawValue: name) else {
        let names = FuzzEntry.allCases.map(\.rawValue).joined(separator: ", ")
        FileHandle.standardError.write(
            Data("cloudsync-fuzz: set CLOUDSYNC_FUZZ_TARGET to one of \(names); found \"\(name)\"\n".utf8))
        exit(64)
    }
    chosen = entry
    // With CLOUDSYNC_FUZZ_SEEDS set, the entry point's seeds are written there first, for libFuzzer to read.
    if let directory = ProcessInfo.processInfo.environment["CLOUDSYNC_FUZZ_SEEDS"] {
        for (index, seed) in entry.seeds.enumerated() {
            FileManager.default.createFile(atPath: "\(directory)/seed-\(index)", contents: seed)
        }
    }
    return 0
}

/// Runs one input through the chosen entry point.
@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    chosen.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
