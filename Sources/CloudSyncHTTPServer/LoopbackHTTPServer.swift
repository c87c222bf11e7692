import CloudSync
import CloudSyncHTTP
import Foundation
import Glibc
import Synchronization

/// Why ``LoopbackHTTPServer`` could not start.
public struct LoopbackHTTPServerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The system call that failed.
    public let call: String
    /// Its `errno`.
    public let code: Int32

    /// `loopback server: bind failed: Address already in use`.
    public var description: String { "loopback server: \(call) failed: \(String(cString: strerror(code)))" }
}

/// An HTTP/1.1 server on `127.0.0.1` (or another IPv4 address) and a port the system picks (or a given one), for
/// tests, emulators and `cloudsync serve`.
///
/// Routes map a method and path pattern to a handler; a ``HTTPFaultPlan`` makes chosen requests fail, wait, hang or
/// break; every request is logged for tests to assert on. The accept loop and every connection run on threads of
/// their own, never on the Swift concurrency pool. Keep-alive, `Content-Length` and chunked request bodies and
/// `Expect: 100-continue` are supported; responses always carry `Content-Length`. Heads and bodies are bounded by
/// ``Options/limits`` before they are read (431, 413, and 400 for ambiguous framing, each closing the connection). With ``Options/tls`` it serves
/// HTTPS instead (TLS 1.2 or later, HTTP/1.1 over it), and a client that refuses the certificate only loses its
/// own connection.
///
/// Call ``stop()`` when done; releasing the server stops it too.
public final class LoopbackHTTPServer: Sendable {
    /// How a server that outlives a test listens: where, whether it keeps a request log, how long it lets a
    /// connection idle.
    public struct Options: Sendable {
        /// The IPv4 address to bind, dotted (`127.0.0.1`, `0.0.0.0` for every interface).
        public var address = "127.0.0.1"
        /// Whether every request is kept in ``requestLog`` (tests assert on it); a long-running server turns it off,
        /// or the log grows without end.
        public var keepsRequestLog = true
        /// A connection that sends nothing for this long is closed, so idle or stalled clients cannot hold its
        /// thread for ever; nil waits as long as the client likes (tests that hang requests on purpose).
        public var idleTimeout: Duration? = nil
        /// Serve HTTPS with this certificate and key instead of plain HTTP; ``baseURL`` then starts `https://`.
        public var tls: TLSIdentity? = nil
        /// The most a request's head and body may hold; past them it is answered 431 or 413 and its connection closed.
        public var limits = HTTPRequestLimits.loopback

        public init() {}
    }

    /// The port the server listens on.
    public let port: UInt16
    /// The address it is bound to.
    public let address: String
    /// `https` when it serves TLS (``Options/tls``), else `http`.
    public let scheme: String
    let core: ServerCore

    /// Starts listening at once on `port` (0: one the system picks), with `routes` registered (more can be added with
    /// ``route(_:_:)``).
    public init(
        port: UInt16 = 0, options: Options = Options(), routes: [(HTTPRoutePattern, HTTPHandler)] = []
    ) throws(LoopbackHTTPServerError) {
        core = try ServerCore(port: port, options: options)
        self.port = core.port
        address = options.address
        scheme = options.tls == nil ? "http" : "https"
        for (pattern, handler) in routes { core.addRoute(pattern, handler) }
        core.start()
    }

    deinit { core.stop() }

    /// `http://ADDRESS:PORT` (`https://` with TLS; 127.0.0.1 for a server bound to every interface), with no trailing
    /// slash.
    public var baseURL: URL { URL(string: "\(scheme)://\(reachableAddress):\(port)")! }

    /// The URL of `path` (which starts with `/` and may carry a query) on this server.
    public func url(_ path: String) -> URL { URL(string: "\(scheme)://\(reachableAddress):\(port)\(path)")! }

    var reachableAddress: String { address == "0.0.0.0" ? "127.0.0.1" : address }

    /// Registers `handler` for `pattern`; the first registered pattern that matches wins.
    ///
    /// `HEAD` requests use the `GET` route when no `HEAD` route matches, and get its headers without the body.
    public func route(_ pattern: HTTPRoutePattern, _ handler: @escaping HTTPHandler) {
        core.addRoute(pattern, handler)
    }

