import CloudSync
import CloudSyncAuth
import CloudSyncHTTP
import Foundation
import Synchronization

/// Where a bridge works: a container's private database in one environment, one custom zone.
public struct CloudKitConfiguration: Sendable, Equatable {
    /// The web services' base URL (`https://api.apple-cloudkit.com`, or an emulator's).
    public var endpoint: URL
    /// The container (`iCloud.com.example.app`).
    public var container: String
    /// `development` or `production`.
    public var environment: String
    /// The custom zone the records live in (change tracking works only in custom zones).
    public var zoneName: String
    /// The API token made in CloudKit Dashboard; a secret.
    public var apiToken: String

    /// A configuration; see the properties.
    public init(endpoint: URL, container: String, environment: String, zoneName: String, apiToken: String) {
        self.endpoint = endpoint
        self.container = container
        self.environment = environment
        self.zoneName = zoneName
        self.apiToken = apiToken
    }

    /// `…/database/1/<container>/<environment>/<database>/<operation>`.
    func url(_ operation: String, database: String = "private") -> URL {
        endpoint.appendingPathComponent("database/1/\(container)/\(environment)/\(database)/\(operation)")
    }
}

/// What ``CloudKitBridge/saveRecords(_:)`` did, record by record.
public struct CloudKitSaveResult: Sendable, Equatable {
    /// The records now on the server as this client sent them (with their new change tags).
    public var saved: [CloudKitRecord] = []
    /// The server's records for the names that already existed: adopt them (first to the server wins).
    public var conflicts: [CloudKitRecord] = []
    /// The records that failed for another reason; retry them later.
    public var errors: [CloudKitError] = []
}

/// What ``CloudKitBridge/fetchChanges(since:)`` found.
public struct CloudKitChanges: Sendable, Equatable {
    /// Records created or changed since the token, each once, in their latest state.
    public var records: [CloudKitRecord] = []
    /// Names of records deleted since the token.
    public var deletedRecordNames: [String] = []
    /// The token to pass next time; keep it yourself (opaque text, base64 on the live service).
    public var syncToken: String?
}

/// One `changes/zone` page.
public struct CloudKitChangesPage: Sendable, Equatable {
    /// The changed records of the page.
    public var records: [CloudKitRecord] = []
    /// Names of records deleted, from the page's tombstones.
    public var deletedRecordNames: [String] = []
    /// The token after this page.
    public var syncToken: String?
    /// Whether another page follows.
    public var moreComing = false
}

/// A small, stateless CloudKit private-database bridge over CloudKit Web Services, usable without the store: account
/// status and identity, one custom zone, fail-if-exists saves, change-token fetches, deletes, and assets (files in
/// records' Asset fields, streamed from and to paths: see `CloudKitBridge+Assets.swift`).
///
/// Every request carries the API token and the current web auth token in its query, percent-encoded; every answer's
/// `X-Apple-CloudKit-Web-Auth-Token` replaces the kept token (in memory and in the `CloudKitWebAuthToken`'s state)
/// before the next request goes out, so requests are sent one at a time. Requests go through `HTTPClient`
/// (deadline, retries honouring CloudKit's `retryAfter`); `records/modify` with `create` operations is never sent twice.
///
/// The iCloud key-value store has no web API: the `kv…` members say so (``isKeyValueStoreAvailable`` is false and
/// each throws `CK_ERROR`) rather than pretend.
public final class CloudKitBridge: Sendable {
    /// The most operations one `records/modify` takes and records one `records/lookup` returns.
    public static let maxOperationsPerRequest = 200

    /// Where it works.
    public let configuration: CloudKitConfiguration
    /// The web auth token sent next, kept current.
    public let webAuthToken: CloudKitWebAuthToken
    /// Records per `changes/zone` page asked for; nil leaves it to the server (200).
    public let changesPageSize: Int?
    let http: HTTPClient
    /// Sends asset bytes to and from the upload and download URLs: no CloudKit tokens go there (the URLs carry
    /// their own authority, possibly on another host), and no answer rotates the web auth token.
    let content: HTTPClient

    /// A bridge to `configuration` sending over `transport`.
    ///
    /// - Parameters:
    ///   - webAuthToken: the user's token, kept current; it starts from what `cloudsync login` kept.
    ///   - context: the clock, metrics and logger requests use (the tokens are struck from its log lines).
    ///   - timeout: each request's deadline, retries included.
    public init(
        configuration: CloudKitConfiguration, webAuthToken: CloudKitWebAuthToken,
        transport: any HTTPTransport = URLSessionTransport(),
        context: ProviderContext = ProviderContext(
            providerID: "cloudKit"),
        timeout: Duration = .seconds(30), retryPolicy: RetryPolicy = CloudKitBridge.defaultRetryPolicy,
        changesPageSize: Int? = nil
    ) {
        self.configuration = configuration
        self.webAuthToken = webAuthToken
        self.changesPageSize = changesPageSize
        var context = context
        context.logger = context.logger.redacting([configuration.apiToken])
        let authorized = TokenRotatingTransport(
            next: transport, apiToken: configuration.apiToken, token: webAuthToken)
        // One request at a time: each answer's token must be kept before the next request is authorized.
        http = HTTPClient(
            transport: authorized, context: context, retryPolicy: retryPolicy, timeout: timeout, maxConcurrency: 1,
            serviceErrors: Self.serviceErrors)
        content = HTTPClient(
            transport: transport, context: context, retryPolicy: retryPolicy, timeout: timeout,
            serviceErrors: Self.serviceErrors)
    }

