import CloudSync
import CloudSyncHTTP
import Foundation

/// The `s3` provider type: any S3-compatible bucket (AWS, MinIO, Ceph, R2), one object per key.
public struct S3ProviderFactory: ProviderFactory {
    /// A bucket, where its objects live in it, and how to reach it.
    public struct Configuration: Sendable {
        /// Where the bucket is and how it is addressed.
        public var location: S3Location
        /// Prepended to every key.
        public var prefix: String
        /// Where the access key comes from.
        public var credentials: S3CredentialResolver
        /// Each request's deadline.
        public var timeoutMs: Int64
        /// Requests in flight at once.
        public var maxConcurrency: Int
    }

    /// How requests are sent; URLSession unless a test or program gives another.
    public let transport: @Sendable (_ maxConcurrency: Int) -> any HTTPTransport
    /// The environment credentials and profiles are read from when the field values bring none (a pipeline's
    /// values bring the environment it was loaded with).
    public let environment: [String: String]

    /// The factory; register it in a `ProviderRegistry`.
    public init(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        transport: @escaping @Sendable (_ maxConcurrency: Int) -> any HTTPTransport = {
            URLSessionTransport(maxConcurrency: $0)
        }
    ) {
        self.environment = environment
        self.transport = transport
    }

    /// The `type` pipeline files name.
    public var type: String { "s3" }
    /// What the provider stores, and where, in one sentence.
    public var summary: String {
        "one object per key in an S3-compatible bucket (AWS, MinIO, Ceph, R2), signed with SigV4"
    }

    /// The fields of this type besides the common ones.
    public var fields: [ProviderField] {
        [
            ProviderField("bucket", .text, required: true, summary: "the bucket; it must exist"),
            ProviderField(
                "prefix", .text,
                summary: "prepended to every key to make its object key (`cloudsync/settings/`; none by default); "
                    + "prefix + key may be at most 1024 bytes of UTF-8"),
            ProviderField(
                "region", .text, defaultValue: "us-east-1",
                summary: "the region requests are signed for (Cloudflare R2 uses `auto`)"),
            ProviderField(
                "endpoint", .text,
                summary: "the server's base URL for S3-compatible servers (`http://127.0.0.1:9000`); without it, AWS's "
                    + "`https://s3.<region>.amazonaws.com`"),
            ProviderField(
                "pathStyle", .boolean,
                summary: "address objects as `endpoint/bucket/key` (the default when `endpoint` is set); false uses "
                    + "virtual-hosted `bucket.endpoint/key`, the AWS default"),
            ProviderField(
                "accessKeyId", .text,
                summary: "the access key id; without it (and `secretAccessKey`) the key comes from AWS_ACCESS_KEY_ID "
                    + "and AWS_SECRET_ACCESS_KEY, then from the profile's section of ~/.aws/credentials and "
                    + "~/.aws/config, as the AWS CLI finds it"),
            ProviderField("secretAccessKey", .text, secret: true, summary: "the secret access key"),
            ProviderField("sessionToken", .text, secret: true, summary: "the session token of temporary credentials"),
            ProviderField(
                "profile", .text,
                summary: "a profile of ~/.aws/credentials and ~/.aws/config (else AWS_PROFILE, else `default`); "
                    + "naming one skips AWS_ACCESS_KEY_ID, as the CLI's --profile does"),
            ProviderField(
                "timeoutMs", .integer(minimum: 1, unit: "milliseconds"), defaultValue: "30000",
                summary: "each request's deadline, retries included"),
            ProviderField(
                "maxConcurrency", .integer(minimum: 1, unit: ""), defaultValue: "16",
                summary: "requests in flight at once"),
        ]
    }

