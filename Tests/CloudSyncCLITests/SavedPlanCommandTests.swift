import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncCLI

/// `cloudsync plan --job --out` and `cloudsync apply`: a plan applied is exactly what was reviewed, a key that moved
/// in between is left alone and named, and applying twice writes nothing the second time.
@Suite struct SavedPlanCommandTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.file("dst"), withIntermediateDirectories: true)
        try pipeline(transform: "{appearance: {theme: .theme}}")
    }

    private func pipeline(transform: String, type: String = "migrate") throws {
        try """
        version: 1
        name: planned
        providers:
          src: { type: sqlite, path: \(directory.file("src.db")), create: true }
          dst: { type: directory, path: \(directory.file("dst")), create: true }
        store: { providers: [src] }
        jobs:
          - name: reshape
            type: \(type)
            from: src
            to: dst
            rename: { from: "settings.*", to: "prefs.{1}" }
            transform: '\(transform)'
        report: { path: '\(directory.file("reports"))/{startedAt}.json' }
        """.write(toFile: directory.file("p.yaml"), atomically: true, encoding: .utf8)
    }

    private func cloudsync(_ arguments: [String], environment: [String: String] = [:]) async -> (
        status: ExitCode, output: String, errors: String
    ) {
        await inProcessCloudsync(arguments, environment: environment)
    }

    private func source() throws -> SQLiteProvider { try SQLiteProvider(id: "src", path: directory.file("src.db")) }
    private func destination() throws -> DirectoryProvider {
        try DirectoryProvider(id: "dst", root: directory.file("dst"))
    }

    private func contents(_ provider: any Provider) async throws -> [String: String] {
        let keys = try await listEveryKey(of: provider, pageSize: 100)
        var items: [String: String] = [:]
        for (key, result) in zip(keys, try await provider.get(keys)) { items[key] = try result.get() }
        await provider.close()
        return items
    }

    private func set(_ items: [String: String], on provider: any Provider) async throws {
        for result in try await provider.set(items.map { KeyValue($0.key, $0.value) }) { try result.get() }
        await provider.close()
    }

    private func report(_ output: String) throws -> [String: Any] {
        let report = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any]
        return try #require((report?["jobs"] as? [[String: Any]])?.first)
    }

    static func key(_ index: Int) -> String { "settings.k" + String(index).leftPadded(to: 2) }

    @Test func keysThatMovedAfterThePlanAreLeftAloneTheRestAppliedAndASecondApplyWritesNothing() async throws {
        let planned = Dictionary(uniqueKeysWithValues: (0..<50).map { (Self.key($0), #"{"theme":"t\#($0)"}"#) })
        try await set(planned, on: try source())
        let plan = directory.file("plan.jsonl")
        let made = await cloudsync(["plan", directory.file("p.yaml"), "--job", "reshape", "--out", plan])
        #expect(made.status == .success, "\(made.errors)")
        #expect(made.output.contains("copy: 50"), "\(made.output)")

        // Between the review and the apply: two source values change, one source key goes, and someone writes one
        // of the planned destinations.
        try await set([Self.key(5): #"{"theme":"late"}"#, Self.key(17): #"{"theme":"late"}"#], on: try source())
        _ = try await source().remove([Self.key(45)])
        try await set(["prefs.k40": "an outsider's value"], on: try destination())

        let applied = await cloudsync(["apply", plan, "--json"])
        #expect(applied.status == .failure, "\(applied.errors)")
        let first = try report(applied.output)
        let counts = try #require(first["counts"] as? [String: Int])
        #expect(counts["copied"] == 46)
        #expect(counts["changedSincePlan"] == 4)
        let failures = (first["failures"] as? [[String: Any]]) ?? []
        #expect(
            Set(failures.compactMap { $0["key"] as? String }) == [
                Self.key(5), Self.key(17), Self.key(40), Self.key(45),
            ])
        let landed = try await contents(try destination())
        #expect(landed.count == 47)
        #expect(landed["prefs.k05"] == nil)
        #expect(landed["prefs.k17"] == nil)
        #expect(landed["prefs.k45"] == nil)
        #expect(landed["prefs.k40"] == "an outsider's value")
        #expect(landed["prefs.k12"] == #"{"appearance":{"theme":"t12"}}"#)

        let again = await cloudsync(["apply", plan, "--json"])
        let second = try report(again.output)
        let secondCounts = try #require(second["counts"] as? [String: Int])
        #expect(secondCounts["copied"] == 0)
        #expect(secondCounts["unchanged"] == 46)
        #expect(try await contents(try destination()) == landed)
    }

    @Test func aPlanOfAPipelineThatChangedIsRefusedNamingTheChangeAndTouchesNothing() async throws {
        try await set([Self.key(1): #"{"theme":"dark"}"#], on: try source())
        let plan = directory.file("plan.jsonl")
        #expect(
            await cloudsync(["plan", directory.file("p.yaml"), "--job", "reshape", "--out", plan]).status == .success)
        try pipeline(transform: "{look: .theme}")
        let refused = await cloudsync(["apply", plan])
        #expect(refused.status == .usage)
        #expect(
            refused.errors.contains("`transform` was '{appearance: {theme: .theme}}' and is '{look: .theme}'"),
            "\(refused.errors)")
        #expect(try await contents(try destination()).isEmpty)
    }

    @Test func aPlanEditedOrCutShortIsRefusedWhole() async throws {
        try await set([Self.key(1): #"{"theme":"dark"}"#, Self.key(2): #"{"theme":"light"}"#], on: try source())
        let plan = directory.file("plan.jsonl")
        #expect(
            await cloudsync(["plan", directory.file("p.yaml"), "--job", "reshape", "--out", plan]).status == .success)
        let text = try String(contentsOfFile: plan, encoding: .utf8)
        try text.replacingOccurrences(of: "prefs.k02", with: "prefs.k99").write(
            toFile: directory.file("edited.jsonl"), atomically: true, encoding: .utf8)
        try String(text.dropLast(40)).write(toFile: directory.file("cut.jsonl"), atomically: true, encoding: .utf8)
        for (name, says) in [("edited.jsonl", "changed or damaged"), ("cut.jsonl", "cut short")] {
            let refused = await cloudsync(["apply", directory.file(name)])
            #expect(refused.status == .usage)
            #expect(refused.errors.contains(says), "\(refused.errors)")
        }
        #expect(try await contents(try destination()).isEmpty)
    }

    @Test func aPlannedMoveRemovesWhatItMovedAndNothingItDidNot() async throws {
        try pipeline(transform: ".theme", type: "move")
        try await set([Self.key(1): #"{"theme":"dark"}"#, Self.key(2): #"{"theme":"light"}"#], on: try source())
        let plan = directory.file("plan.jsonl")
        #expect(
            await cloudsync(["plan", directory.file("p.yaml"), "--job", "reshape", "--out", plan]).status == .success)
        try await set([Self.key(2): #"{"theme":"late"}"#, Self.key(3): #"{"theme":"new"}"#], on: try source())
        let applied = await cloudsync(["apply", plan, "--json"])
        let counts = try #require(try report(applied.output)["counts"] as? [String: Int])
        #expect(counts["moved"] == 1)
        #expect(counts["changedSincePlan"] == 1)
        #expect(
            try await contents(try source()) == [Self.key(2): #"{"theme":"late"}"#, Self.key(3): #"{"theme":"new"}"#])
        #expect(try await contents(try destination()) == ["prefs.k01": #""dark""#])
        let again = await cloudsync(["apply", plan, "--json"])
        let secondCounts = try #require(try report(again.output)["counts"] as? [String: Int])
        #expect(secondCounts["moved"] == 0)
        #expect(try await contents(try destination()) == ["prefs.k01": #""dark""#])
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}
