import CMicroHTTPD
import CloudSyncHTTP
import Foundation
import Glibc
import Synchronization

/// What a ``NetworkHTTPServer`` serves: a screen run on each request's head, then the answer to the whole request.
public protocol HTTPResponder: Sendable {
    /// Decides on a request by its head alone, before any body byte is read (the body is empty here): an answer
    /// returned is sent at once and the connection closed, so a client refused here can send nothing more that is
    /// read. Runs on the server's I/O thread: keep it quick (a token check, not a query).
    func screen(_ head: ReceivedRequest) -> HTTPResponse?
    /// The answer to a whole request, body included. Runs on a worker thread, never on the I/O thread, so it may
    /// block for a while without holding up other connections.
    func respond(to request: ReceivedRequest) -> HTTPResponse
    /// How a request the server refuses on its own (over a limit, overloaded, stopping) is answered.
    func answer(_ refusal: HTTPRequestRefusal) -> HTTPResponse
}

extension HTTPResponder {
    public func screen(_ head: ReceivedRequest) -> HTTPResponse? { nil }
    public func answer(_ refusal: HTTPRequestRefusal) -> HTTPResponse {
        .json(["error": ["code": refusal.code, "message": refusal.message]], status: refusal.status)
    }
}

/// Why ``NetworkHTTPServer`` could not start.
public struct NetworkHTTPServerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What failed, for a person: `bind 127.0.0.1:8484: Address already in use`.
    public let message: String
    /// The `errno` of the failed system call; 0 when libmicrohttpd refused to start.
    public let code: Int32

    public var description: String { message }
}

/// The server that faces the network: HTTP/1.1, optionally over TLS, on libmicrohttpd, for `cloudsync serve`.
///
/// libmicrohttpd parses every request and enforces the connection limits (in all, per client address, memory per
/// connection, idle time); this face screens each head against ``HTTPRequestLimits`` and the responder's
/// ``HTTPResponder/screen(_:)`` before any body is read, and runs the responder on a thread of its own while the
/// connection is suspended, so one slow answer holds no other client. IPv4 and IPv6 addresses both work.
///
/// Call ``stop()`` when done.
public final class NetworkHTTPServer: Sendable {
    /// Where it listens and what it allows.
    public struct Options: Sendable {
        /// The address to bind: dotted IPv4 (`127.0.0.1`, `0.0.0.0`) or IPv6 (`::1`, `::`).
        public var address = "127.0.0.1"
        /// The port; 0 lets the system pick one (see ``NetworkHTTPServer/port``).
        public var port: UInt16 = 0
        /// Connections served at once; a request arriving past it gets 503, and connections well past it (an
        /// eighth more, at least 16) are closed as soon as they are accepted.
        public var maxConnections = 256
        /// Connections from one client address at once; more are closed as soon as they are accepted.
        public var maxConnectionsPerClient = 64
        /// A connection that sends and receives nothing for this many seconds is closed, whether it is idle between
        /// requests or stalled inside one.
        public var idleTimeoutSeconds = 30
        /// Seconds a connection has to deliver each whole request head, however it trickles the bytes.
        ///
        /// Counted from when it is ready for one (opened, TLS handshake included, or done with its last request);
        /// past it the connection is closed. This is what frees the connections a slow-header client holds, which the idle timeout never does.
        public var headTimeoutSeconds = 10
        /// The memory one connection may use for reading a head, libmicrohttpd's own bound (its default is 32 KiB); a
        /// head that does not fit gets 431 from libmicrohttpd itself, before the face sees it.
        public var connectionMemoryBytes = 32 * 1024
        /// The head and body bounds every request is screened against.
        public var limits = HTTPRequestLimits.service
        /// Serve HTTPS with this PEM certificate (chain) and PEM private key instead of plain HTTP.
        public var tls: (certificatePEM: String, keyPEM: String)? = nil
        /// Where the server counts what it does (``NetworkHTTPServer/counters``); give one to read it elsewhere.
        public var counters = HTTPListenerCounters()

        public init() {}
    }

    /// The port it listens on.
    public let port: UInt16
    /// The address it is bound to, as given.
    public let address: String
    /// `https` with TLS, else `http`.
    public let scheme: String
    private let core: NetworkServerCore

