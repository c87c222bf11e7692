import CloudSync
import CloudSyncHTTP
import CloudSyncHTTPServer
import Foundation
import Synchronization

/// What a sign-in made of one request to its loopback listener, or of one pasted line.
enum AnswerDecision<Answer: Sendable>: Sendable {
    /// Not the answer (a request for `/favicon.ico`, a line that is not an address): keep waiting, telling the
    /// person why.
    case ignore(String)
    /// The sign-in is decided: the answer, or why it failed.
    case finish(Result<Answer, CloudSyncError>)
}

/// Waits for the one answer a sign-in needs from the person: the request their browser is redirected to on a
/// one-shot loopback listener, or the same address (or token) pasted on standard input, whichever comes first.
///
/// The listener runs on ``LoopbackHTTPServer`` (its own threads), the paste reader on a thread of its own, so
/// neither blocks the concurrency pool. The browser gets a short page saying whether to go back to the terminal,
/// never the code or token.
final class SignInAnswer<Answer: Sendable>: Sendable {
    private struct State {
        var result: Result<Answer, CloudSyncError>?
        var continuation: CheckedContinuation<Answer, any Error>?
    }

    private let state = Mutex(State())
    private let server: LoopbackHTTPServer?

    /// The listener's port, when there is one.
    var port: UInt16? { server?.port }

    /// Starts listening on `127.0.0.1:port` (0: any free port) for `GET path` when `listen`, and reading pasted lines
    /// with `interaction.readLine` when `paste`; `decide` judges each request's query items, `interpret` each line.
    ///
    /// Without a listener, the end of the input fails the sign-in; with one, it only stops the reading.
    init(
        listen: Bool, port: UInt16 = 0, path: String = "/", paste: Bool, interaction: SignInInteraction,
        decide: @escaping @Sendable ([URLQueryItem]) -> AnswerDecision<Answer>,
        interpret: @escaping @Sendable (String) -> AnswerDecision<Answer>
    ) throws(CloudSyncError) {
        if listen {
            let (server, route) = try Self.listener(port: port, path: path)
            self.server = server
            answerRedirects(on: server, route: route, decide: decide)
        } else {
            server = nil
        }
        if paste { readPastedLines(interaction, listening: listen, interpret: interpret) }
    }

    /// A listener on `127.0.0.1:port` and the route of `GET path` it is to answer.
    private static func listener(port: UInt16, path: String) throws(CloudSyncError)
        -> (LoopbackHTTPServer, HTTPRoutePattern)
    {
        let route: HTTPRoutePattern
        do {
            route = try HTTPRoutePattern(parsing: "GET " + path)
        } catch {
            throw CloudSyncError(.config, "cannot listen for the sign-in's redirect on \(path): \(error)")
        }
        do {
            return (try LoopbackHTTPServer(port: port), route)
        } catch {
            throw CloudSyncError(
                .config,
                "cannot listen for the sign-in's redirect on 127.0.0.1:\(port): \(error.description)"
                    + (port == 0 ? "" : "; is another sign-in waiting on that port?"))
        }
    }

    /// Answers each request for `route` on `server` by what `decide` makes of its query items: a page telling the
    /// person to go back to the terminal once the sign-in is decided, or why the request was not its answer.
    private func answerRedirects(
        on server: LoopbackHTTPServer, route: HTTPRoutePattern,
        decide: @escaping @Sendable ([URLQueryItem]) -> AnswerDecision<Answer>
    ) {
        server.route(route) { [weak self] request in
            switch decide(request.queryItems) {
            case .ignore(let why):
                return Self.page(400, title: "Not the sign-in's answer", text: why + " Still waiting.")
            case .finish(let result):
                self?.resolve(result)
                switch result {
                case .success:
                    return Self.page(
                        200, title: "Signed in",
                        text: "CloudSync has what it needs. You can close this window and go back to the terminal.")
                case .failure(let error):
                    return Self.page(400, title: "Sign-in failed", text: error.message + " Go back to the terminal.")
                }
            }
        }
    }

