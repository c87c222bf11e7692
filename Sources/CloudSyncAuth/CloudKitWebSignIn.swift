import CloudSync
import CloudSyncHTTP
import Foundation

/// CloudKit Web Services' sign-in: a request with only the API token gets `AUTHENTICATION_REQUIRED` (HTTP 421) and
/// the Apple sign-in address to open; after the person signs in, the `ckWebAuthToken` goes to the API token's
/// sign-in callback, or is shown for pasting.
///
/// The callback is set per API token in CloudKit Dashboard. When it is an `http` address on this machine
/// (`http://127.0.0.1:PORT/PATH`), the sign-in listens there for the token; otherwise, or with
/// `SignInInteraction.noBrowser`, it reads the token (or the whole callback address) from the input. The token is
/// then tried on `users/caller`, and the rotated token that answer carries is the one kept.
public struct CloudKitWebSignIn: ProviderSignIn {
    /// The web services' base (`https://api.apple-cloudkit.com`).
    public let endpoint: URL
    /// The container (`iCloud.com.example.app`).
    public let container: String
    /// `development` or `production`.
    public let environment: String
    /// The API token made in CloudKit Dashboard.
    public let apiToken: String
    /// The API token's sign-in callback when it points at this machine; nil when it does not (the token is pasted).
    public let callback: URL?
    private let stack: any HTTPTransport

    /// A sign-in to `container` in `environment`, sending over `transport`.
    public init(
        endpoint: URL, container: String, environment: String, apiToken: String, callback: URL? = nil,
        transport: any HTTPTransport = URLSessionTransport(), timeout: Duration = .seconds(30)
    ) {
        self.endpoint = endpoint
        self.container = container
        self.environment = environment
        self.apiToken = apiToken
        self.callback = callback.flatMap { isLoopbackHTTP($0) && $0.port != nil ? $0 : nil }
        stack = DeadlineLayer(next: transport, clock: SystemClock(), timeout: timeout)
    }

    public var method: String { "CloudKit web sign-in (Apple ID in a browser, web auth token by callback or pasted)" }

    public var credentials: [StoredCredential] { [.cloudKitWebAuthToken] }

    /// `GET …/public/users/caller` with the API token and, when given, the web auth token: the call CloudKit JS
    /// makes to learn who is signed in.
    public func callerURL(webAuthToken: String? = nil) -> URL {
        var items = [("ckAPIToken", apiToken)]
        if let webAuthToken { items.append(("ckWebAuthToken", webAuthToken)) }
        let path = "database/1/\(container)/\(environment)/public/users/caller"
        return appendingQuery(endpoint.appendingPathComponent(path), items)
    }

    public func signIn(_ interaction: SignInInteraction) async throws(CloudSyncError) -> [StoredCredential: String] {
        let redirect = try await signInAddress()
        let listen = callback != nil
        let answer = try SignInAnswer<String>(
            listen: listen, port: UInt16(callback?.port ?? 0),
            path: callback.map { $0.path.isEmpty ? "/" : $0.path } ?? "/",
            paste: interaction.noBrowser || !listen, interaction: interaction,
            decide: { items in
                guard let token = items.first(where: { $0.name == "ckWebAuthToken" })?.value, !token.isEmpty else {
                    return .ignore("This address carries no ckWebAuthToken.")
                }
                return .finish(.success(token))
            },
            interpret: Self.interpretPaste)
        defer { answer.stop() }
        interaction.show("Open this address in a browser and sign in with the Apple ID:\n\n  \(redirect)\n")
        if let callback, !interaction.noBrowser {
            interaction.show("Waiting for the browser to come back to \(callback.absoluteString) …")
        } else {
            interaction.show(
                "Then paste here the ckWebAuthToken, or the whole address the browser was sent to (it carries "
                    + "ckWebAuthToken=…).")
        }
        let token = try await answer.wait(interaction, for: "waiting for the ckWebAuthToken")
        return [.cloudKitWebAuthToken: try await confirm(token)]
    }