    /// Binds and starts serving `responder` at once.
    public init(options: Options, responder: some HTTPResponder) throws(NetworkHTTPServerError) {
        let (listener, port) = try Self.listen(address: options.address, port: options.port)
        self.port = port
        address = options.address
        scheme = options.tls == nil ? "http" : "https"
        core = NetworkServerCore(
            options: options, responder: responder, scheme: scheme,
            authority: Self.authority(options.address, port: port))
        try core.start(listener: listener)
    }

    deinit { core.stop() }

    /// `ADDRESS:PORT`, an IPv6 address in brackets: `127.0.0.1:8484`, `[::1]:8484`.
    public static func authority(_ address: String, port: UInt16) -> String {
        address.contains(":") ? "[\(address)]:\(port)" : "\(address):\(port)"
    }

    /// Where it listens, as ``authority(_:port:)`` writes it: `0.0.0.0:8484` for a wildcard bind.
    public var authority: String { Self.authority(address, port: port) }

    /// `SCHEME://ADDRESS:PORT` as a client on this machine reaches it (the loopback address for a wildcard bind).
    public var baseURL: URL {
        let reachable = address == "0.0.0.0" ? "127.0.0.1" : address == "::" ? "::1" : address
        return URL(string: "\(scheme)://\(Self.authority(reachable, port: port))")!
    }

    /// The URL of `path` (which starts with `/` and may carry a query) on this server.
    public func url(_ path: String) -> URL { URL(string: baseURL.absoluteString + path)! }

    /// The loaded libmicrohttpd's version (`0.9.75`), for `cloudsync version`.
    public static var libraryVersion: String { MHD_get_version().map { String(cString: $0) } ?? "unknown" }

    /// Connections open right now.
    public var openConnectionCount: Int { core.counters.openConnections }

    /// What the server did since it started.
    public var counters: HTTPListenerCounters { core.counters }

    /// Stops the server; calling it again does nothing.
    ///
    /// It stops accepting, answers requests still arriving with 503, waits for the answers being computed, then
    /// closes every connection.
    public func stop() { core.stop() }
}

/// One request's state between libmicrohttpd's calls: made when its request line arrives, released when libmicrohttpd
/// says the request is over.
///
/// Only the I/O thread touches it, except ``response``, which a worker sets before it resumes the connection;
/// libmicrohttpd's resume takes a lock the I/O thread takes too, so the write is seen.
private final class RequestContext: @unchecked Sendable {
    let target: String
    var screened = false
    var body: [UInt8] = []
    /// The screened head, until its answer is dispatched.
    var head: ReceivedRequest?
    var response: HTTPResponse?

    init(target: String) { self.target = target }
}

/// The server's state; libmicrohttpd's callbacks reach it through their closure pointer.
private final class NetworkServerCore: @unchecked Sendable {
    // Immutable after init except `daemon` and the PEM copies, set once in start() before any callback can run and
    // released in stop() after libmicrohttpd has ended every thread.
    let options: NetworkHTTPServer.Options
    let responder: any HTTPResponder
    let scheme: String
    let authority: String
    let counters: HTTPListenerCounters
    /// Every open connection's socket and, while it waits for a request head, since when; by connection.
    private let waiting = Mutex<[UInt: (fd: Int32, since: ContinuousClock.Instant?)]>([:])
    private var headWatch: DispatchSourceTimer?
    let inFlight = Atomic<Int>(0)
    let stopping = Atomic<Bool>(false)
    private let stopped = Mutex(false)
    private var daemon: OpaquePointer?
    private var keyPEM: UnsafeMutablePointer<CChar>?
    private var certificatePEM: UnsafeMutablePointer<CChar>?

    init(options: NetworkHTTPServer.Options, responder: any HTTPResponder, scheme: String, authority: String) {
        self.options = options
        self.counters = options.counters
        self.responder = responder
        self.scheme = scheme
        self.authority = authority
    }

