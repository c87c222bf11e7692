import CloudSync
import CloudSyncAuth
import CloudSyncCloudKit
import CloudSyncDrive
import CloudSyncEmulator
import CloudSyncHTTP
import CloudSyncLocal
import CloudSyncS3
import CloudSyncTesting
import Foundation

/// One cloud the requests bench drives through the store: how to make a fresh store on it for a run, where the
/// server's own request log is, which logged requests are sign-in traffic, and the protocol's minimum request count
/// for each operation on `count` keys.
private struct CountedCloud {
    var name: String
    /// What is measured on it, in order.
    var operations = RequestOperation.allCases
    /// A store on a fresh account, zone or bucket for run `run`.
    var store: (_ run: Int) async throws -> CloudStore
    /// The requests the server saw since the last ``clearLog``.
    var log: () -> [HTTPLogEntry]
    var clearLog: () -> Void
    /// Token requests (OAuth's `/token`): left out of the count, reported beside it.
    var isSignIn: (HTTPLogEntry) -> Bool = { _ in false }
    /// The fewest requests the protocol allows for each operation on `count` keys.
    var minimum: (_ operation: RequestOperation, _ count: Int) -> Int
    /// What the minimum counts besides one request per key or per full batch, where it counts more.
    var minimumNote: (_ operation: RequestOperation) -> String? = { _ in nil }
}

/// What the bench does through the store, in this order, to the same keys.
private enum RequestOperation: String, CaseIterable {
    case set, get, list, remove
}

/// `count` divided into requests of at most `perRequest`, rounded up.
private func requests(_ count: Int, per perRequest: Int) -> Int { (count + perRequest - 1) / perRequest }

/// Requests per 1,000 keys the server saw, beside the protocol's minimum.
///
/// Set, get, list and remove of 1,000 keys of 100 bytes through the store, on CloudKit and Drive (the emulators,
/// counting their own request logs) and S3 (moto, counted by a forwarding proxy in front of it, so the figure is what
/// reached the server, not what the provider believes it sent), beside the protocol's minimum: CloudKit 200 keys a
/// `records/modify`, `records/lookup` or `changes/zone` page; Drive one request per key for content (and, for writes,
/// one `files.list` page per 1,000 names to learn which exist), 100 deletes a batch request, 1,000 names a `files.list`
/// page; S3 one request per object, 1,000 keys a `DeleteObjects` or `ListObjectsV2` page. One more row writes the same
/// keys into a Drive already holding 10,000 other files, where the listing a write needs is 11 pages; how often the
/// provider lists again depends on how long the writes take (``DriveProvider/listingTrust``), so that row moves with
/// the machine's load.
///
/// Each run starts on a fresh account, zone or bucket and first writes the first key alone, so the one-time costs
/// (the availability probe, creating the CloudKit zone) are not spread over the keys; sign-in requests (OAuth's
/// `/token`) are left out of the count and named in the measure when there were any.
func benchRequests(_ context: BenchContext) async throws -> [BenchRow] {
    let count = 1000
    var clouds = [try cloudKitCloud(), try driveCloud(), try driveCloud(holding: 10_000)]
    let moto = try? MotoS3Server(
        repository: FileManager.default.currentDirectoryPath,
        buckets: (0..<context.runs).flatMap { ["requests-\($0)", "pipeline-\($0)"] })
    if let moto {
        clouds.append(try s3Cloud(moto))
    } else {
        print("s3 requests: skipped (needs .build/pyenv from scripts/python-env.sh)")
    }
    defer { moto?.stop() }

    let value = String(repeating: "v", count: 100)
    let keys = (0..<count).map { String(format: "settings.item.%06d", $0) }
    var rows: [BenchRow] = []
    for cloud in clouds {
        rows += try await countedRows(cloud, keys: keys, value: value, runs: context.runs)
    }
    rows.append(try await benchDriveSpreadWrites(context, count: count, value: value))
    if let moto { rows += try await benchRequestsThroughARun(context, moto: moto, count: count) }
    return rows
}