    /// How CloudKit names its errors in an answer: `serverErrorCode` and `reason` of its JSON body.
    public static let serviceErrors = ServiceErrorReader { response in
        let object = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any]
        return (object?["serverErrorCode"] as? String, object?["reason"] as? String)
    }

    /// Releases the HTTP session and its connections; later calls fail with `ERR_CLOSED`.
    public func close() {
        http.close()
        content.close()
    }

    /// Retries as `RetryPolicy` does, honouring the `retryAfter` seconds CloudKit puts in its error bodies.
    public static let defaultRetryPolicy = RetryPolicy(hint: RetryPolicy.jsonSecondsHint(field: "retryAfter"))

    // MARK: Account

    /// The account's status from the server's answer to `users/caller`: `available` when it names a user,
    /// `noAccount` when CloudKit wants a sign-in (or no token is kept), `temporarilyUnavailable` when throttled or
    /// unavailable, `couldNotDetermine` otherwise (offline, API token refused).
    public func accountStatus() async -> AccountStatus {
        do {
            _ = try await userRecordID()
            return .available
        } catch {
            switch error.code {
            case .notAuthenticated where error.serverErrorCode != "AUTHENTICATION_FAILED": return .noAccount
            case .retryLater: return .temporarilyUnavailable
            default: return .couldNotDetermine
            }
        }
    }

    /// The signed-in user's record name: opaque and stable per iCloud account and container.
    public func userRecordID() async throws(CloudKitError) -> String {
        try requireToken()
        let answer = try await call(
            .get, configuration.url("users/caller", database: "public"), body: nil, doing: "asking who is signed in",
            retrySafe: true)
        guard let users = answer["users"] as? [[String: Any]], let name = users.first?["userRecordName"] as? String
        else {
            throw CloudKitError(.error, "CloudKit answered users/caller without a userRecordName")
        }
        return name
    }

    // MARK: Zone

    /// Creates the custom zone, or confirms it exists (`EXISTS` counts as success); a per-zone failure the answer
    /// carries is thrown, not hidden.
    public func ensureZone() async throws(CloudKitError) {
        let body: [String: Any] = [
            "operations": [["operationType": "create", "zone": ["zoneID": ["zoneName": configuration.zoneName]]]]
        ]
        let answer = try await call(.post, configuration.url("zones/modify"), body: body, doing: "creating the zone")
        guard let zone = (answer["zones"] as? [[String: Any]])?.first else {
            throw CloudKitError(.error, "CloudKit answered zones/modify without a zone")
        }
        if zone["serverErrorCode"] is String {
            let error = CloudKitError.from(
                dictionary: zone, httpStatus: nil, doing: "creating the zone \(configuration.zoneName)",
                secrets: secrets)
            if error.serverErrorCode == "EXISTS" { return }
            throw error
        }
    }

    /// Whether the custom zone exists (`zones/list`).
    public func zoneExists() async throws(CloudKitError) -> Bool {
        let answer = try await call(
            .get, configuration.url("zones/list"), body: nil, doing: "listing the zones", retrySafe: true)
        let zones = answer["zones"] as? [[String: Any]] ?? []
        return zones.contains { ($0["zoneID"] as? [String: Any])?["zoneName"] as? String == configuration.zoneName }
    }

    /// Deletes the custom zone and every record in it.
    ///
    /// Destructive: for development tooling.
    public func deleteZone() async throws(CloudKitError) {
        let body: [String: Any] = [
            "operations": [["operationType": "delete", "zone": ["zoneID": ["zoneName": configuration.zoneName]]]]
        ]
        let answer = try await call(.post, configuration.url("zones/modify"), body: body, doing: "deleting the zone")
        if let zone = (answer["zones"] as? [[String: Any]])?.first, zone["serverErrorCode"] is String {
            throw CloudKitError.from(
                dictionary: zone, httpStatus: nil, doing: "deleting the zone \(configuration.zoneName)",
                secrets: secrets)
        }
    }

    // MARK: The iCloud key-value store

    /// Always false: the iCloud key-value store exists only on Apple platforms and has no web API.
    public static let isKeyValueStoreAvailable = false

    /// Throws `CK_ERROR`: the iCloud key-value store does not exist here.
    public func kvGetItem(_ key: String) throws(CloudKitError) -> String? { throw Self.keyValueUnavailable }
    /// Throws `CK_ERROR`: the iCloud key-value store does not exist here.
    public func kvSetItem(_ key: String, _ value: String) throws(CloudKitError) { throw Self.keyValueUnavailable }
    /// Throws `CK_ERROR`: the iCloud key-value store does not exist here.
    public func kvRemoveItem(_ key: String) throws(CloudKitError) { throw Self.keyValueUnavailable }
    /// Throws `CK_ERROR`: the iCloud key-value store does not exist here.
    public func kvGetAllItems() throws(CloudKitError) -> [String: String] { throw Self.keyValueUnavailable }

    static let keyValueUnavailable = CloudKitError(
        .error,
        "the iCloud key-value store exists only on Apple platforms (NSUbiquitousKeyValueStore) and has no web API; it "
            + "is unavailable here, so nothing was read or written")

    // MARK: Sending

    var secrets: [String] { [configuration.apiToken] + (webAuthToken.value.map { [$0] } ?? []) }

    func requireToken() throws(CloudKitError) {
        guard webAuthToken.value != nil else {
            throw CloudKitError(
                .notAuthenticated,
                "no CloudKit web auth token is kept for \(configuration.container); sign in with `cloudsync login` "
                    + "(or give `webAuthToken`)")
        }
    }

    static func bool(_ value: Any?) -> Bool {
        if let bool = value as? Bool { return bool }
        return (value as? NSNumber)?.boolValue ?? false
    }

    /// Sends one call and returns its JSON object; a non-2xx answer is thrown as the error its dictionary describes.
    ///
    /// `aboutSyncToken`: the request carries a sync token, so a refusal that names a token is about it.
    func call(
        _ method: HTTPMethod, _ url: URL, body: [String: Any]?, doing what: String, retrySafe: Bool = false,
        aboutSyncToken: Bool = false
    ) async throws(CloudKitError) -> [String: Any] {
        try requireToken()
        var request = HTTPRequest(method: method, url: url, isRetrySafe: retrySafe)
        if let body {
            request.body = (try? JSONSerialization.data(withJSONObject: body)) ?? Data()
            request.headers["Content-Type"] = "application/json"
        }
        let response: HTTPResponse
        do {
            response = try await http.send(request)
        } catch {
            throw gaveUp(error, doing: what)
        }
        let object = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any]
        guard response.isSuccess else {
            if let object, object["serverErrorCode"] is String {
                throw CloudKitError.from(
                    dictionary: object, httpStatus: response.status, doing: what, secrets: secrets,
                    aboutSyncToken: aboutSyncToken)
            }
            let mapped = HTTPErrorMapping.error(for: response, to: request)
            throw CloudKitError(
                response.status == 421 ? .notAuthenticated : .error,
                strike(secrets, from: "\(what): \(mapped.message)"),
                httpStatus: response.status)
        }
        guard let object else {
            throw CloudKitError(.error, "CloudKit's answer \(what) is not a JSON object (HTTP \(response.status))")
        }
        return object
    }
}

