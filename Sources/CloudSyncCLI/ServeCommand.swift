import CloudSyncHTTPServer
import CloudSyncPipeline
import CloudSyncRunner
import CloudSyncService
import Foundation

extension CommandLineTool {
    /// Runs `cloudsync serve FILE|DIR... [--listen ADDRESS:PORT] [--token-file PATH] [--tls-cert FILE --tls-key FILE]
    /// [--max-connections N] [--max-connections-per-client N] [--idle-timeout SECONDS] [--head-timeout SECONDS]` until SIGTERM or SIGINT.
    func serve(_ parsed: ParsedArguments) async -> ExitCode {
        let settings: ServeSettings
        switch Self.serveSettings(parsed) {
        case .success(let read): settings = read
        case .failure(let refusal): return usageError(refusal.message, Commands.serve)
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

        let server: NetworkHTTPServer
        do {
            server = try NetworkHTTPServer(
                options: settings.options,
                responder: ServiceAPI(service: service, token: settings.token, listener: settings.options.counters))
        } catch {
            standardError("Error: cannot serve on \(settings.listen): \(error.message)\n")
            if error.code == 0 && settings.options.tls != nil {
                standardError("See 'cloudsync help serve'.\n")
                return .usage
            }
            standardError("Pick another --listen.\n")
            return .unavailable
        }
        service.start()
        let served = service.pipelines
        standardError(
            "serving \(served.count) pipeline\(served.count == 1 ? "" : "s") on \(server.scheme)://\(server.authority)/ "
                + "(\(served.map(\.name).joined(separator: ", ")))\n")
        let notifier = SystemdNotifier(environment: environment)
        notifier.send("READY=1\nSTATUS=serving \(served.count) pipelines")
        await serveUntilStopped(service, notifier: notifier)
        await service.stop()
        server.stop()
        standardError("serve: stopped\n")
        return .success
    }

    /// Waits for SIGTERM or SIGINT, reloading the pipeline files at each SIGHUP meanwhile, and says what stopping
    /// leaves running.
    private func serveUntilStopped(_ service: PipelineService, notifier: SystemdNotifier) async {
        let errorWriter = standardError
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
    }

    /// Where and how `serve` listens, as its options say.
    struct ServeSettings {
        /// The `--listen` text, for messages.
        var listen: String
        var options: NetworkHTTPServer.Options
        /// The secret requests must carry; nil when `--token-file` is not given.
        var token: String?
    }

    /// `serve`'s listening options read and checked: the address, the token (required off loopback), the connection
    /// limits and timeouts, and TLS.
    static func serveSettings(_ parsed: ParsedArguments) -> Result<ServeSettings, CommandRefusal> {
        let listen = parsed.value(Commands.serveListen) ?? "127.0.0.1:8484"
        guard let (address, port) = listenAddress(listen) else {
            return .failure(
                CommandRefusal(
                    "--listen wants an address and a port such as 127.0.0.1:8484, 0.0.0.0:8484 or [::1]:8484; found "
                        + "'\(listen)'"))
        }
        var settings = ServeSettings(listen: listen, options: NetworkHTTPServer.Options())
        if let path = parsed.value(Commands.serveTokenFile) {
            switch readToken(path) {
            case .success(let read): settings.token = read
            case .failure(let refusal): return .failure(refusal)
            }
        }
        if !isLoopback(address), settings.token == nil {
            return .failure(
                CommandRefusal(
                    "--listen \(listen) is reachable from other machines: give --token-file with a secret that "
                        + "requests must carry, or listen on 127.0.0.1"))
        }
        settings.options.address = address
        settings.options.port = port
        if let refusal = applyLimits(parsed, to: &settings.options) { return .failure(refusal) }
        switch (parsed.value(Commands.serveTLSCertificate), parsed.value(Commands.serveTLSKey)) {
        case (nil, nil): break
        case (let certificate?, let key?):
            switch readTLS(certificate: certificate, key: key) {
            case .success(let pair): settings.options.tls = pair
            case .failure(let refusal): return .failure(refusal)
            }
        case (nil, _?): return .failure(CommandRefusal("--tls-key needs --tls-cert, the certificate it belongs to"))
        case (_?, nil): return .failure(CommandRefusal("--tls-cert needs --tls-key, the certificate's private key"))
        }
        return .success(settings)
    }

    /// Sets the connection limits and timeouts the options give; the refusal of the first out of range.
    static func applyLimits(_ parsed: ParsedArguments, to options: inout NetworkHTTPServer.Options)
        -> CommandRefusal?
    {
        let limits: [(OptionSpec, WritableKeyPath<NetworkHTTPServer.Options, Int>)] = [
            (Commands.serveMaxConnections, \.maxConnections),
            (Commands.serveMaxPerClient, \.maxConnectionsPerClient),
            (Commands.serveIdleTimeout, \.idleTimeoutSeconds),
            (Commands.serveHeadTimeout, \.headTimeoutSeconds),
        ]
        for (option, field) in limits {
            guard let text = parsed.value(option) else { continue }
            guard let value = Int(text), value >= 1, value <= 1_000_000 else {
                return CommandRefusal("--\(option.name) wants a whole number from 1 to 1000000; found '\(text)'")
            }
            options[keyPath: field] = value
        }
        return nil
    }

    /// `HOST:PORT` with a dotted IPv4 host, or `[HOST]:PORT` with an IPv6 one, and a port; nil when it is not that.
    static func listenAddress(_ text: String) -> (String, UInt16)? {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            return nil
        }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
            var address = in6_addr()
            return inet_pton(AF_INET6, host, &address) == 1 ? (host, port) : nil
        }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts.allSatisfy({ UInt8($0) != nil }) else { return nil }
        return (host, port)
    }

    /// Whether `address` (as ``listenAddress(_:)`` returns it) is reachable from this machine only.
    static func isLoopback(_ address: String) -> Bool {
        if address.contains(":") {
            var parsed = in6_addr()
            var loopback = in6_addr()
            _ = inet_pton(AF_INET6, "::1", &loopback)
            return inet_pton(AF_INET6, address, &parsed) == 1
                && withUnsafeBytes(of: &parsed) { a in withUnsafeBytes(of: &loopback) { b in a.elementsEqual(b) } }
        }
        return address.hasPrefix("127.")
    }

    /// The certificate and key `--tls-cert` and `--tls-key` name, as PEM text; refused when either cannot be read,
    /// is not PEM, or the key can be read by others than its owner.
    static func readTLS(certificate: String, key: String) -> Result<
        (certificatePEM: String, keyPEM: String), CommandRefusal
    > {
        guard let certificateData = FileManager.default.contents(atPath: certificate) else {
            return .failure(CommandRefusal("--tls-cert \(certificate) cannot be read"))
        }
        let certificatePEM = String(decoding: certificateData, as: UTF8.self)
        guard certificatePEM.contains("-----BEGIN CERTIFICATE-----") else {
            return .failure(
                CommandRefusal("--tls-cert \(certificate) holds no PEM certificate (-----BEGIN CERTIFICATE-----)"))
        }
        let keyData: Data
        switch readOwnersOnly(key, option: "--tls-key") {
        case .success(let data): keyData = data
        case .failure(let refusal): return .failure(refusal)
        }
        let keyPEM = String(decoding: keyData, as: UTF8.self)
        guard keyPEM.contains("-----BEGIN ") && keyPEM.contains("PRIVATE KEY-----") else {
            return .failure(CommandRefusal("--tls-key \(key) holds no PEM private key (-----BEGIN PRIVATE KEY-----)"))
        }
        return .success((certificatePEM, keyPEM))
    }

    /// The token in `path`, whitespace around it removed; refused when the file is missing, empty, or readable by
    /// others than its owner.
    static func readToken(_ path: String) -> Result<String, CommandRefusal> {
        let data: Data
        switch readOwnersOnly(path, option: "--token-file") {
        case .success(let read): data = read
        case .failure(let refusal): return .failure(refusal)
        }
        let token = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard token.count >= 16 else {
            return .failure(
                CommandRefusal("--token-file \(path) holds fewer than 16 characters; write a longer secret"))
        }
        return .success(token)
    }
}

extension CommandLineTool {
    /// The bytes of a secret's file that `option` names; refused when it cannot be read or others than its owner may
    /// read it.
    static func readOwnersOnly(_ path: String, option: String) -> Result<Data, CommandRefusal> {
        var info = stat()
        guard stat(path, &info) == 0, let data = FileManager.default.contents(atPath: path) else {
            return .failure(CommandRefusal("\(option) \(path) cannot be read"))
        }
        guard info.st_mode & 0o077 == 0 else {
            return .failure(
                CommandRefusal(
                    "\(option) \(path) can be read by others than its owner (mode "
                        + String(info.st_mode & 0o777, radix: 8) + "); chmod 600 it"))
        }
        return .success(data)
    }
}
