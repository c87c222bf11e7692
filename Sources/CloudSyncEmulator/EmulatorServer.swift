import CloudSyncHTTP
import CloudSyncHTTPServer
import Foundation

/// One emulated cloud (Google Drive, CloudKit) served by an ``EmulatorServer``.
///
/// A service registers its routes on the shared server, says which URLs a client needs (they go in the start line
/// `cloudsync-emulator` prints), and turns its state into JSON and back, so `--data DIR` keeps it across restarts.
/// Handlers run on the server's connection threads, several at once: a service guards its state itself.
public protocol EmulatorService: AnyObject, Sendable {
    /// The service's key in the start line and the name of its data file (`drive` → `DIR/drive.json`).
    var name: String { get }
    /// Adds the service's routes to `server`, whose `LoopbackHTTPServer.baseURL` is where clients reach it.
    func register(on server: LoopbackHTTPServer)
    /// What a client needs to reach the service on `baseURL` (endpoints, test credentials), by name.
    func urls(baseURL: URL) -> [String: String]
    /// The service's state as JSON.
    func savedState() throws -> Data
    /// Replaces the service's state with one ``savedState()`` returned (possibly by an earlier process).
    func restoreState(from data: Data) throws
    /// Keeps what is too large for its JSON state (CloudKit's asset bytes) in files under `directory`, the data
    /// directory; called before ``restoreState(from:)``. By default it keeps nothing there.
    func useDataDirectory(_ directory: String) throws
}

extension EmulatorService {
    /// Keeps nothing outside the JSON state.
    public func useDataDirectory(_ directory: String) throws {}
}

/// Why the emulator could not start, load or save; the message names the file or port and what to do.
public struct EmulatorError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, for people.
    public let message: String

    /// An error saying `message`.
    public init(_ message: String) { self.message = message }

    /// The message.
    public var description: String { message }
}

/// One loopback HTTP server hosting emulator services, with their state kept in a data directory.
///
/// Starting restores each service from `DIR/<name>.json` when there is one; ``save()`` (and ``stop()``) write every
/// service's state back, each file replaced atomically (written beside it, then renamed) with mode 0600, since it
/// holds the tokens the emulator issued.
///
/// With TLS it serves HTTPS on a certificate made at start (see `TLSIdentity`) and writes the certificate of the
/// authority that signed it, which clients trust, to ``caFile``: `DIR/tls-ca.pem` in the data directory, else in a
/// directory of its own under the temporary directory, removed by ``stop()``. The keys stay in memory.
public final class EmulatorServer: Sendable {
    /// The server every service is registered on.
    public let server: LoopbackHTTPServer
    /// The services, in the order given.
    public let services: [any EmulatorService]
    /// Where state is kept; nil keeps it in memory only.
    public let dataDirectory: String?
    /// The PEM file of the certificate authority a client trusts to reach the server over TLS; nil without TLS.
    public let caFile: String?
    /// The directory made for ``caFile`` when there is no data directory; ``stop()`` removes it.
    private let madeDirectory: String?

    /// The CA file's name in the data directory.
    public static let caFileName = "tls-ca.pem"

    /// Restores the services from `dataDirectory` (creating it, 0700, when missing), listens on `127.0.0.1:port`
    /// (0: a free port), over TLS when `tls` (writing ``caFile``), registers every service and applies `faultPlan`.
    public init(
        services: [any EmulatorService], port: UInt16 = 0, dataDirectory: String? = nil,
        faultPlan: HTTPFaultPlan = HTTPFaultPlan(), tls: Bool = false
    ) throws(EmulatorError) {
        self.services = services
        self.dataDirectory = dataDirectory
        if let dataDirectory {
            do {
                try FileManager.default.createDirectory(
                    atPath: dataDirectory, withIntermediateDirectories: true,
                    attributes: [.posixPermissions: 0o700])
            } catch {
                throw EmulatorError(
                    "cannot create the data directory \(dataDirectory): \(Self.reason(error)); give --data a directory "
                        + "that can be written")
            }
            for service in services {
                let path = Self.file(of: service, in: dataDirectory)
                do {
                    try service.useDataDirectory(dataDirectory)
                } catch {
                    throw EmulatorError(
                        "cannot keep \(service.name)'s files in \(dataDirectory): \(Self.reason(error)); give --data a "
                            + "directory that can be written")
                }
                guard FileManager.default.fileExists(atPath: path) else { continue }
                do {
                    try service.restoreState(from: Data(contentsOf: URL(fileURLWithPath: path)))
                } catch {
                    throw EmulatorError(
                        "cannot read \(path): \(Self.reason(error)); move it away to start \(service.name) empty")
                }
            }
        }
        var options = LoopbackHTTPServer.Options()
        if tls {
            let identity: TLSIdentity
            do {
                identity = try TLSIdentity.throwaway()
            } catch {
                throw EmulatorError("cannot make the TLS certificate: \(error.message)")
            }
            options.tls = identity
            (caFile, madeDirectory) = try Self.writeCertificateAuthority(identity, in: dataDirectory)
        } else {
            (caFile, madeDirectory) = (nil, nil)
        }
        do {
            server = try LoopbackHTTPServer(port: port, options: options)
        } catch {
            if let madeDirectory { try? FileManager.default.removeItem(atPath: madeDirectory) }
            throw EmulatorError(
                "cannot listen on 127.0.0.1:\(port): \(error.description)"
                    + (port == 0 ? "" : "; pick another --port, or leave it out for a free one"))
        }
        for service in services { service.register(on: server) }
        server.setFaultPlan(faultPlan)
    }

