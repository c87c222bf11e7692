import CloudSync
import CloudSyncHTTP
import Foundation
import Glibc
import Synchronization

/// The server's threads: the accept loop, and a thread per connection that reads its requests and answers each by its
/// route or the fault plan, recording it in the request log.
extension ServerCore {
    /// Notes the running thread as the server's; each thread's body starts with it.
    func enterThread() {
        _ = state.withLock { $0.serverThreads.insert(pthread_self()) }
    }

    /// Forgets the running thread and lets ``stop()`` go on once it was the last.
    func leaveThread() {
        _ = state.withLock { $0.serverThreads.remove(pthread_self()) }
        threads.leave()
    }

    func acceptLoop() {
        while true {
            let fd = accept(listener, nil, nil)
            if fd < 0 {
                let code = errno
                if code == EINTR || code == ECONNABORTED { continue }
                if state.withLock({ $0.stopping }) { break }
                if code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM {
                    // Out of descriptors for now: wait a little (or for stop) instead of spinning.
                    if waitForStop(milliseconds: 10) { break }
                    continue
                }
                break
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var yes: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
            if let idleTimeout {
                let (seconds, attoseconds) = idleTimeout.components
                var limit = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
                setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            }
            let id = state.withLock { state -> Int? in
                guard !state.stopping else { return nil }
                let id = state.nextConnectionID
                state.nextConnectionID += 1
                state.connections[id] = fd
                threads.enter()
                return id
            }
            guard let id else {
                close(fd)
                break
            }
            let thread = Thread { [self] in
                enterThread()
                defer { leaveThread() }
                serve(fd: fd, id: id)
            }
            thread.name = "loopback-http-\(id)"
            thread.start()
        }
        state.withLock { state in
            state.listenerClosed = true
            close(listener)
        }
    }

    /// Serves one connection until it closes, then closes it, resetting it when a fault asked for that.
    ///
    /// Closing under the lock keeps ``stop()`` from shutting down a descriptor number already reused.
    func serve(fd: Int32, id: Int) {
        var ending = Ending.close
        if let tls {
            // A failed handshake (a client that does not trust the certificate, or that speaks plain HTTP) ends this
            // connection only, before any request is read or logged.
            if let stream = TLSStream(fd: fd, identity: tls), stream.handshake() {
                ending = serveRequests(on: SocketConnection(fd: fd, tls: stream, limits: limits), id: id)
                if ending == .close { stream.close() }
            }
        } else {
            ending = serveRequests(on: SocketConnection(fd: fd, limits: limits), id: id)
        }
        state.withLock { state in
            state.connections[id] = nil
            if ending == .reset {
                var linger = linger(l_onoff: 1, l_linger: 0)
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
            }
            close(fd)
        }
    }

    enum Ending { case close, reset }

    func serveRequests(on connection: SocketConnection, id: Int) -> Ending {
        while true {
            let parsed: ParsedRequest
            switch connection.readRequest() {
            case .closed: return .close
            case .refused(let refusal):
                _ = connection.send(
                    serialize(HTTPResponse.error(refusal.status, refusal.message), head: false, keepAlive: false))
                return .close
            case .request(let request): parsed = request
            }
            let decision = decide(parsed, connectionID: id)
            defer { state.withLock { $0.answering -= 1 } }
            if decision.latencyMilliseconds > 0, waitForStop(milliseconds: decision.latencyMilliseconds) {
                return .close
            }
            var request = parsed.request
            request.connectionID = id
            request.scheme = tls == nil ? "http" : "https"
            request.serverAuthority = authority
            request.captures = decision.captures
            let isHead = request.method == "HEAD"

            var response: HTTPResponse
            switch decision.fault {
            case .hang?:
                connection.drainUntilClosed()
                return .close
            case .status(let status)?:
                response = .error(status, "injected fault: status \(status)")
            case .tooManyRequests(let seconds)?:
                response = .error(429, "injected fault: too many requests")
                response.headers["Retry-After"] = String(seconds)
            case .resetMidBody?:
                response = decision.handler.map { $0(request) } ?? notFound(request)
                if response.body.count < 2 { response.body = Data(repeating: UInt8(ascii: "x"), count: 1024) }
                record(status: response.status, bodySize: response.body.count / 2, sequence: decision.sequence)
                var bytes = serialize(response, head: true, keepAlive: true)
                bytes.append(contentsOf: response.body.prefix(response.body.count / 2))
                _ = connection.send(bytes)
                return .reset
            case .latency?, nil:
                response = decision.handler.map { $0(request) } ?? notFound(request)
            }
            record(status: response.status, bodySize: sentBodySize(response, head: isHead), sequence: decision.sequence)
            let keepAlive = parsed.keepAlive && !state.withLock { $0.stopping }
            guard connection.send(serialize(response, head: isHead, keepAlive: keepAlive)), keepAlive else {
                return .close
            }
        }
    }

    func notFound(_ request: ReceivedRequest) -> HTTPResponse {
        .error(404, "no route", extra: ["method": request.method, "path": request.path])
    }

    /// Finds the route, runs the fault rules and logs the arrival, all in one critical section so rule counts follow
    /// arrival order.
    func decide(_ parsed: ParsedRequest, connectionID: Int) -> Decision {
        state.withLock { state in
            let request = parsed.request
            var matched: (Route, [String: String])?
            for route in state.routes where route.pattern.method == request.method {
                if let captures = route.pattern.match(path: request.path) {
                    matched = (route, captures)
                    break
                }
            }
            if matched == nil, request.method == "HEAD" {
                for route in state.routes where route.pattern.method == "GET" {
                    if let captures = route.pattern.match(path: request.path) {
                        matched = (route, captures)
                        break
                    }
                }
            }
            let pattern = matched?.0.pattern

            var latency = 0
            var fault: HTTPFaultRule.Action?
            for index in state.plan.rules.indices {
                let rule = state.plan.rules[index]
                if let route = rule.route, route != pattern { continue }
                state.ruleStates[index].calls += 1
                let call = state.ruleStates[index].calls
                let fires: Bool
                switch rule.trigger {
                case .always: fires = true
                case .calls(let calls): fires = calls.contains(call)
                case .afterCalls(let count): fires = call > count
                case .rate(let rate, _):
                    fires = state.ruleStates[index].random!.nextUnit() < rate
                }
                guard fires else { continue }
                if case .latency(let milliseconds) = rule.action {
                    latency += milliseconds
                } else if fault == nil {
                    fault = rule.action
                }
            }

            let sequence = state.nextSequence
            state.nextSequence += 1
            state.answering += 1
            if keepsRequestLog {
                state.log.append(
                    HTTPLogEntry(
                        sequence: sequence, connectionID: connectionID, method: request.method, path: request.path,
                        target: request.target, queryItems: request.queryItems, headers: request.headers,
                        bodySize: request.body.count,
                        route: pattern, status: nil, fault: fault, latencyMilliseconds: latency))
            }
            return Decision(
                sequence: sequence, handler: matched?.0.handler, captures: matched?.1 ?? [:], fault: fault,
                latencyMilliseconds: latency)
        }
    }

    /// Notes the status before it is sent, so a client that has its answer finds the log complete.
    func record(status: Int, bodySize: Int, sequence: Int) {
        guard keepsRequestLog else { return }
        state.withLock { state in
            if let index = state.log.lastIndex(where: { $0.sequence == sequence }) {
                state.log[index].status = status
                state.log[index].responseBodySize = bodySize
            }
        }
    }

    /// Waits `milliseconds`, or less when the server stops first; returns whether it stopped.
    func waitForStop(milliseconds: Int) -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(milliseconds)
        while true {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return false }
            var descriptor = pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)
            let (seconds, attoseconds) = left.components
            let timeout = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
            let ready = poll(&descriptor, 1, timeout)
            if ready > 0 { return true }
        }
    }
}