extension CloudKitBridge {
    /// The bridge error for a request the HTTP layer failed: the retry layer gave up on an answer (or never got one),
    /// and its context says which CloudKit code it saw, whose word beats the HTTP status's (a 500 `INTERNAL_ERROR` is
    /// CloudKit's nonrecoverable error, `CK_ERROR`, not a server to try again later).
    func gaveUp(_ failure: CloudSyncError, doing what: String) -> CloudKitError {
        var mapped = CloudKitError.from(failure, doing: what)
        if let context = failure.context, let serverCode = context.serviceCode {
            mapped.serverErrorCode = serverCode
            mapped.httpStatus = context.httpStatus
            mapped.reason = context.serviceReason
            // A code this bridge does not know keeps the HTTP status's reading (a 503 may be tried again).
            let code = CloudKitError.code(forServerErrorCode: serverCode)
            if code != .error || serverCode == "INTERNAL_ERROR" { mapped.code = code }
        }
        mapped.message = strike(secrets, from: mapped.message)
        return mapped
    }
}

/// Adds `ckAPIToken` and the current `ckWebAuthToken` to each request's query, and keeps the token each answer
/// carries before returning it: below the concurrency limit, so a request is authorized when it is sent, not when
/// it started waiting.
struct TokenRotatingTransport: HTTPTransport {
    let next: any HTTPTransport
    let apiToken: String
    let token: CloudKitWebAuthToken

    func close() { next.close() }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var authorized = request
        authorized.url = token.authorizing(request.url, apiToken: apiToken)
        let response = try await next.send(authorized)
        try token.rotate(from: response)
        return response
    }
}