    /// The sign-in address from the `AUTHENTICATION_REQUIRED` answer to a call with only the API token.
    func signInAddress() async throws(CloudSyncError) -> String {
        let request = HTTPRequest(method: .get, url: callerURL())
        let response = try await send(request)
        let body = try? JSONDecoder().decode(CloudKitErrorBody.self, from: response.body)
        if response.status == 421, let redirect = body?.redirectURL, !redirect.isEmpty { return redirect }
        if response.isSuccess {
            throw CloudSyncError(
                .provider, "\(container) answered users/caller without a sign-in, so it offers no sign-in address")
        }
        throw refusal(response, body, request, doing: "asking for the sign-in address")
    }

    /// Tries `token` on `users/caller`; returns the rotated token the answer carries (or `token` when none).
    func confirm(_ token: String) async throws(CloudSyncError) -> String {
        let request = HTTPRequest(method: .get, url: callerURL(webAuthToken: token))
        let response = try await send(request)
        guard response.isSuccess else {
            let body = try? JSONDecoder().decode(CloudKitErrorBody.self, from: response.body)
            throw refusal(response, body, request, doing: "trying the web auth token")
        }
        let rotated = response.headers[CloudKitWebAuthToken.header]
        return rotated.flatMap { $0.isEmpty ? nil : $0 } ?? token
    }

    private func send(_ request: HTTPRequest) async throws(CloudSyncError) -> HTTPResponse {
        do {
            return try await stack.send(request)
        } catch {
            throw HTTPErrorMapping.error(for: error, sending: request)
        }
    }

    private func refusal(
        _ response: HTTPResponse, _ body: CloudKitErrorBody?, _ request: HTTPRequest, doing what: String
    ) -> CloudSyncError {
        guard let body, let code = body.serverErrorCode else {
            return HTTPErrorMapping.error(for: response, to: request)
        }
        let reason = HTTPRedaction.strike(
            [apiToken] + HTTPRedaction.secrets(of: request), from: body.reason.map { ": \($0)" } ?? "")
        let said = "CloudKit answered \(code) (HTTP \(response.status)) \(what)\(reason)"
        switch code {
        case "AUTHENTICATION_REQUIRED":
            return CloudSyncError(.notSignedIn, said + "; the web auth token was not accepted, sign in again")
        case "AUTHENTICATION_FAILED", "ACCESS_DENIED":
            return CloudSyncError(
                .containerMisconfigured, said + "; check the container, the environment and the API token")
        case "BAD_REQUEST", "NOT_FOUND":
            return CloudSyncError(.containerMisconfigured, said + "; check the container and the environment")
        default:
            return HTTPErrorMapping.error(for: response, to: request)
        }
    }

    /// A pasted token, or the callback address carrying it; a token arrives percent-encoded when copied from an
    /// address bar (`%2B`, `%2F`, `%3D`).
    static func interpretPaste(_ line: String) -> AnswerDecision<String> {
        if line.contains("ckWebAuthToken=") {
            let query = line.split(separator: "?", maxSplits: 1).last.map(String.init) ?? line
            for pair in query.split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
                if parts.count == 2, parts[0] == "ckWebAuthToken", !parts[1].isEmpty {
                    return .finish(.success(parts[1].removingPercentEncoding ?? parts[1]))
                }
            }
            return .ignore("That address has an empty ckWebAuthToken; paste the token or the whole address again.")
        }
        if line.contains(" ") || line.hasPrefix("http") {
            return .ignore("That is neither a ckWebAuthToken nor an address carrying one; paste it again.")
        }
        return .finish(.success(line.contains("%") ? (line.removingPercentEncoding ?? line) : line))
    }
}

/// CloudKit's error dictionary (`serverErrorCode`, `reason`, `redirectURL`, ...).
struct CloudKitErrorBody: Decodable {
    let serverErrorCode: String?
    let reason: String?
    let redirectURL: String?
}
