import CloudSync
import CloudSyncHTTP
import CloudSyncS3
import CloudSyncTesting
import Foundation
import Testing

/// A scheduled `migrate` re-run costs a listing: the job keeps the version tags it saw on both sides, so a night with
/// nothing new reads and writes nothing, and an edit on either side since is copied.
@Suite(.timeLimit(.minutes(10))) struct RememberingMigrateTests {
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    static let keys = 300

    /// A directory of ``keys`` files, migrated into a bucket through a proxy that logs every request moto sees.
    struct Night {
        let directory: TemporaryDirectory
        let proxy: ForwardingProxy
        let environment: [String: String]
        var pipeline: String { directory.file("nightly.yaml") }

        init(moto: MotoS3Server, overwrite: String) throws {
            directory = try TemporaryDirectory()
            proxy = try ForwardingProxy(upstream: moto.endpoint)
            environment = [
                "ENDPOINT": proxy.endpoint.absoluteString, "AWS_ACCESS_KEY_ID": "moto", "AWS_SECRET_ACCESS_KEY": "moto",
            ]
            try FileManager.default.createDirectory(atPath: directory.file("data"), withIntermediateDirectories: true)
            for index in 0..<RememberingMigrateTests.keys { try write("item.\(index)", "value \(index)") }
            try """
            version: 1
            name: nightly
            providers:
              data: { type: directory, path: ./data }
              cloud: { type: s3, bucket: nightly, endpoint: "${env:ENDPOINT}", region: us-east-1, prefix: \(overwrite)/ }
            store: { providers: [data] }
            jobs:
              - { type: migrate, name: upload, from: data, to: cloud, overwrite: \(overwrite) }
            """.write(toFile: pipeline, atomically: true, encoding: .utf8)
        }

        /// Sets `key`'s file in the source directory.
        func write(_ key: String, _ value: String) throws {
            try value.write(toFile: directory.file("data/\(key)"), atomically: true, encoding: .utf8)
        }

        /// Runs the pipeline (`file`, or the migrate's); answers its last job's counts and report and the requests
        /// the run sent, as `METHOD kind` (`GET list`, `PUT object`).
        func run(_ file: String? = nil) async throws -> (
            counts: [String: Int], requests: [String: Int], job: [String: Any]
        ) {
            proxy.server.clearLog()
            let report = directory.file("report.json")
            let result = await inProcessCloudsync(
                ["run", "--report", report, file ?? pipeline], environment: environment)
            #expect(result.status == .success, "\(result.errors)")
            let json = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report)))
                    as? [String: Any])
            let job = try #require((json["jobs"] as? [[String: Any]])?.last)
            let counts = (job["counts"] as? [String: Int]) ?? [:]
            var requests: [String: Int] = [:]
            for entry in proxy.server.requestLog {
                let kind = entry.queryItems.contains { $0.name == "list-type" } ? "list" : "object"
                requests["\(entry.method) \(kind)", default: 0] += 1
            }
            return (counts, requests, job)
        }
    }

    @Test(arguments: ["always", "ifDifferent"])
    func aSecondRunOnlyListsAndAThirdCopiesWhatChangedOnEitherSide(overwrite: String) async throws {
        let moto = try await MotoS3Server.start(repository: Self.repositoryRoot, buckets: ["nightly"])
        let night = try Night(moto: moto, overwrite: overwrite)
        let first = try await night.run()
        #expect(first.counts["copied"] == Self.keys, "\(first.counts)")
        #expect(first.requests["PUT object"] == Self.keys, "\(first.requests)")

        let second = try await night.run()
        #expect(second.counts["copied"] == 0 && second.counts["unchanged"] == Self.keys, "\(second.counts)")
        #expect(Set(second.requests.keys) == ["GET list"], "only listings: \(second.requests)")

        // One edit at the source, one behind the job's back in the bucket, one key new: those three are copied.
        try night.write("item.7", "edited at the source")
        try night.write("item.new", "new")
        let bucket = S3Provider(
            location: S3Location(endpoint: moto.endpoint, bucket: "nightly", region: "us-east-1", pathStyle: true),
            prefix: "\(overwrite)/", credentials: S3Credentials(accessKeyID: "moto", secretAccessKey: "moto"),
            transport: URLSessionTransport(), context: ProviderContext(providerID: "bucket"))
        try #require(try await bucket.set([KeyValue("item.9", "edited in the bucket")]).first).get()
        let third = try await night.run()
        #expect(third.counts["copied"] == 3 && third.counts["unchanged"] == Self.keys - 2, "\(third.counts)")
        #expect(third.requests["PUT object"] == 3, "\(third.requests)")
        let held = try await bucket.get(["item.7", "item.9", "item.new"]).map { try $0.get() }
        #expect(held == ["edited at the source", "value 9", "new"])

        let fourth = try await night.run()
        #expect(fourth.counts["copied"] == 0, "\(fourth.counts)")
        #expect(Set(fourth.requests.keys) == ["GET list"], "\(fourth.requests)")
        await moto.stopped()
    }

    /// A sync that leaves `incremental` at its default, between a SQLite file (which has a change feed) and a bucket
    /// (which has none), compares both in full, so the bucket's listed ETags spare every read: a night with nothing
    /// new costs a listing. (Reading the file's feed beside the bucket's listing would read every object.)
    @Test func aDefaultSyncBesideAProviderWithoutAFeedComparesInFullAndReadsNothingUnchanged() async throws {
        let moto = try await MotoS3Server.start(repository: Self.repositoryRoot, buckets: ["nightly"])
        let night = try Night(moto: moto, overwrite: "always")
        let synced = night.directory.file("synced.yaml")
        try """
        version: 1
        name: synced
        providers:
          data: { type: directory, path: ./data }
          db: { type: sqlite, path: ./db.sqlite, create: true }
          cloud: { type: s3, bucket: nightly, endpoint: "${env:ENDPOINT}", region: us-east-1, prefix: synced/ }
        store: { providers: [db, cloud] }
        jobs:
          - { type: migrate, name: seed, from: data, to: db }
          - { type: sync, name: nightly, providers: [db, cloud] }
        """.write(toFile: synced, atomically: true, encoding: .utf8)
        let first = try await night.run(synced)
        #expect(first.counts["repaired"] == Self.keys, "\(first.counts)")
        // The first run wrote every object, whose tags the snapshot learns from the bucket's next listing.
        _ = try await night.run(synced)
        let quiet = try await night.run(synced)
        #expect(quiet.counts["inSync"] == Self.keys, "\(quiet.counts)")
        #expect(Set(quiet.requests.keys) == ["GET list"], "a listing only: \(quiet.requests)")
        let sync = try #require(quiet.job["sync"] as? [String: Any])
        #expect(sync["mode"] as? String == "full")
        let reasons = try #require(sync["fullBecause"] as? [String: String])
        #expect(reasons["cloud"] == "it offers no change feed")
        #expect(reasons["db"]?.hasPrefix("cloud had no change-feed cursor") == true, "\(reasons)")
        await moto.stopped()
    }
}