/// The requests `cloud`'s server saw per 1,000 keys for each of its operations on `keys`, the median of `runs`
/// runs each on a fresh store, beside the protocol's minimum: a row an operation.
private func countedRows(_ cloud: CountedCloud, keys: [String], value: String, runs: Int) async throws -> [BenchRow] {
    let count = keys.count
    var counted: [RequestOperation: [Double]] = [:]
    var signIns: [RequestOperation: Int] = [:]
    for run in 0..<runs {
        let store = try await cloud.store(run)
        // The one-time costs (availability probe, zone creation) go before the count; a key written and removed
        // here would leave a CloudKit tombstone that the listing (changes/zone) walks past.
        try await store.set(value, forKey: keys[0])
        cloud.clearLog()
        for operation in cloud.operations {
            try await perform(operation, on: store, keys: keys, value: value, cloud: cloud.name)
            let log = cloud.log()
            cloud.clearLog()
            let signIn = log.filter(cloud.isSignIn).count
            signIns[operation, default: 0] += signIn
            counted[operation, default: []].append(Double(log.count - signIn) * 1000 / Double(count))
        }
        store.close()
    }
    return cloud.operations.map { operation in
        let tokens = signIns[operation] ?? 0
        return BenchRow(
            measure: "requests the server saw, \(operation.rawValue) \(count.formatted()) × 100 B, \(cloud.name)"
                + (tokens > 0 ? " (+\(tokens) token requests over \(runs) runs, not counted)" : ""),
            unit: "per 1,000 keys", ours: median(counted[operation] ?? []),
            peerName: "protocol minimum" + (cloud.minimumNote(operation).map { " (\($0))" } ?? ""),
            peer: Double(cloud.minimum(operation, count)) * 1000 / Double(count), target: .atMost(1.0), runs: runs)
    }
}

/// Does `operation` to every one of `keys` through `store` (on `cloud`), stopping the bench when what it reads back
/// is not what was written.
private func perform(_ operation: RequestOperation, on store: CloudStore, keys: [String], value: String, cloud: String)
    async throws
{
    switch operation {
    case .set:
        for result in try await store.multiSet(keys.map { KeyValue($0, value) }) { _ = try result.get() }
    case .get:
        let values = try await store.multiGet(keys)
        guard values.allSatisfy({ $0 == value }) else { fatalError("\(cloud): a value read wrong") }
    case .list:
        let listed = try await store.allKeys().keys
        guard listed == keys else { fatalError("\(cloud): listed \(listed.count) of \(keys.count) keys") }
    case .remove:
        for result in try await store.multiRemove(keys) { _ = try result.get() }
    }
}