    func start(listener: Int32) throws(NetworkHTTPServerError) {
        if let tls = options.tls {
            keyPEM = strdup(tls.keyPEM)
            certificatePEM = strdup(tls.certificatePEM)
        }
        let hardLimit = options.maxConnections + max(16, options.maxConnections / 8)
        let flags =
            UInt32(MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_EPOLL.rawValue)
            | UInt32(MHD_ALLOW_SUSPEND_RESUME.rawValue)
        daemon = cloudsync_mhd_start(
            flags, listener, accessHandler, Unmanaged.passUnretained(self).toOpaque(),
            requestCompleted, requestStarted, connectionNotified, Unmanaged.passUnretained(self).toOpaque(),
            UInt32(clamping: hardLimit), UInt32(clamping: options.maxConnectionsPerClient),
            options.connectionMemoryBytes, UInt32(clamping: options.idleTimeoutSeconds), keyPEM, certificatePEM)
        if daemon != nil {
            let period = DispatchTimeInterval.milliseconds(min(1000, max(100, options.headTimeoutSeconds * 250)))
            let watch = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "cloudsync.network-http.heads"))
            watch.schedule(deadline: .now() + period, repeating: period)
            watch.setEventHandler { [weak self] in self?.closeLateHeads() }
            watch.resume()
            headWatch = watch
        }
        guard daemon != nil else {
            // libmicrohttpd closes the listening socket it was given on its failures past reading the options (a
            // TLS key that does not load, among them); closing it here too could close a descriptor reused since.
            releasePEM()
            throw NetworkHTTPServerError(
                message: options.tls == nil
                    ? "libmicrohttpd did not start"
                    : "libmicrohttpd did not start TLS: check that the certificate and key are PEM and belong together",
                code: 0)
        }
    }

    func stop() {
        let first = stopped.withLock { stopped in
            defer { stopped = true }
            return !stopped
        }
        guard first, let daemon else { return }
        stopping.store(true, ordering: .sequentiallyConsistent)
        headWatch?.cancel()
        // No new connection; the listening socket comes back to be closed here, but only once the daemon has
        // stopped: its polling thread may still be using it until then (libmicrohttpd's manual), and a number
        // closed early may already name another file of this process when that thread touches it.
        let listener = MHD_quiesce_daemon(daemon)
        // A suspended connection must be resumed before libmicrohttpd stops: wait for the answers being computed.
        while inFlight.load(ordering: .sequentiallyConsistent) > 0 { usleep(1000) }
        MHD_stop_daemon(daemon)
        if listener >= 0 { close(listener) }
        releasePEM()
    }

    private func releasePEM() {
        if let keyPEM {
            memset(keyPEM, 0, strlen(keyPEM))
            free(keyPEM)
        }
        free(certificatePEM)
        keyPEM = nil
        certificatePEM = nil
    }

    // MARK: The head deadline

    /// Shuts down the sockets of connections whose head is past its deadline.
    ///
    /// libmicrohttpd only times a connection out when it goes quiet, so a client that sends a head a byte at a time
    /// would hold its connection for ever: past the deadline its socket is shut down, and libmicrohttpd, seeing the
    /// end of the stream, closes it. The entry leaves the table (under this lock) before libmicrohttpd closes the
    /// descriptor, so a number reused by a newer connection is never shut down.
    private func closeLateHeads() {
        let now = ContinuousClock.now
        let limit = Duration.seconds(options.headTimeoutSeconds)
        waiting.withLock { waiting in
            for (key, entry) in waiting {
                guard let since = entry.since, now - since > limit else { continue }
                shutdown(entry.fd, Int32(SHUT_RDWR))
                waiting[key]?.since = nil
                counters.count(counters.headTimeouts)
            }
        }
    }

    func connectionOpened(_ connection: OpaquePointer) {
        counters.count(counters.open)
        let fd = cloudsync_mhd_connection_fd(connection)
        waiting.withLock { $0[UInt(bitPattern: connection)] = (fd, ContinuousClock.now) }
    }

    func connectionClosed(_ connection: OpaquePointer) {
        counters.count(counters.open, by: -1)
        _ = waiting.withLock { $0.removeValue(forKey: UInt(bitPattern: connection)) }
    }

    /// A request ended: the connection, if it stays open, waits for its next head from now.
    func requestEnded(_ connection: OpaquePointer) {
        waiting.withLock { $0[UInt(bitPattern: connection)]?.since = ContinuousClock.now }
    }

    // MARK: Requests

    /// What a request arriving while the server stops gets.
    static let stoppingRefusal = HTTPRequestRefusal(
        status: 503, code: "ERR_STOPPING", message: "the server is stopping; try again shortly")

    /// libmicrohttpd's access handler: called once with the head, then with each piece of body, then once more with
    /// none, and again after a resume.
    func handle(
        _ connection: OpaquePointer, context: RequestContext, method: String, version: String,
        upload: UnsafePointer<CChar>?, uploadSize: UnsafeMutablePointer<Int>
    ) -> Bool {
        if let response = context.response {
            return queue(response, on: connection, closing: false)
        }
        if !context.screened {
            return screen(connection, context: context, method: method, version: version)
        }
        if uploadSize.pointee > 0 {
            return receive(upload, size: uploadSize, into: context)
        }
        return dispatch(connection, context: context)
    }

    /// Screens a request by its head, before any of its body is read: against the limits, a stopping or overloaded
    /// server, and the responder's ``HTTPResponder/screen(_:)``; a refusal is queued and the connection closed after
    /// it, a head that passes is kept for the answer.
    private func screen(_ connection: OpaquePointer, context: RequestContext, method: String, version: String) -> Bool {
        context.screened = true
        waiting.withLock { $0[UInt(bitPattern: connection)]?.since = nil }
        let headers = Self.headers(of: connection)
        var headBytes = method.utf8.count + context.target.utf8.count + version.utf8.count + 4
        for field in headers { headBytes += field.name.utf8.count + field.value.utf8.count + 4 }
        if let refusal = options.limits.screen(headBytes: headBytes, headers: headers) {
            return queue(responder.answer(refusal), on: connection, closing: true)
        }
        if stopping.load(ordering: .relaxed) {
            return queue(responder.answer(Self.stoppingRefusal), on: connection, closing: true)
        }
        if counters.openConnections > options.maxConnections {
            var answer = responder.answer(
                HTTPRequestRefusal(
                    status: 503, code: "ERR_OVERLOADED",
                    message: "the server has more than \(options.maxConnections) connections open; try again shortly"))
            answer.headers["Retry-After"] = "1"
            return queue(answer, on: connection, closing: true)
        }
        var head = ReceivedRequest(method: method, target: context.target, headers: headers, body: Data())
        head.scheme = scheme
        head.serverAuthority = authority
        if let refused = responder.screen(head) {
            return queue(refused, on: connection, closing: true)
        }
        context.head = head
        return true
    }

    /// The request's header fields, in the order they came.
    private static func headers(of connection: OpaquePointer) -> HTTPHeaders {
        var headers = HTTPHeaders()
        withUnsafeMutablePointer(to: &headers) { pointer in
            _ = MHD_get_connection_values_n(
                connection, .HEADER_KIND,
                { cls, _, key, keySize, value, valueSize in
                    let headers = cls!.assumingMemoryBound(to: HTTPHeaders.self)
                    let name =
                        key.map {
                            String(decoding: UnsafeRawBufferPointer(start: $0, count: keySize), as: UTF8.self)
                        } ?? ""
                    let text =
                        value.map {
                            String(decoding: UnsafeRawBufferPointer(start: $0, count: valueSize), as: UTF8.self)
                        } ?? ""
                    headers.pointee.add(name, text)
                    return .YES
                }, pointer)
        }
        return headers
    }

    /// Adds the `size.pointee` bytes at `upload` to the request's body and marks them taken (`size` set to 0); false
    /// when they would take the body past its limit.
    private func receive(_ upload: UnsafePointer<CChar>?, size: UnsafeMutablePointer<Int>, into context: RequestContext)
        -> Bool
    {
        let count = size.pointee
        // libmicrohttpd takes no answer in the middle of a body: a chunked body past the limit ends the
        // connection instead (a declared one was refused with 413 by its head).
        guard count <= options.limits.bodyBytes - context.body.count, let upload else { return false }
        upload.withMemoryRebound(to: UInt8.self, capacity: count) {
            context.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: count))
        }
        size.pointee = 0
        return true
    }

    /// Suspends the connection of a whole request and has the responder answer it on a thread of its own, which
    /// resumes the connection with the answer; a request arriving while the server stops is refused instead.
    private func dispatch(_ connection: OpaquePointer, context: RequestContext) -> Bool {
        // Taken once: libmicrohttpd calls again only after the answer resumes the connection.
        guard var request = context.head else { return true }
        // Counted before the check, and stop() sets the flag before it reads the count: either this request sees the
        // server stopping, or stop() waits for its answer.
        inFlight.add(1, ordering: .sequentiallyConsistent)
        guard !stopping.load(ordering: .sequentiallyConsistent) else {
            inFlight.subtract(1, ordering: .sequentiallyConsistent)
            return queue(responder.answer(Self.stoppingRefusal), on: connection, closing: true)
        }
        context.head = nil
        request.body = Data(context.body)
        context.body = []
        MHD_suspend_connection(connection)
        let responder = responder
        let whole = request
        let handle = UInt(bitPattern: connection)
        // A thread of its own, not Dispatch's pool, which on Linux runs about one item a core: two answers waiting
        // on a database would hold every other. One answer at most per connection, so the connection caps bound them.
        let thread = Thread { [self] in
            context.response = responder.respond(to: whole)
            counters.count(counters.answered)
            MHD_resume_connection(OpaquePointer(bitPattern: handle))
            inFlight.subtract(1, ordering: .sequentiallyConsistent)
        }
        thread.name = "cloudsync-http-answer"
        thread.stackSize = 1 << 20
        thread.start()
        return true
    }

    /// Hands `response` to libmicrohttpd, closing the connection after it when `closing`.
    ///
    /// libmicrohttpd adds `Content-Length`, leaves the body out for `HEAD`, and also closes when the response says
    /// `Connection: close`. A response that closes is a refusal of a request by its head, and is counted as one.
    private func queue(_ response: HTTPResponse, on connection: OpaquePointer, closing: Bool) -> Bool {
        if closing { counters.refuse(status: response.status) }
        let body = [UInt8](response.body)
        let made = body.withUnsafeBytes { raw in
            MHD_create_response_from_buffer(
                raw.count, UnsafeMutableRawPointer(mutating: raw.baseAddress), .RESPMEM_MUST_COPY)
        }
        guard let made else { return false }
        defer { MHD_destroy_response(made) }
        for field in response.headers {
            let name = field.name.lowercased()
            guard name != "content-length", name != "connection", name != "transfer-encoding" else { continue }
            // A field libmicrohttpd refuses (a line break in a value) is left out rather than sent broken.
            _ = MHD_add_response_header(made, field.name, field.value)
        }
        if closing || stopping.load(ordering: .relaxed) { _ = MHD_add_response_header(made, "Connection", "close") }
        return MHD_queue_response(connection, UInt32(response.status), made) == .YES
    }
}

