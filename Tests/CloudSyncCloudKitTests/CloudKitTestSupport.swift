import CloudSync
import CloudSyncAuth
import CloudSyncCloudKit
import CloudSyncHTTP
import CloudSyncTesting
import Foundation

/// A CloudKit emulator on loopback with one signed-in user, and bridges to it.
final class CloudKitFixture: Sendable {
    static let container = "iCloud.com.example.cloudsync"
    static let apiToken = CloudKitWebAuthEmulator.defaultAPIToken

    let host: EmulatorServer
    let emulator: CloudKitEmulator
    let environment: String
    /// The token the user's sign-in delivered.
    let signedInToken: String

    /// An emulator whose database keeps time by `clock` (the sign-in keeps the system clock's).
    init(
        environment: String = "development", dataDirectory: String? = nil, clock: any StoreClock = SystemClock(),
        configure: (inout CloudKitWebAuthEmulator.Configuration) -> Void = { _ in }
    ) throws {
        var configuration = CloudKitWebAuthEmulator.Configuration()
        configure(&configuration)
        emulator = CloudKitEmulator(webAuth: CloudKitWebAuthEmulator(configuration: configuration), clock: clock)
        host = try EmulatorServer(services: [emulator], dataDirectory: dataDirectory)
        self.environment = environment
        signedInToken = emulator.webAuth.issueToken(container: Self.container, environment: environment)
    }

    deinit { host.server.stop() }

    var endpoint: URL { host.baseURL }

    var userRecordName: String {
        CloudKitWebAuthEmulator.userRecordName("user@example.com", Self.container)
    }

    func configuration(zone: String = "CloudSyncZone") -> CloudKitConfiguration {
        CloudKitConfiguration(
            endpoint: endpoint, container: Self.container, environment: environment, zoneName: zone,
            apiToken: Self.apiToken)
    }

    /// A bridge whose token starts as `token` (default: the signed-in one), kept in `state`.
    ///
    /// Its deadline is generous: the suite loads the machine (its first seconds most), and these tests check what
    /// the bridge does, not how fast the emulator answers.
    func bridge(
        zone: String = "CloudSyncZone", token: String?? = .none, state: ProviderState? = nil,
        maxAttempts: Int = 1, changesPageSize: Int? = nil, timeout: Duration = .seconds(120)
    ) throws -> CloudKitBridge {
        let state = state ?? ProviderState(provider: "ck", store: InMemoryProviderStateStore())
        let initial: String? =
            switch token {
            case .none: signedInToken
            case .some(let given): given
            }
        return CloudKitBridge(
            configuration: configuration(zone: zone),
            webAuthToken: try CloudKitWebAuthToken(state: state, fallback: initial),
            transport: URLSessionTransport(), context: ProviderContext(providerID: "ck"), timeout: timeout,
            retryPolicy: RetryPolicy(
                maxAttempts: maxAttempts, baseDelay: .milliseconds(1), maxDelay: .milliseconds(5),
                hint: RetryPolicy.jsonSecondsHint()),
            changesPageSize: changesPageSize)
    }

    /// Logged requests to `operation` (`records/lookup`).
    func count(_ operation: String) -> Int {
        host.server.requestLog.filter { $0.path.hasSuffix("/" + operation) }.count
    }
}

/// A record of the test record type with one STRING field `value`.
func item(_ name: String, _ value: String) -> CloudKitRecord {
    CloudKitRecord(recordName: name, recordType: "CloudSyncItem", fields: ["value": .string(value)])
}