/// Requests for `count` keys written into a Drive holding 10,000 files, a store batch at a time, with the listing's
/// trust run out before each batch.
///
/// The batches come more than ``DriveProvider/listingTrust`` apart on a manual clock, so the machine's speed cannot
/// move this row, unlike the one writing all keys at once. Beside it, the least a writer can send that never trusts a
/// listing older than that: one listing, then one change-feed read before each later batch.
private func benchDriveSpreadWrites(_ context: BenchContext, count: Int, value: String) async throws -> BenchRow {
    let files = 10_000
    let batch = DriveProvider.batchLimit
    let drive = DriveEmulator()
    let host = try EmulatorServer(services: [drive])
    defer { host.server.stop() }
    let client = OAuthClientConfiguration(
        clientID: GoogleOAuthEmulator.Client.emulatorDefault.id,
        clientSecret: GoogleOAuthEmulator.Client.emulatorDefault.secret,
        authorizationEndpoint: host.baseURL.appendingPathComponent("o/oauth2/v2/auth"),
        tokenEndpoint: host.baseURL.appendingPathComponent("token"), scopes: [DriveProviderFactory.scope])
    var counted: [Double] = []
    for run in 0..<context.runs {
        let user = "spread-\(run)@example.com"
        for number in 0..<files {
            _ = drive.files.addFile(user: user, name: String(format: "other.%06d", number), content: Data("o".utf8))
        }
        let clock = ManualClock()
        let transport = URLSessionTransport(maxConcurrency: 8)
        let tokens = OAuthAccessTokens(
            client: OAuthTokenClient(configuration: client, transport: transport),
            refreshToken: drive.oauth.issueTokens(user: user).refreshToken)
        let store = try store(
            on: DriveProvider(
                endpoint: host.baseURL, authenticator: tokens, transport: transport,
                context: ProviderContext(
                    providerID: "drive", clock: clock,
                    state: ProviderState(provider: "drive", store: InMemoryProviderStateStore()))))
        try await store.set(value, forKey: "spread.first")
        host.server.clearLog()
        for start in stride(from: 0, to: count, by: batch) {
            clock.advance(by: DriveProvider.listingTrust + .milliseconds(1))
            let items = (start..<min(start + batch, count)).map { KeyValue(String(format: "spread.%06d", $0), value) }
            for result in try await store.multiSet(items) { _ = try result.get() }
        }
        let sent = host.server.requestLog.filter { $0.path != "/token" }.count
        counted.append(Double(sent) * 1000 / Double(count))
        store.close()
    }
    let minimum = count + requests(files + count, per: DriveProvider.pageSize) + requests(count, per: batch) - 1
    return BenchRow(
        measure: "requests the server saw, set \(count.formatted()) × 100 B in batches 5 s apart, Drive emulator "
            + "holding \(files.formatted()) files",
        unit: "per 1,000 keys", ours: median(counted),
        peerName: "protocol minimum (one listing, a change-feed read a later batch)",
        peer: Double(minimum) * 1000 / Double(count), target: .atMost(1.0), runs: context.runs)
}

/// The same count through a pipeline run, as `cloudsync run` does it in a child process (its runner, page sizes,
/// availability and account checks included): a `migrate` of the keys from a SQLite file into an empty bucket, then
/// an `export` of that bucket (a listing and a read of each key), then a `sync` of the file and the bucket run twice
/// (the second with nothing changed since the first), beside the protocol minimum for each.
private func benchRequestsThroughARun(_ context: BenchContext, moto: MotoS3Server, count: Int) async throws
    -> [BenchRow]
{
    let directory = try context.directory("requests-run")
    let source = try SQLiteProvider(id: "source", path: directory + "/source.db")
    let value = String(repeating: "v", count: 100)
    for result in try await source.set((0..<count).map { KeyValue(String(format: "settings.item.%06d", $0), value) }) {
        try result.get()
    }
    await source.close()
    var migrated: [Double] = []
    var exported: [Double] = []
    var resynced: [Double] = []
    for run in 0..<context.runs {
        let counted = try requestsOfRun(run, moto: moto, in: directory)
        migrated.append(Double(counted.migrate) * 1000 / Double(count))
        exported.append(Double(counted.export) * 1000 / Double(count))
        resynced.append(Double(counted.resync) * 1000 / Double(count))
    }
    // A run first checks that the bucket answers (one listing of one key), once whatever the number of keys. Then a
    // migrate (overwriting, the default) needs one PUT a key and a listing of what the bucket holds (the version
    // tags a re-run compares), an export a listing page per 1,000 keys and a GET each.
    func perThousand(_ requests: Int) -> Double { Double(requests) * 1000 / Double(count) }
    return [
        BenchRow(
            measure: "requests the server saw, migrate \(count.formatted()) × 100 B sqlite → S3 moto, a pipeline run",
            unit: "per 1,000 keys", ours: median(migrated),
            peerName: "protocol minimum (+ 1 availability check, + 1 listing of the bucket, as rclone copy makes)",
            peer: perThousand(count + 2), target: .atMost(1.0), runs: context.runs),
        BenchRow(
            measure: "requests the server saw, export \(count.formatted()) × 100 B from S3 moto, a pipeline run",
            unit: "per 1,000 keys", ours: median(exported), peerName: "protocol minimum (+ 1 availability check)",
            peer: perThousand(count + requests(count, per: S3Provider.batchLimit) + 1), target: .atMost(1.0),
            runs: context.runs),
        // Nothing changed since the last sync found every key in sync: the listing's ETags vouch for every copy, so
        // the minimum is the listing alone.
        BenchRow(
            measure: "requests the server saw, sync \(count.formatted()) × 100 B sqlite ↔ S3 moto again, nothing "
                + "changed, a pipeline run",
            unit: "per 1,000 keys", ours: median(resynced), peerName: "protocol minimum (+ 1 availability check)",
            peer: perThousand(requests(count, per: S3Provider.batchLimit) + 1), target: .atMost(1.0),
            runs: context.runs),
    ]
}