    /// The fault plan in force; setting one (even the same again) restarts every rule's call count and random source.
    public var faultPlan: HTTPFaultPlan {
        get { core.faultPlan }
        set { core.setFaultPlan(newValue) }
    }

    /// Sets `plan`, restarting its rules' counts; applies from the next request to arrive.
    public func setFaultPlan(_ plan: HTTPFaultPlan) { core.setFaultPlan(plan) }

    /// Removes every fault rule; requests already hanging stay hung until their client or ``stop()`` ends them.
    public func clearFaultPlan() { core.setFaultPlan(HTTPFaultPlan()) }

    /// Every request since the log was last cleared, in arrival order.
    public var requestLog: [HTTPLogEntry] { core.log }

    /// Empties the request log (and so the counters).
    public func clearLog() { core.clearLog() }

    /// Requests, faults and statuses for `route` (nil: requests that matched no route) in the current log.
    public func counters(for route: HTTPRoutePattern?) -> HTTPRouteCounters {
        var counters = HTTPRouteCounters()
        for entry in core.log where entry.route == route {
            counters.requests += 1
            if entry.answeredByFault { counters.faults += 1 }
            if let status = entry.status { counters.statuses[status, default: 0] += 1 }
        }
        return counters
    }

    /// Connections open right now.
    public var openConnectionCount: Int { core.openConnectionCount }

    /// Stops accepting, closes every connection (hung ones included) and returns once every server thread has ended.
    ///
    /// The port is free again when it returns. Calling it again only waits. Called from a handler (on a server
    /// thread), it shuts everything down, its own connection included, but cannot wait for its own thread, so it
    /// returns at once.
    public func stop() { core.stop() }

    /// Lets the requests being answered get their answers (waiting at most `limit`), then stops as ``stop()`` does.
    ///
    /// A one-shot listener uses it to tell the browser how the sign-in went before it goes away.
    public func stop(afterAnswering limit: Duration) {
        let deadline = ContinuousClock.now + limit
        while core.answeringCount > 0, ContinuousClock.now < deadline { usleep(1000) }
        core.stop()
    }
}

/// The server's state and threads; separate from ``LoopbackHTTPServer`` so that threads holding it do not keep the
/// public object alive, and releasing that object can stop them.
final class ServerCore: Sendable {
    struct Route {
        let pattern: HTTPRoutePattern
        let handler: HTTPHandler
    }

    struct RuleState {
        var calls = 0
        var random: SeededRandom?
    }

    struct State {
        var routes: [Route] = []
        var plan = HTTPFaultPlan()
        var ruleStates: [RuleState] = []
        var log: [HTTPLogEntry] = []
        var nextSequence = 0
        var connections: [Int: Int32] = [:]
        var nextConnectionID = 1
        var stopping = false
        var listenerClosed = false
        var stopped = false
        /// Requests being answered: arrived and logged, their answer not yet sent.
        var answering = 0
        /// `pthread_self()` of every running server thread, so ``stop()`` knows when it is called from one.
        var serverThreads: Set<pthread_t> = []
    }

    /// What the rules and routes decided for one request.
    struct Decision {
        let sequence: Int
        let handler: HTTPHandler?
        let captures: [String: String]
        let fault: HTTPFaultRule.Action?
        let latencyMilliseconds: Int
    }

    let port: UInt16
    /// The authority a request without a `Host` header reached: `127.0.0.1:PORT`.
    let authority: String
    let tls: TLSIdentity?
    let keepsRequestLog: Bool
    let idleTimeout: Duration?
    let limits: HTTPRequestLimits
    let listener: Int32
    /// Poll on the read end to wait with a timeout that ``stop()`` cuts short by closing the write end.
    let wakeRead: Int32
    let wakeWrite: Int32
    let state = Mutex(State())
    let threads = DispatchGroup()

