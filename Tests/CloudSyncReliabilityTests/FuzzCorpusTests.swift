import CloudSyncFuzzing
import CloudSyncTesting
import Foundation
import Testing

/// The fuzzers' corpus (`Tests/Fuzz/<entry>/`, grown by `make fuzz`) and seeds, replayed through the entry points
/// libFuzzer drives, without the fuzzer: an input that once crashed stays fixed.
@Suite struct FuzzCorpusTests {
    @Test(arguments: FuzzEntry.allCases)
    func theKeptCorpusRunsThroughItsEntryPoint(_ entry: FuzzEntry) throws {
        let directory = Repository.root + "/Tests/Fuzz/" + entry.rawValue
        let files = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        #expect(files.count >= 5, "\(directory) holds \(files.count) inputs; run `make fuzz` to grow it")
        for file in files {
            entry.run(try Data(contentsOf: URL(fileURLWithPath: directory + "/" + file)))
        }
        for seed in entry.seeds { entry.run(seed) }
    }
}
