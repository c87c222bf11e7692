import CloudSync
import CloudSyncAuth
import CloudSyncHTTP
import Foundation

/// The `cloudKit` provider type: one record per key in a custom zone of the signed-in user's private CloudKit
/// database, over CloudKit Web Services.
public struct CloudKitProviderFactory: ProviderFactory {
    /// Where the records live, how they look, and the credentials.
    public struct Configuration: Sendable {
        /// The container, environment, zone, endpoint and API token.
        public var bridge: CloudKitConfiguration
        /// A web auth token given in the pipeline; the one `cloudsync login` kept (or rotated) comes first.
        public var webAuthToken: String?
        /// The record type of the records.
        public var recordType: String
        /// The STRING field holding the value.
        public var field: String
        /// The largest value, in UTF-8 bytes of the encoded value.
        public var recordMaxBytes: Int
        /// Each request's deadline.
        public var timeoutMs: Int64
    }

    /// The live service's base URL.
    public static let defaultEndpoint = "https://api.apple-cloudkit.com"
    /// CloudKit's largest record, not counting assets: 1 MB.
    public static let maxRecordBytes = 1_048_576

    /// How requests are sent; URLSession unless a test or program gives another.
    public let transport: @Sendable () -> any HTTPTransport

    /// The factory; register it in a `ProviderRegistry`.
    public init(transport: @escaping @Sendable () -> any HTTPTransport = { URLSessionTransport() }) {
        self.transport = transport
    }

    /// The `type` pipeline files name.
    public var type: String { "cloudKit" }
    /// What the provider stores, and where, in one sentence.
    public var summary: String {
        "one record per key in a custom zone of the signed-in user's private CloudKit database (CloudKit Web Services)"
    }

    /// The fields of this type besides the common ones.
    public var fields: [ProviderField] {
        [
            ProviderField(
                "container", .text, required: true, summary: "the CloudKit container, starting with `iCloud.`"),
            ProviderField(
                "environment", .choice(["development", "production"]), defaultValue: "production",
                summary: "the container's environment; record types are made just in time only in development"),
            ProviderField(
                "apiToken", .text, required: true, secret: true,
                summary: "the container's API token from CloudKit Dashboard"),
            ProviderField(
                "webAuthToken", .text, secret: true,
                summary: "the user's web auth token; optional once `cloudsync login` kept one, which (rotated on "
                    + "every answer) is used first"),
            ProviderField(
                "zone", .text, defaultValue: "CloudSyncZone", summary: "the custom zone, created when missing"),
            ProviderField("recordType", .text, defaultValue: "CloudSyncItem", summary: "the records' type"),
            ProviderField("field", .text, defaultValue: "value", summary: "the STRING field holding the value"),
            ProviderField(
                "endpoint", .text, defaultValue: Self.defaultEndpoint,
                summary: "CloudKit Web Services' base URL; an emulator's in tests and examples"),
            ProviderField(
                "recordMaxBytes", .integer(minimum: 1, unit: "bytes"), defaultValue: "921600",
                summary: "the largest value this tier takes (900 KB; CloudKit's records end at 1 MB)"),
            ProviderField(
                "timeoutMs", .integer(minimum: 1, unit: "milliseconds"), defaultValue: "30000",
                summary: "each request's deadline, retries included"),
        ]
    }