// MARK: libmicrohttpd's callbacks

private func core(_ cls: UnsafeMutableRawPointer?) -> NetworkServerCore {
    Unmanaged<NetworkServerCore>.fromOpaque(cls!).takeUnretainedValue()
}

/// The request line's target, before libmicrohttpd splits or decodes it: the request's context starts here.
private let requestStarted: cloudsync_mhd_uri_callback = { _, uri, _ in
    let target = uri.map { String(cString: $0) } ?? "/"
    return Unmanaged.passRetained(RequestContext(target: target)).toOpaque()
}

private let requestCompleted: MHD_RequestCompletedCallback = { cls, connection, context, _ in
    if let connection { core(cls).requestEnded(connection) }
    guard let context, let pointer = context.pointee else { return }
    Unmanaged<RequestContext>.fromOpaque(pointer).release()
    context.pointee = nil
}

private let connectionNotified: MHD_NotifyConnectionCallback = { cls, connection, _, event in
    guard let connection else { return }
    if event == .CONNECTION_NOTIFY_STARTED {
        core(cls).connectionOpened(connection)
    } else {
        core(cls).connectionClosed(connection)
    }
}

private let accessHandler: MHD_AccessHandlerCallback = {
    cls, connection, _, method, version, upload, uploadSize, context in
    guard let connection, let uploadSize, let context, let pointer = context.pointee else { return .NO }
    let request = Unmanaged<RequestContext>.fromOpaque(pointer).takeUnretainedValue()
    let handled = core(cls).handle(
        connection, context: request, method: method.map { String(cString: $0) } ?? "GET",
        version: version.map { String(cString: $0) } ?? "HTTP/1.1", upload: upload, uploadSize: uploadSize)
    return handled ? .YES : .NO
}