    /// `http://127.0.0.1:PORT` (`https://` with TLS).
    public var baseURL: URL { server.baseURL }

    /// Each service's URLs, by service name; with TLS each also names ``caFile`` (`caFile`).
    public var urls: [String: [String: String]] {
        Dictionary(
            uniqueKeysWithValues: services.map { service in
                var urls = service.urls(baseURL: server.baseURL)
                if let caFile { urls["caFile"] = caFile }
                return (service.name, urls)
            })
    }

    /// The one JSON line `cloudsync-emulator` prints when it is ready: ``urls``, keys sorted, slashes unescaped.
    public var startLine: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: (try? encoder.encode(urls)) ?? Data("{}".utf8), as: UTF8.self)
    }

    /// Writes every service's state to the data directory; does nothing without one.
    public func save() throws(EmulatorError) {
        guard let dataDirectory else { return }
        for service in services {
            let path = Self.file(of: service, in: dataDirectory)
            let temporary = dataDirectory + "/.\(service.name).json.tmp"
            do {
                let data = try service.savedState()
                guard
                    FileManager.default.createFile(
                        atPath: temporary, contents: data, attributes: [.posixPermissions: 0o600])
                else { throw CocoaError(.fileWriteUnknown) }
                guard rename(temporary, path) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            } catch {
                try? FileManager.default.removeItem(atPath: temporary)
                throw EmulatorError("cannot save \(path): \(Self.reason(error))")
            }
        }
    }

    /// Stops serving (every connection closed), saves every service's state and removes the CA file's directory
    /// when the server made one.
    public func stop() throws(EmulatorError) {
        server.stop()
        if let madeDirectory { try? FileManager.default.removeItem(atPath: madeDirectory) }
        try save()
    }

    /// Writes `identity`'s authority certificate (public; 0644) to `directory` (replacing an older one atomically) or,
    /// without one, to a new directory under the temporary directory; the file, and the directory it made.
    private static func writeCertificateAuthority(
        _ identity: TLSIdentity, in directory: String?
    ) throws(EmulatorError) -> (file: String, madeDirectory: String?) {
        var made: String?
        if directory == nil {
            var template = Array((NSTemporaryDirectory() + "/cloudsync-emulator-XXXXXX").utf8CString)
            guard let path = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
                throw EmulatorError(
                    "cannot make a directory for the TLS CA file: \(String(cString: strerror(errno))); give --data "
                        + "a directory that can be written")
            }
            made = String(cString: path)
        }
        let target = (directory ?? made!) + "/" + caFileName
        let temporary = (directory ?? made!) + "/." + caFileName + ".tmp"
        guard
            FileManager.default.createFile(
                atPath: temporary, contents: Data(identity.authorityCertificatePEM.utf8),
                attributes: [.posixPermissions: 0o644]),
            rename(temporary, target) == 0
        else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(atPath: temporary)
            if let made { try? FileManager.default.removeItem(atPath: made) }
            throw EmulatorError("cannot write the TLS CA file \(target): \(reason)")
        }
        return (target, made)
    }

    private static func file(of service: any EmulatorService, in directory: String) -> String {
        directory + "/\(service.name).json"
    }

    private static func reason(_ error: any Error) -> String {
        if let error = error as? EmulatorError { return error.message }
        if let error = error as? DecodingError { return describe(error) }
        if let error = error as? POSIXError { return String(cString: strerror(error.code.rawValue)) }
        if let error = error as? CocoaError, let underlying = error.userInfo[NSUnderlyingErrorKey] as? NSError,
            underlying.domain == NSPOSIXErrorDomain
        {
            return String(cString: strerror(Int32(underlying.code)))
        }
        return "\(error)"
    }
}

/// A decoding error as one sentence: what is wrong, and where (`rules[2].status`).
func describe(_ error: DecodingError) -> String {
    func path(_ keys: [any CodingKey]) -> String {
        keys.reduce("") { text, key in
            if let index = key.intValue { return text + "[\(index)]" }
            return text.isEmpty ? key.stringValue : text + "." + key.stringValue
        }
    }
    switch error {
    case .keyNotFound(let key, let context):
        let place = path(context.codingPath)
        return "missing field '\(key.stringValue)'" + (place.isEmpty ? "" : " in \(place)")
    case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
        return "\(path(context.codingPath)): expected \(describe(type))"
    case .dataCorrupted(let context):
        let place = path(context.codingPath)
        return (place.isEmpty ? "" : "\(place): ") + context.debugDescription
    @unknown default:
        return "\(error)"
    }
}

private func describe(_ type: Any.Type) -> String {
    switch type {
    case is Int.Type, is Int64.Type, is UInt64.Type: "a whole number"
    case is Double.Type: "a number"
    case is Bool.Type: "true or false"
    case is String.Type: "text"
    case is [Any].Type: "a list"
    default: "\(type)".hasPrefix("Array") ? "a list" : "a mapping"
    }
}