    /// The typed configuration of checked field values.
    public func configuration(from values: ProviderFieldValues) throws(ProviderConfigurationError) -> Configuration {
        guard let container = values.text("container"), container.hasPrefix("iCloud."), container.count > 7,
            !container.contains("/")
        else {
            throw ProviderConfigurationError(
                field: "container", "needs the container identifier, starting with `iCloud.` (iCloud.com.example.app)")
        }
        guard let apiToken = values.text("apiToken"), !apiToken.isEmpty else {
            throw ProviderConfigurationError(
                field: "apiToken", "needs the container's API token from CloudKit Dashboard")
        }
        let endpointText = values.text("endpoint") ?? Self.defaultEndpoint
        guard let endpoint = URL(string: endpointText), let scheme = endpoint.scheme?.lowercased(),
            ["http", "https"].contains(scheme), endpoint.host?.isEmpty == false, endpoint.query == nil
        else {
            throw ProviderConfigurationError(
                field: "endpoint", "\"\(endpointText)\" is not an http:// or https:// URL with a host (and no query)")
        }
        let names: [(String, String)] = [
            ("zone", values.text("zone") ?? "CloudSyncZone"),
            ("recordType", values.text("recordType") ?? "CloudSyncItem"),
            ("field", values.text("field") ?? "value"),
        ]
        for (name, value) in names {
            guard Self.isCloudKitName(value) else {
                throw ProviderConfigurationError(
                    field: name,
                    "\"\(value)\" is not a CloudKit name (ASCII letters, digits and _, not starting with _)")
            }
        }
        let recordMaxBytes = values.integer("recordMaxBytes") ?? 921_600
        guard recordMaxBytes <= Self.maxRecordBytes else {
            throw ProviderConfigurationError(
                field: "recordMaxBytes", "is \(recordMaxBytes); CloudKit records end at \(Self.maxRecordBytes) bytes")
        }
        return Configuration(
            bridge: CloudKitConfiguration(
                endpoint: endpoint, container: container, environment: values.text("environment") ?? "production",
                zoneName: names[0].1, apiToken: apiToken),
            webAuthToken: values.text("webAuthToken").flatMap { $0.isEmpty ? nil : $0 }, recordType: names[1].1,
            field: names[2].1, recordMaxBytes: Int(recordMaxBytes), timeoutMs: values.integer("timeoutMs") ?? 30_000)
    }

    /// Whether `name` can name a zone, record type or field: ASCII letters, digits and `_`, not starting with `_`,
    /// at most 255 characters.
    static func isCloudKitName(_ name: String) -> Bool {
        !name.isEmpty && !name.hasPrefix("_") && name.utf8.count <= 255
            && name.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_")
            }
    }

    /// What a provider of this configuration can do.
    public func capabilities(of configuration: Configuration) -> ProviderCapabilities {
        CloudKitProvider.capabilities(recordMaxBytes: configuration.recordMaxBytes)
    }

    /// Where the records go and where the web auth token comes from (never a token), for `plan`.
    public func planDetails(of configuration: Configuration) -> [String: String] {
        let bridge = configuration.bridge
        return [
            "records": "\(bridge.url("records/modify").deletingLastPathComponent().deletingLastPathComponent()), "
                + "zone \(bridge.zoneName), one \(configuration.recordType) per key, the value in STRING field "
                + "\(configuration.field)",
            "credentials": "the web auth token `cloudsync login` kept (rotated on every answer), else "
                + (configuration.webAuthToken == nil ? "none: run `cloudsync login`" : "the pipeline's webAuthToken"),
        ]
    }

    /// CloudKit's web sign-in: the Apple ID in a browser, the token pasted back.
    public func signIn(for configuration: Configuration) -> (any ProviderSignIn)? {
        let bridge = configuration.bridge
        return CloudKitWebSignIn(
            endpoint: bridge.endpoint, container: bridge.container, environment: bridge.environment,
            apiToken: bridge.apiToken, transport: transport())
    }

    /// Makes the provider: its web auth token starts from the state (`cloudsync login`, or the last rotation), else
    /// the pipeline's; no request is sent until the first call.
    public func make(_ configuration: Configuration, context: ProviderContext) throws(CloudSyncError) -> any Provider {
        var context = context
        context.logger = context.logger.redacting(
            [configuration.bridge.apiToken] + (configuration.webAuthToken.map { [$0] } ?? []))
        // A dry run writes no state: the rotated tokens are kept in memory (the old one has been seen to keep
        // working, and the next real run rotates from the kept one).
        let tokenState =
            context.readOnly
            ? ProviderState(provider: context.providerID, store: InMemoryProviderStateStore()) : context.state
        let kept = try context.state.credential(.cloudKitWebAuthToken)
        let token = try CloudKitWebAuthToken(state: tokenState, fallback: kept ?? configuration.webAuthToken)
        let bridge = CloudKitBridge(
            configuration: configuration.bridge, webAuthToken: token, transport: transport(), context: context,
            timeout: .milliseconds(configuration.timeoutMs))
        return CloudKitProvider(
            id: context.providerID, bridge: bridge, recordType: configuration.recordType, field: configuration.field,
            recordMaxBytes: configuration.recordMaxBytes, readOnly: context.readOnly,
            loginCommand: context.loginCommand)
    }
}