/// Run `run` of the pipeline requests bench, each pipeline a child `cloudsync run` against moto behind a counting
/// proxy of its own: the requests a migrate into bucket `pipeline-RUN` sent, then an export of it, then a second
/// sync of the file and the bucket.
private func requestsOfRun(_ run: Int, moto: MotoS3Server, in directory: String) throws
    -> (migrate: Int, export: Int, resync: Int)
{
    let executable = Bundle.main.executablePath ?? CommandLine.arguments[0]
    let proxy = try ForwardingProxy(upstream: moto.endpoint)
    defer { proxy.server.stop() }
    func pipeline(_ name: String, job: String, store: String = "bucket") throws -> String {
        try requestsPipeline(name, job: job, store: store, run: run, bucketEndpoint: proxy.endpoint, in: directory)
    }
    let migrate = try pipeline("migrate", job: "{ type: migrate, from: source, to: bucket }")
    let export = try pipeline("export", job: "{ type: export, from: bucket, path: export-\(run).json }")
    _ = try runChild(executable, ["--sync-child", migrate])
    let migrated = proxy.server.requestLog.count
    proxy.server.clearLog()
    _ = try runChild(executable, ["--sync-child", export])
    let exported = proxy.server.requestLog.count
    let sync = try pipeline("sync", job: "{ type: sync, name: sync }", store: "source, bucket")
    _ = try runChild(executable, ["--sync-child", sync])
    proxy.server.clearLog()
    _ = try runChild(executable, ["--sync-child", sync])
    return (migrated, exported, proxy.server.requestLog.count)
}