    /// The typed configuration of checked field values.
    public func configuration(from values: ProviderFieldValues) throws(ProviderConfigurationError) -> Configuration {
        guard let bucket = values.text("bucket"), !bucket.isEmpty else {
            throw ProviderConfigurationError(field: "bucket", "needs the bucket's name")
        }
        let region = values.text("region") ?? "us-east-1"
        guard !region.isEmpty, region.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }) else {
            throw ProviderConfigurationError(
                field: "region", "\"\(region)\" is not a region name (letters, digits and -, such as eu-west-1)")
        }
        var endpoint = S3Location.awsEndpoint(region: region)
        if let text = values.text("endpoint") {
            guard let url = URL(string: text), let scheme = url.scheme?.lowercased(),
                ["http", "https"].contains(scheme),
                url.host?.isEmpty == false, url.query == nil, url.user == nil
            else {
                throw ProviderConfigurationError(
                    field: "endpoint", "\"\(text)\" is not an http:// or https:// URL with a host (and no query)")
            }
            endpoint = url
        } else if region == "auto" {
            throw ProviderConfigurationError(
                field: "region", "region `auto` (Cloudflare R2) needs the account's `endpoint`")
        }
        let pathStyle = values.boolean("pathStyle") ?? (values.text("endpoint") != nil)
        guard !bucket.contains("/"), bucket.utf8.count <= 255 else {
            throw ProviderConfigurationError(field: "bucket", "\"\(bucket)\" is not a bucket name (no /, at most 255)")
        }
        if !pathStyle {
            let dnsSafe = bucket.allSatisfy { $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "-" || $0 == ".") }
            guard dnsSafe, (3...63).contains(bucket.count) else {
                throw ProviderConfigurationError(
                    field: "bucket",
                    "\"\(bucket)\" cannot be a host name for virtual-hosted addressing (3-63 lower-case letters, "
                        + "digits, - and .); set `pathStyle: true`")
            }
        }
        let prefix = values.text("prefix") ?? ""
        guard prefix.utf8.count < S3Provider.maxObjectKeyBytes else {
            throw ProviderConfigurationError(field: "prefix", "is \(prefix.utf8.count) bytes; S3 keys end at 1024")
        }
        let credentials = S3CredentialResolver(
            accessKeyID: values.text("accessKeyId"), secretAccessKey: values.text("secretAccessKey"),
            sessionToken: values.text("sessionToken"), profile: values.text("profile"),
            environment: values.environment ?? environment)
        return Configuration(
            location: S3Location(endpoint: endpoint, bucket: bucket, region: region, pathStyle: pathStyle),
            prefix: prefix, credentials: credentials, timeoutMs: values.integer("timeoutMs") ?? 30_000,
            maxConcurrency: Int(values.integer("maxConcurrency") ?? 16))
    }

    /// What a provider of this configuration can do.
    public func capabilities(of configuration: Configuration) -> ProviderCapabilities {
        S3Provider.capabilities(prefix: configuration.prefix, requestsAtOnce: configuration.maxConcurrency)
    }

    /// Where objects go and where the credentials come from (never the secret), for `plan`.
    public func planDetails(of configuration: Configuration) -> [String: String] {
        let credentials: String
        switch configuration.credentials.resolve() {
        case .found(let found, let source): credentials = "access key \(found.accessKeyID) from \(source)"
        case .missing(let why): credentials = "none found: \(why)"
        }
        let location = configuration.location
        let addressing = location.pathStyle ? "path style" : "virtual-hosted"
        return [
            "credentials": credentials,
            "objects": "\(location.url(objectKey: configuration.prefix).absoluteString) (\(addressing), signed for "
                + "\(location.region))",
        ]
    }

    /// Makes the provider: resolves the credentials (an error names every place it looked) and opens no connection
    /// until the first call.
    public func make(_ configuration: Configuration, context: ProviderContext) throws(CloudSyncError) -> any Provider {
        switch configuration.credentials.resolve() {
        case .missing(let why):
            throw CloudSyncError(.notSignedIn, why, provider: context.providerID)
        case .found(let credentials, _):
            return S3Provider(
                location: configuration.location, prefix: configuration.prefix, credentials: credentials,
                transport: transport(configuration.maxConcurrency), context: context,
                timeout: .milliseconds(configuration.timeoutMs), maxConcurrency: configuration.maxConcurrency,
                readOnly: context.readOnly)
        }
    }
}
