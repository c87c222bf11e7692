import Foundation

/// A throwaway PostgreSQL server for tests, the way packagers' test suites start one: `initdb` into a temporary
/// directory as an unprivileged user (`postgres` when the tests run as root), then `postgres` on a free loopback port
/// with its socket in that directory, as a child that stops and removes its files when its standard input closes —
/// at ``stop()``, or when the test process ends however it ends.
///
/// When ``environmentVariable`` is set, ``url`` is its value and nothing is started: CI or a developer may point the
/// suite at a server of their own.
public final class PostgresServer: @unchecked Sendable {
    /// The server could not be started: no PostgreSQL binaries, or `initdb` or the server failed.
    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// Names a server to use instead of starting one: a libpq URL with a role allowed to create tables.
    public static let environmentVariable = "CLOUDSYNC_TEST_POSTGRES_URL"

    /// The libpq URL of the server, with its role and password.
    public let url: String
    /// The role's password (tests check no error or report shows it).
    public let password: String
    /// The port it listens on, on 127.0.0.1.
    public let port: Int
    private let process: Process?
    private let input: Pipe?

    /// The server ``environmentVariable`` names, or a new one, started on a thread of its own (initdb takes seconds).
    public static func start() async throws -> PostgresServer {
        try await offPool { try PostgresServer() }
    }

    private static let sharedServer = Task { try await start() }

    /// One server for the whole test process, started by the first test that asks; tests sharing it keep apart by
    /// using schemas or tables of their own (``uniqueName(_:)``).
    public static func shared() async throws -> PostgresServer { try await sharedServer.value }

    /// A name no other test uses: `prefix` and eight hexadecimal digits, a valid unquoted PostgreSQL name.
    public static func uniqueName(_ prefix: String = "t") -> String {
        prefix + "_" + UUID().uuidString.prefix(8).lowercased()
    }

    /// ``url`` with another role and password in it.
    public func url(user: String, password: String) -> String {
        var components = URLComponents(string: url)!
        components.user = user
        components.password = password
        return components.string!
    }

    private init() throws {
        if let given = ProcessInfo.processInfo.environment[Self.environmentVariable], !given.isEmpty {
            url = given
            password = URLComponents(string: given)?.password ?? ""
            port = URLComponents(string: given)?.port ?? 5432
            process = nil
            input = nil
            return
        }
        guard let bin = Self.binaries() else {
            throw Unavailable(
                description: "PostgreSQL's server is missing: install Debian's postgresql (make test does), or set "
                    + Self.environmentVariable)
        }
        // initdb refuses to run as root: as root, the server's files belong to the postgres user.
        let asUser = getuid() == 0 ? ["/usr/sbin/runuser", "-u", "postgres", "--"] : []
        let (directory, password) = try Self.initializeDatabase(bin, asUser: asUser)
        port = try Self.freePort()
        let (process, input) = try Self.startServer(bin, in: directory, port: port, asUser: asUser)
        self.process = process
        self.input = input
        self.password = password
        // A generous connect timeout: a loaded machine may take seconds to start a session.
        url = "postgresql://cloudsync:\(password)@127.0.0.1:\(port)/postgres?connect_timeout=60"
        try waitUntilReady(bin, process)
    }

    /// A new data directory made by `initdb` (run through `asUser`) in a temporary directory, and the password of its
    /// role `cloudsync`.
    private static func initializeDatabase(_ bin: String, asUser: [String]) throws -> (
        directory: String, password: String
    ) {
        var template = Array("/tmp/cloudsync-pg-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw Unavailable(description: "could not make a temporary directory")
        }
        let directory = String(cString: made)
        if getuid() == 0 { chown(directory, Self.postgresUID(), gid_t(bitPattern: -1)) }
        let password = String((0..<32).map { _ in "0123456789abcdef".randomElement()! })
        try (password + "\n").write(toFile: directory + "/password", atomically: false, encoding: .utf8)
        chmod(directory + "/password", 0o644)
        // At a low priority: its seconds of work come while the rest of the suite starts.
        let initdb = try ProcessRunner.runBlocking(
            "/usr/bin/nice",
            ["-n", "10"] + asUser + [bin + "/initdb"] + [
                "-D", directory + "/data", "-U", "cloudsync", "--pwfile", directory + "/password",
                "--auth=scram-sha-256", "-E", "UTF8", "--no-sync", "--no-instructions",
            ])
        guard initdb.status == 0 else {
            throw Unavailable(description: "initdb failed: \(initdb.standardError)")
        }
        return (directory, password)
    }

    /// Starts the server on `directory`'s data at `port`, run through `asUser`: the shell that runs it, and the pipe
    /// whose closing stops the server and removes `directory`.
    private static func startServer(_ bin: String, in directory: String, port: Int, asUser: [String]) throws
        -> (Process, Pipe)
    {
        // The shell stops the server (fast shutdown) once its standard input closes. At a lower priority than the
        // tests, so its work yields the processor to the ones whose providers answer within a deadline.
        let server =
            "nice -n 5 '\(bin)/postgres' -D '\(directory)/data' -p \(port) -k '\(directory)' -c listen_addresses=127.0.0.1 "
            + "-c fsync=off -c synchronous_commit=off -c max_connections=200 & pid=$!; cat >/dev/null; "
            + "kill -INT $pid; wait $pid; rm -rf '\(directory)'"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: asUser.first ?? "/bin/sh")
        process.arguments = Array(asUser.dropFirst()) + (asUser.isEmpty ? [] : ["/bin/sh"]) + ["-c", server]
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return (process, input)
    }

    /// Waits until `pg_isready` says the server takes connections; stops it and throws when it does not within a
    /// minute (a loaded machine's), or when `process` ends first.
    private func waitUntilReady(_ bin: String, _ process: Process) throws {
        let deadline = Date().addingTimeInterval(60)
        while true {
            let ready = try ProcessRunner.runBlocking(bin + "/pg_isready", ["-q", "-h", "127.0.0.1", "-p", "\(port)"])
            if ready.status == 0 { break }
            guard Date() < deadline, process.isRunning else {
                stop()
                throw Unavailable(description: "the PostgreSQL server did not start on port \(port)")
            }
            usleep(100_000)
        }
    }

    /// Stops the server, which removes its files, and waits for it.
    public func stop() {
        guard let input, let process else { return }
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }

    deinit { try? input?.fileHandleForWriting.close() }

    /// The newest `/usr/lib/postgresql/<version>/bin` holding `initdb`, or the directory of `initdb` on `PATH`.
    private static func binaries() -> String? {
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        for version in versions.sorted(by: { (Int($0) ?? 0) > (Int($1) ?? 0) }) {
            let bin = "\(root)/\(version)/bin"
            if FileManager.default.isExecutableFile(atPath: bin + "/initdb") { return bin }
        }
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            let path = String(directory)
            if FileManager.default.isExecutableFile(atPath: path + "/initdb")
                && FileManager.default.isExecutableFile(atPath: path + "/postgres")
            {
                return path
            }
        }
        return nil
    }

    private static func postgresUID() -> uid_t {
        getpwnam("postgres").map { $0.pointee.pw_uid } ?? 0
    }

    /// A port nothing listens on now, from the kernel's ephemeral range.
    private static func freePort() throws -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw Unavailable(description: "no socket for a free port") }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(socket, $0, length) == 0 }
        }
        guard bound else { throw Unavailable(description: "could not bind a free port") }
        withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(socket, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