    /// Reads lines with `interaction.readLine` on a thread of its own until `interpret` decides the sign-in by one
    /// (or something else decided it), showing why each other line is not the answer.
    ///
    /// `listening` is whether a listener waits beside it, which decides what the end of the input means.
    private func readPastedLines(
        _ interaction: SignInInteraction, listening: Bool,
        interpret: @escaping @Sendable (String) -> AnswerDecision<Answer>
    ) {
        let readLine = interaction.readLine
        let show = interaction.show
        Thread.detachNewThread { [weak self] in
            while let line = readLine() {
                guard let self, !self.isDecided else { return }
                let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
                if trimmed.isEmpty { continue }
                switch interpret(trimmed) {
                case .ignore(let why): show(why)
                case .finish(let result):
                    self.resolve(result)
                    return
                }
            }
            if !listening {
                self?.resolve(.failure(CloudSyncError(.notSignedIn, "the input ended before an answer was pasted")))
            }
        }
    }

    deinit { server?.stop() }

    /// Stops the listener once the browser has its page (the paste reader stops at its next line).
    ///
    /// The wait ends as soon as the page is sent; its limit only matters on a machine so loaded that sending it takes
    /// seconds, where a shorter one would leave the browser with a reset connection instead of the page.
    func stop() { server?.stop(afterAnswering: .seconds(5)) }

    private var isDecided: Bool { state.withLock { $0.result != nil } }

    /// Decides the sign-in, unless something decided it first.
    func resolve(_ result: Result<Answer, CloudSyncError>) {
        let continuation = state.withLock { state -> CheckedContinuation<Answer, any Error>? in
            guard state.result == nil else { return nil }
            state.result = result
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(with: result.mapError { $0 as any Error })
    }

    /// The answer, once the browser or the person gave it; `ERR_TIMEOUT` after `interaction.timeout`, `ERR_CANCELLED`
    /// when the task is cancelled.
    func wait(_ interaction: SignInInteraction, for what: String) async throws(CloudSyncError) -> Answer {
        let seconds = interaction.timeout.components.seconds
        let timeout: @Sendable () -> CloudSyncError = {
            CloudSyncError(
                .timeout, "nobody answered the sign-in within \(seconds) s (\(what)); run the command again")
        }
        do {
            return try await withDeadline(interaction.timeout, clock: interaction.clock, timeoutError: timeout) {
                [self] in try await self.answer()
            }
        } catch let error as CloudSyncError {
            throw error
        } catch {
            throw CloudSyncError(.cancelled, "the sign-in was cancelled")
        }
    }

    private func answer() async throws -> Answer {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Answer, any Error>) in
                let ready = state.withLock { state -> Result<Answer, CloudSyncError>? in
                    if let result = state.result { return result }
                    state.continuation = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready.mapError { $0 as any Error }) }
            }
        } onCancel: {
            resolve(.failure(CloudSyncError(.cancelled, "the sign-in was cancelled")))
        }
    }

    private static func page(_ status: Int, title: String, text: String) -> HTTPResponse {
        let escaped = text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
        return .text(
            status,
            "<!doctype html><html><head><meta charset=\"utf-8\"><title>\(title)</title></head>"
                + "<body><h1>\(title)</h1><p>\(escaped)</p></body></html>\n",
            headers: ["Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store"])
    }
}

/// `url` with `items` appended to its query, each name and value percent-encoded except RFC 3986's unreserved
/// characters, so a token's `+`, `/` and `=` survive (`URLComponents` leaves `+` alone, which servers read as a space).
public func appendingQuery(_ url: URL, _ items: [(String, String)]) -> URL {
    guard !items.isEmpty else { return url }
    let text = url.absoluteString
    let separator = text.contains("?") ? "&" : "?"
    return URL(string: text + separator + formURLEncoded(items)) ?? url
}

/// Whether `url` is `http` on the loopback interface (`127.0.0.1`, `localhost`, `[::1]`), where a listener of this
/// machine can receive a redirect.
func isLoopbackHTTP(_ url: URL) -> Bool {
    guard url.scheme?.lowercased() == "http", let host = url.host?.lowercased() else { return false }
    return ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host)
}