    init(port requested: UInt16, options: LoopbackHTTPServer.Options) throws(LoopbackHTTPServerError) {
        var bindAddress = in_addr()
        guard inet_pton(AF_INET, options.address, &bindAddress) == 1 else {
            throw LoopbackHTTPServerError(call: "inet_pton(\(options.address))", code: EINVAL)
        }
        keepsRequestLog = options.keepsRequestLog
        idleTimeout = options.idleTimeout
        limits = options.limits
        tls = options.tls
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw LoopbackHTTPServerError(call: "socket", code: errno) }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = requested.bigEndian
        address.sin_addr = bindAddress
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw LoopbackHTTPServerError(call: "bind", code: code)
        }
        guard listen(fd, 128) == 0 else {
            let code = errno
            close(fd)
            throw LoopbackHTTPServerError(call: "listen", code: code)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else {
            let code = errno
            close(fd)
            throw LoopbackHTTPServerError(call: "getsockname", code: code)
        }
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else {
            let code = errno
            close(fd)
            throw LoopbackHTTPServerError(call: "pipe", code: code)
        }
        // pipe2 and accept4 do not import (they need _GNU_SOURCE); set close-on-exec just after instead, so test
        // processes started meanwhile rarely inherit them.
        _ = fcntl(pipeEnds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(pipeEnds[1], F_SETFD, FD_CLOEXEC)
        listener = fd
        port = UInt16(bigEndian: address.sin_port)
        authority = (options.address == "0.0.0.0" ? "127.0.0.1" : options.address) + ":\(port)"
        wakeRead = pipeEnds[0]
        wakeWrite = pipeEnds[1]
    }

    func start() {
        threads.enter()
        let thread = Thread { [self] in
            enterThread()
            defer { leaveThread() }
            acceptLoop()
        }
        thread.name = "loopback-http-accept"
        thread.start()
    }

    // MARK: Controls

    func addRoute(_ pattern: HTTPRoutePattern, _ handler: @escaping HTTPHandler) {
        state.withLock { $0.routes.append(Route(pattern: pattern, handler: handler)) }
    }

    var faultPlan: HTTPFaultPlan { state.withLock { $0.plan } }

    func setFaultPlan(_ plan: HTTPFaultPlan) {
        state.withLock { state in
            state.plan = plan
            state.ruleStates = plan.rules.map { rule in
                if case .rate(_, let seed) = rule.trigger { return RuleState(random: SeededRandom(seed: seed)) }
                return RuleState()
            }
        }
    }

    var log: [HTTPLogEntry] { state.withLock { $0.log } }

    func clearLog() { state.withLock { $0.log.removeAll() } }

    var openConnectionCount: Int { state.withLock { $0.connections.count } }

    var answeringCount: Int { state.withLock { $0.answering } }

    func stop() {
        state.withLock { state in
            guard !state.stopping else { return }
            state.stopping = true
            if !state.listenerClosed { shutdown(listener, Int32(SHUT_RDWR)) }
            for fd in state.connections.values { shutdown(fd, Int32(SHUT_RDWR)) }
            close(wakeWrite)
        }
        // A handler that stops the server (or drops its last reference) runs on a server thread, which would wait
        // for itself: it returns now, and the next stop() from elsewhere waits and closes the rest.
        guard !state.withLock({ $0.serverThreads.contains(pthread_self()) }) else { return }
        threads.wait()
        state.withLock { state in
            guard !state.stopped else { return }
            state.stopped = true
            close(wakeRead)
        }
    }

}

/// The body bytes ``serialize(_:head:keepAlive:)`` sends for `response`.
func sentBodySize(_ response: HTTPResponse, head: Bool) -> Int {
    let bodiless = (100..<200).contains(response.status) || response.status == 204 || response.status == 304
    return head || bodiless ? 0 : response.body.count
}

/// Status line and headers, and the body unless `head` (or a status that has none).
func serialize(_ response: HTTPResponse, head: Bool, keepAlive: Bool) -> [UInt8] {
    var text = "HTTP/1.1 \(response.status) \(reasonPhrase(response.status))\r\n"
    for field in response.headers
    where field.name.lowercased() != "content-length" && field.name.lowercased() != "connection" {
        text += "\(field.name): \(field.value)\r\n"
    }
    let bodiless = (100..<200).contains(response.status) || response.status == 204 || response.status == 304
    if !bodiless {
        // A HEAD answer says the length a GET would send: the body's, or, when a HEAD route answered without one (a
        // proxy relaying a HEAD), the length it gave.
        let given = head && response.body.isEmpty ? response.headers["Content-Length"].flatMap { Int($0) } : nil
        text += "Content-Length: \(given ?? response.body.count)\r\n"
    }
    if !keepAlive { text += "Connection: close\r\n" }
    text += "\r\n"
    var bytes = Array(text.utf8)
    if sentBodySize(response, head: head) > 0 { bytes.append(contentsOf: response.body) }
    return bytes
}
