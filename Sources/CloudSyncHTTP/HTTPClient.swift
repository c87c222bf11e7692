import CloudSync
import Foundation

/// One provider's HTTP stack: the layers composed in order, concurrency limit -> deadline -> retry -> auth ->
/// metering -> transport, so nothing above it needs URLSession.
///
/// Every failure comes out as a `CloudSyncError` with the store's codes (see ``HTTPErrorMapping``); an answer with
/// any status that no layer acted on is returned for the provider to read (a 404 may mean "no such key").
///
/// ## Proxies and certificate authorities on Linux
///
/// ``URLSessionTransport`` runs on FoundationNetworking, which hands each request to libcurl. What reaches libcurl
/// (each point checked by `ProxyAndCertificateTests`, which run a client process with the variables set):
/// - Proxies: FoundationNetworking applies no proxy settings of its own (`URLSessionConfiguration`'s
///   `connectionProxyDictionary` is stored but not used; its `EasyHandle.swift` leaves the proxy options as a TODO),
///   so libcurl's environment variables decide: `https_proxy` or `HTTPS_PROXY` for `https://` URLs (a `CONNECT`
///   tunnel), `http_proxy` for `http://` URLs (lower case only: `HTTP_PROXY` is ignored), `ALL_PROXY` or
///   `all_proxy` for both when the scheme's variable is unset, and `NO_PROXY` or `no_proxy`, a comma-separated
///   list of hosts that go direct (`*` for all).
/// - Certificate authorities: FoundationNetworking keeps libcurl's built-in CA bundle (on Debian
///   `/etc/ssl/certs/ca-certificates.crt`) or, when libcurl has none, sets the first of a few system paths itself.
///   `SSL_CERT_FILE` and `CURL_CA_BUNDLE` change nothing; trust a private CA by adding it to the system store
///   (`update-ca-certificates` on Debian), which was tried here against a TLS server with a self-signed certificate.
///   A certificate failure arrives as URLError -1 with libcurl's reason, which the error message carries.
public struct HTTPClient: Sendable {
    /// The composed layers; send through ``send(_:)`` to get `CloudSyncError`s.
    public let stack: any HTTPTransport
    /// The provider these requests belong to, named in every error.
    public let providerID: String
    /// How the service names its errors, kept in each error's context.
    public let serviceErrors: ServiceErrorReader

    /// The full stack over `transport` for the provider of `context`: its clock, metrics and logger.
    ///
    /// - Parameters:
    ///   - timeout: the deadline of a request that carries none, counted from when it gets its turn; nil for none.
    ///   - maxConcurrency: requests in flight at once for this provider.
    ///   - serviceErrors: how the service names its errors (its code, reason and request id header).
    public init(
        transport: any HTTPTransport, context: ProviderContext,
        authenticator: any HTTPAuthenticator = NoAuthentication(),
        retryPolicy: RetryPolicy = RetryPolicy(), timeout: Duration? = .seconds(30), maxConcurrency: Int = 8,
        serviceErrors: ServiceErrorReader = .none
    ) {
        let metered = RequestMeteringLayer(
            next: transport, metrics: context.metrics, logger: context.logger, clock: context.clock)
        let authorized = AuthLayer(next: metered, authenticator: authenticator, serviceErrors: serviceErrors)
        let retried = RetryLayer(
            next: authorized, policy: retryPolicy, clock: context.clock, metrics: context.metrics,
            serviceErrors: serviceErrors)
        let bounded = DeadlineLayer(next: retried, clock: context.clock, timeout: timeout)
        stack = ConcurrencyLimitLayer(
            next: bounded, limit: maxConcurrency, metrics: context.metrics, clock: context.clock)
        providerID = context.providerID
        self.serviceErrors = serviceErrors
    }

    /// Releases the transport's session and connections; later requests fail with `ERR_CLOSED`.
    public func close() { stack.close() }

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
            throw HTTPErrorMapping.error(for: response, to: request, serviceErrors: serviceErrors)
                .attributed(provider: providerID)
        }
        return response
    }
}
