import CloudSyncHTTPServer
import CloudSyncPipeline
import CloudSyncService
import Foundation

extension CommandLineTool {
    /// Runs `cloudsync serve FILE|DIR... [--listen ADDRESS:PORT] [--token-file PATH]` until SIGTERM or SIGINT.
    func serve(_ parsed: ParsedArguments) async -> ExitCode {
        let listen = parsed.value(Commands.serveListen) ?? "127.0.0.1:8484"
        guard let (address, port) = Self.listenAddress(listen) else {
            return usageError(
                "--listen wants an IPv4 address and a port such as 127.0.0.1:8484 or 0.0.0.0:8484; found '\(listen)'",
                Commands.serve)
        }
        var token: String?
        if let path = parsed.value(Commands.serveTokenFile) {
            switch Self.readToken(path) {
            case .success(let read): token = read
            case .failure(let refusal): return usageError(refusal.message, Commands.serve)
            }
        }
        let loopback = address.hasPrefix("127.")
        if !loopback, token == nil {
            return usageError(
                "--listen \(listen) is reachable from other machines: give --token-file with a secret that requests "
                    + "must carry, or listen on 127.0.0.1", Commands.serve)
        }

        let errorWriter = standardError
        let service = PipelineService(
            PipelineService.Configuration(
                paths: parsed.all(Commands.serveFiles), load: { [self] in load($0) },
                log: { line in errorWriter("\(ReportTime.string(Date())) \(line)\n") }))
        // A typo at start is a usage error, as `run` and `validate` make it; after a SIGHUP it is reported instead.
        let errors = service.check()
        guard errors.isEmpty else {
            for (_, error) in errors.sorted(by: { $0.key < $1.key }) { standardError(error + "\n") }
            standardError(
                "serve: \(errors.count) file\(errors.count == 1 ? "" : "s") did not load; nothing was started\n")
            return .usage
        }

        var options = LoopbackHTTPServer.Options()
        options.address = address
        options.keepsRequestLog = false
        options.idleTimeout = .seconds(60)
        let server: LoopbackHTTPServer
        do {
            server = try LoopbackHTTPServer(port: port, options: options)
        } catch {
            standardError("Error: cannot listen on \(listen): \(error); pick another --listen\n")
            return .unavailable
        }
        ServiceAPI(service: service, token: token).install(on: server)
        service.start()
        let served = service.pipelines
        standardError(
            "serving \(served.count) pipeline\(served.count == 1 ? "" : "s") on http://\(address):\(server.port)/ "
                + "(\(served.map(\.name).joined(separator: ", ")))\n")
        let notifier = SystemdNotifier(environment: environment)
        notifier.send("READY=1\nSTATUS=serving \(served.count) pipelines")

        // SIGHUP reloads; SIGTERM or SIGINT ends the wait below.
        let (stops, stopped) = AsyncStream.makeStream(of: Int32.self)
        let signals = SignalWatch([SIGHUP, SIGTERM, SIGINT]) { number in
            if number == SIGHUP {
                notifier.send("RELOADING=1")
                errorWriter("SIGHUP: reloading the pipeline files\n")
                service.reload()
                notifier.send("READY=1")
            } else {
                stopped.yield(number)
            }
        }
        defer { signals.restore() }
        for await number in stops {
            let running = service.pipelines.filter { $0.running != nil }.map(\.name)
            notifier.send("STOPPING=1")
            standardError(
                "\(number == SIGTERM ? "SIGTERM" : "SIGINT"): starting no new run"
                    + (running.isEmpty
                        ? "" : "; \(running.joined(separator: ", ")) stop at their next batch boundary") + "\n")
            break
        }
        await service.stop()
        server.stop()
        standardError("serve: stopped\n")
        return .success
    }

    /// `HOST:PORT` with a dotted IPv4 host and a port; nil when it is not that.
    static func listenAddress(_ text: String) -> (String, UInt16)? {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            return nil
        }
        let host = String(text[..<colon])
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts.allSatisfy({ UInt8($0) != nil }) else { return nil }
        return (host, port)
    }

    /// The token in `path`, whitespace around it removed; refused when the file is missing, empty, or readable by
    /// others than its owner.
    static func readToken(_ path: String) -> Result<String, TokenFileError> {
        var info = stat()
        guard stat(path, &info) == 0, let data = FileManager.default.contents(atPath: path) else {
            return .failure(TokenFileError("--token-file \(path) cannot be read"))
        }
        guard info.st_mode & 0o077 == 0 else {
            return .failure(
                TokenFileError(
                    "--token-file \(path) can be read by others than its owner (mode "
                        + String(info.st_mode & 0o777, radix: 8) + "); chmod 600 it"))
        }
        let token = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard token.count >= 16 else {
            return .failure(
                TokenFileError("--token-file \(path) holds fewer than 16 characters; write a longer secret"))
        }
        return .success(token)
    }
}

/// Why `--token-file` was refused.
struct TokenFileError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}
