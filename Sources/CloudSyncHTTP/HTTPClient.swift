import CloudSync
import Foundation

/// One provider's HTTP stack: the layers composed in order, deadline -> retry -> auth -> concurrency limit ->
/// transport, so nothing above it needs URLSession.
///
/// Every failure comes out as a `CloudSyncError` with the store's codes (see ``HTTPErrorMapping``); an answer with
/// any status that no layer acted on is returned for the provider to read (a 404 may mean "no such key").
///
/// ## Proxies and certificate authorities on Linux
///
/// ``URLSessionTransport`` runs on FoundationNetworking, which hands each request to libcurl. What reaches libcurl:
/// - Proxies: FoundationNetworking applies no proxy settings of its own (`URLSessionConfiguration`'s
///   `connectionProxyDictionary` is stored but not used; its `EasyHandle.swift` leaves the proxy options as a TODO),
///   so libcurl's environment variables decide (libcurl-env(3)): `https_proxy` or `HTTPS_PROXY` for `https://`
///   URLs, `http_proxy` (lower case only) for `http://` URLs, `ALL_PROXY` for both when the scheme's variable is unset,
///   and `NO_PROXY`, a comma-separated list of host names (a leading dot matches a whole domain, `*` matches every
///   host) that go direct.
/// - Certificate authorities: FoundationNetworking sets libcurl's CA bundle itself on every request, to libcurl's
///   built-in default or else the first of `/etc/ssl/certs/ca-certificates.crt`, `/etc/pki/tls/certs/ca-bundle.crt`,
///   and a few other system paths. So `SSL_CERT_FILE` (read by OpenSSL's default paths and the curl tool) and
///   `CURL_CA_BUNDLE` (read only by the curl command-line tool) do not change what URLSession trusts; the
///   `URLSessionCertificateAuthorityInfoFile` variable is read only on Android. Trust a private CA by adding it to
///   the system store (`update-ca-certificates` on Debian). This is from the swift-corelibs-foundation source, not
///   tried against a TLS server on this machine.
public struct HTTPClient: Sendable {
    /// The composed layers; send through ``send(_:)`` to get `CloudSyncError`s.
    public let stack: any HTTPTransport
    /// The provider these requests belong to, named in every error.
    public let providerID: String

    /// The full stack over `transport` for the provider of `context`: its clock, metrics and logger.
    ///
    /// - Parameters:
    ///   - timeout: the deadline of a request that carries none (the store's `timeoutMs`); nil for none.
    ///   - maxConcurrency: requests in flight at once for this provider.
    public init(
        transport: any HTTPTransport, context: ProviderContext,
        authenticator: any HTTPAuthenticator = NoAuthentication(),
        retryPolicy: RetryPolicy = RetryPolicy(), timeout: Duration? = .seconds(30), maxConcurrency: Int = 8
    ) {
        let limited = ConcurrencyLimitLayer(
            next: transport, limit: maxConcurrency, metrics: context.metrics, logger: context.logger,
            clock: context.clock)
        let authorized = AuthLayer(next: limited, authenticator: authenticator)
        let retried = RetryLayer(next: authorized, policy: retryPolicy, clock: context.clock, metrics: context.metrics)
        stack = DeadlineLayer(next: retried, clock: context.clock, timeout: timeout)
        providerID = context.providerID
    }

    /// Sends `request` through every layer; any failure is a `CloudSyncError` naming the provider.
    public func send(_ request: HTTPRequest) async throws(CloudSyncError) -> HTTPResponse {
        do {
            return try await stack.send(request)
        } catch {
            throw HTTPErrorMapping.error(for: error, sending: request).attributed(provider: providerID)
        }
    }

    /// Sends `request` and throws the mapped error for any answer that is not 2xx.
    public func sendExpectingSuccess(_ request: HTTPRequest) async throws(CloudSyncError) -> HTTPResponse {
        let response = try await send(request)
        guard response.isSuccess else {
            throw HTTPErrorMapping.error(for: response, to: request).attributed(provider: providerID)
        }
        return response
    }
}