/// Writes pipeline `name` of run `run` into `directory`: the SQLite file `source` and the bucket `pipeline-RUN` at
/// `bucketEndpoint`, the store on `store`, and its one `job`; returns its path.
private func requestsPipeline(
    _ name: String, job: String, store: String, run: Int, bucketEndpoint: URL, in directory: String
) throws -> String {
    let path = directory + "/\(name)-\(run).yaml"
    try """
    version: 1
    name: \(name)-\(run)
    state: state-\(name)-\(run)
    providers:
      source: { type: sqlite, path: source.db }
      bucket:
        type: s3
        endpoint: \(bucketEndpoint.absoluteString)
        bucket: pipeline-\(run)
        region: us-east-1
        accessKeyId: bench
        secretAccessKey: bench
    store:
      providers: [\(store)]
    jobs:
      - \(job)
    report: { path: report-\(name)-\(run).json }
    """.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

/// A store with no deadline on `provider` alone.
private func store(on provider: any Provider) throws -> CloudStore {
    var options = StoreOptions()
    options.timeout = nil
    return try CloudStore(providers: [provider], options: options)
}

/// The CloudKit emulator on loopback, a fresh sign-in and zone each run, its whole request log counted.
private func cloudKitCloud() throws -> CountedCloud {
    let emulator = CloudKitEmulator()
    let host = try EmulatorServer(services: [emulator])
    let container = "iCloud.com.example.cloudsync"
    return CountedCloud(
        name: "CloudKit emulator",
        store: { run in
            let state = ProviderState(provider: "cloudKit", store: InMemoryProviderStateStore())
            let bridge = CloudKitBridge(
                configuration: CloudKitConfiguration(
                    endpoint: host.baseURL, container: container, environment: "development",
                    zoneName: "Requests\(run)", apiToken: CloudKitWebAuthEmulator.defaultAPIToken),
                webAuthToken: try CloudKitWebAuthToken(
                    state: state,
                    fallback: emulator.webAuth.issueToken(container: container, environment: "development")),
                transport: URLSessionTransport(),
                context: ProviderContext(providerID: "cloudKit"))
            return try store(on: CloudKitProvider(id: "cloudKit", bridge: bridge))
        },
        log: { host.server.requestLog }, clearLog: { host.server.clearLog() },
        minimum: { _, count in requests(count, per: 200) })
}

/// The Drive emulator on loopback, a fresh user each run holding `files` other files (then only writes are measured);
/// its `/token` requests are sign-in traffic.
private func driveCloud(holding files: Int = 0) throws -> CountedCloud {
    let drive = DriveEmulator()
    let host = try EmulatorServer(services: [drive])
    let client = OAuthClientConfiguration(
        clientID: GoogleOAuthEmulator.Client.emulatorDefault.id,
        clientSecret: GoogleOAuthEmulator.Client.emulatorDefault.secret,
        authorizationEndpoint: host.baseURL.appendingPathComponent("o/oauth2/v2/auth"),
        tokenEndpoint: host.baseURL.appendingPathComponent("token"), scopes: [DriveProviderFactory.scope])
    return CountedCloud(
        name: "Drive emulator" + (files > 0 ? " holding \(files.formatted()) files" : "") + ", /token not counted",
        operations: files > 0 ? [.set] : RequestOperation.allCases,
        store: { run in
            let user = "requests-\(run)@example.com"
            for number in 0..<files {
                _ = drive.files.addFile(user: user, name: String(format: "other.%06d", number), content: Data("o".utf8))
            }
            let transport = URLSessionTransport(maxConcurrency: 8)
            let tokens = OAuthAccessTokens(
                client: OAuthTokenClient(configuration: client, transport: transport),
                refreshToken: drive.oauth.issueTokens(user: user).refreshToken)
            return try store(
                on: DriveProvider(
                    endpoint: host.baseURL, authenticator: tokens, transport: transport,
                    context: ProviderContext(
                        providerID: "drive",
                        state: ProviderState(provider: "drive", store: InMemoryProviderStateStore()))))
        },
        log: { host.server.requestLog }, clearLog: { host.server.clearLog() },
        isSignIn: { $0.path == "/token" },
        // Drive names are not unique and a create does not fail on an existing name, so writing keys that may exist
        // takes a look first: the account's files listed, 1,000 names a page, besides the uploads.
        minimum: { operation, count in
            switch operation {
            case .set: count + requests(files + count, per: DriveProvider.pageSize)
            case .get: count
            case .list: requests(count, per: DriveProvider.pageSize)
            case .remove: requests(count, per: DriveProvider.batchLimit)
            }
        },
        minimumNote: { $0 == .set ? "+ files.list per 1,000 files" : nil })
}

/// moto's S3 behind a counting proxy, a fresh bucket each run.
private func s3Cloud(_ moto: MotoS3Server) throws -> CountedCloud {
    let proxy = try ForwardingProxy(upstream: moto.endpoint)
    return CountedCloud(
        name: "S3 moto, counted at a proxy",
        store: { run in
            try store(
                on: S3Provider(
                    location: S3Location(
                        endpoint: proxy.endpoint, bucket: "requests-\(run)", region: "us-east-1", pathStyle: true),
                    credentials: S3Credentials(accessKeyID: "bench", secretAccessKey: "bench"),
                    transport: URLSessionTransport(maxConcurrency: 16), context: ProviderContext(providerID: "bucket")))
        },
        log: { proxy.server.requestLog }, clearLog: { proxy.server.clearLog() },
        minimum: { operation, count in
            switch operation {
            case .set, .get: count
            case .list, .remove: requests(count, per: S3Provider.batchLimit)
            }
        })
}
