// swift-tools-version: 6.0
import PackageDescription

// What `cloudsync version` says the binary was built from, as C string macros for Sources/CBuildInfo: the git commit
// (with -dirty when tracked files differed from it), that commit's date in UTC and the Swift compiler's version.
// `make release` (and so `make install`) sets the variables from git and `swift --version`; the commit's date rather
// than the time of the build, so two builds of one commit are the same bytes. A plain `swift build` sets none, and
// the binary says `unknown` rather than guess. SwiftPM evaluates this manifest again whenever they change (it would
// not for Context.gitInformation, which it keeps from the first build: a later commit would show the old hash).
// A value with any character a hash, a date or a version would not have is dropped, so it cannot end the C string.
let buildInfo: [CSetting] = ["CLOUDSYNC_COMMIT", "CLOUDSYNC_COMMIT_DATE", "CLOUDSYNC_SWIFT_VERSION"].map { name in
    let value = Context.environment[name] ?? ""
    let plain = value.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-.:+".contains($0)) }
    return .define(name, to: "\"" + (plain ? value : "") + "\"")
}

// Layers, lowest first: C libraries -> their Swift faces -> the core (`CloudSync`) -> the CLI -> the executable.
// Dependencies point down only; docs/ARCHITECTURE.md draws the floors (scripts/layers.py, checked by a test).
let package = Package(
    name: "CloudSync",
    // One library per concern a consumer picks, as GRDB and swift-log declare theirs: each names its one target and
    // lets SwiftPM choose static or dynamic linking; what the target depends on comes with it.
    // Tests/ConsumerPackage depends on these by path and builds the README's examples (`make test`).
    products: [
        .library(name: "CloudSync", targets: ["CloudSync"]),
        .library(name: "CloudSyncLocal", targets: ["CloudSyncLocal"]),
        .library(name: "CloudSyncCrypto", targets: ["CloudSyncCrypto"]),
        .library(name: "CloudSyncPipeline", targets: ["CloudSyncPipeline"]),
        .library(name: "CloudSyncPipelineState", targets: ["CloudSyncPipelineState"]),
        .library(name: "CloudSyncJobs", targets: ["CloudSyncJobs"]),
        .library(name: "CloudSyncRunner", targets: ["CloudSyncRunner"]),
        .library(name: "CloudSyncHTTP", targets: ["CloudSyncHTTP"]),
        .library(name: "CloudSyncHTTPServer", targets: ["CloudSyncHTTPServer"]),
        .library(name: "CloudSyncAuth", targets: ["CloudSyncAuth"]),
        .library(name: "CloudSyncEmulator", targets: ["CloudSyncEmulator"]),
        .library(name: "CloudSyncS3", targets: ["CloudSyncS3"]),
        .library(name: "CloudSyncCloudKit", targets: ["CloudSyncCloudKit"]),
        .library(name: "CloudSyncDrive", targets: ["CloudSyncDrive"]),
        .library(name: "CloudSyncTesting", targets: ["CloudSyncTesting"]),
        .executable(name: "cloudsync", targets: ["cloudsync"]),
        .executable(name: "cloudsync-emulator", targets: ["cloudsync-emulator"]),
    ],
    targets: [
        // C libraries, found with pkg-config and installed from Debian's packages.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CPostgres", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(name: "CYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),
        // OpenSSL's libcrypto, for MD5 (the `Content-MD5` S3 requires) and its version in `cloudsync version`;
        // libsodium has no MD5, on purpose.
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // OpenSSL's libssl (and the libcrypto it stands on), for the loopback server's HTTPS: TLS over its sockets and
        // the throwaway certificate authority `cloudsync-emulator --tls` makes at start.
        .systemLibrary(name: "CSSL", pkgConfig: "libssl", providers: [.apt(["libssl-dev"])]),
        // libcurl, which FoundationNetworking's URLSession already loads for every HTTP request: only so that
        // `cloudsync version` can ask the loaded copy its version and TLS library. The CLI alone imports it, so the
        // library products need no curl headers.
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // libmicrohttpd (with GnuTLS), the HTTP server `cloudsync serve` faces the network with: its parser, its limits on
        // connections, memory and idle time, and its TLS.
        .systemLibrary(
            name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        // libzstd, which compresses backup repositories' objects; zlib, whose raw inflate reads the DEFLATE objects
        // format 2 repositories hold.
        .systemLibrary(name: "CZstd", pkgConfig: "libzstd", providers: [.apt(["libzstd-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        // libjq, which runs the jq programs of `transform` and `filter` steps. Debian's libjq-dev ships no pkg-config
        // file, so the module map names the library itself.
        .systemLibrary(name: "CJQ", providers: [.apt(["libjq-dev"])]),
        // What the binary was built from, for `cloudsync version` (the `buildInfo` settings at the top of Package.swift).
        .target(name: "CBuildInfo", cSettings: buildInfo),
        // glibc's allocator settings from <malloc.h>, which the Glibc module leaves out (the runner fixes the mmap
        // threshold so a backup's pack-sized buffers go back to the system when freed).
        .systemLibrary(name: "CMalloc"),

        // Files a person named, written whole through POSIX calls (create without replacing, replace through a staged
        // file, write all of a buffer): below every module that writes such files, libsodium's face included.
        .target(name: "CloudSyncFiles"),

        // Thin Swift faces of the C libraries, below: no C type reaches their public API.

        // libsqlite3's face: one connection per database, prepared statements, transactions, named migrations.
        .target(name: "CloudSyncSQLite", dependencies: ["CSQLite"]),
        // libpq's face: a session per connection on a queue of its own, bound parameters, errors naming the server.
        .target(name: "CloudSyncPostgres", dependencies: ["CPostgres"]),
        // libsodium's face: sealing, Argon2id, hashes, secure random bytes, secret bytes and key files.
        .target(name: "CloudSyncSodium", dependencies: ["CSodium", "CloudSyncFiles"]),
        // libyaml's face: one document to a node tree with line:column marks, under a node budget.
        .target(name: "CloudSyncYAML", dependencies: ["CYAML"]),
        // libcrypto's face: MD5, for the `Content-MD5` S3 requires, never for security.
        .target(name: "CloudSyncOpenSSL", dependencies: ["CCrypto"]),

        // libzstd's face: a buffer compressed into one frame, frames decompressed up to a bound.
        .target(name: "CloudSyncZstd", dependencies: ["CZstd"]),
        // zlib's face: raw DEFLATE inflated up to a bound, for what format 2 backup repositories hold.
        .target(name: "CloudSyncZlib", dependencies: ["CZlib"]),
        // libjq's face: programs compiled in a sandboxing prelude, and run on values in a worker process of their own
        // (`cloudsync-jq`) under CPU and memory limits.
        .target(name: "CloudSyncJQ", dependencies: ["CJQ"]),
        // `cloudsync-jq`: that worker, which `make install` puts in libexec/cloudsync.
        .executableTarget(name: "cloudsync-jq", dependencies: ["CloudSyncJQ"]),

        // The core library: the store over providers, the provider contract, resolvers, the outbox, keys, codecs,
        // clocks and errors.
        .target(name: "CloudSync", dependencies: ["CloudSyncFiles", "CloudSyncSodium"]),

        // HTTP for the REST providers: deadline -> retry -> auth -> transport (URLSession over libcurl); nothing above it
        // needs URLSession. FoundationNetworking comes with the toolchain's Foundation, so it is no package dependency.
        .target(name: "CloudSyncHTTP", dependencies: ["CloudSync"]),

        // HTTP servers: a loopback HTTP/1.1 server on POSIX sockets with routes and fault plans, plain or over TLS, which
        // the emulators and the tests serve from and `cloudsync login` receives its OAuth redirect on; and the server
        // `cloudsync serve` faces the network with, on libmicrohttpd.
        .target(name: "CloudSyncHTTPServer", dependencies: ["CloudSync", "CloudSyncHTTP", "CSSL", "CMicroHTTPD"]),

        // Sign-in flows (OAuth 2.0 for installed apps with PKCE, CloudKit's web sign-in) and the authenticators that
        // use what they yield; the remote providers plug their factories' sign-in into these.
        .target(
            name: "CloudSyncAuth",
            dependencies: ["CloudSync", "CloudSyncHTTP", "CloudSyncHTTPServer", "CloudSyncSodium"]),

        // The Google and CloudKit emulators `cloudsync-emulator` serves (and the tests start in-process): one loopback
        // server, a service per emulated cloud, state saved as JSON, fault plans from a file.
        .target(
            name: "CloudSyncEmulator",
            dependencies: [
                "CloudSync", "CloudSyncHTTP", "CloudSyncHTTPServer", "CloudSyncOpenSSL", "CloudSyncSodium",
                "CloudSyncYAML",
            ]),
        // `cloudsync-emulator`: the emulators as a process of their own, for people and for the tests that need one.
        .executableTarget(name: "cloudsync-emulator", dependencies: ["CloudSyncEmulator"]),

        // The `s3` provider: any S3-compatible bucket over CloudSyncHTTP, signed with SigV4.
        .target(
            name: "CloudSyncS3", dependencies: ["CloudSync", "CloudSyncHTTP", "CloudSyncSodium", "CloudSyncOpenSSL"]),

        // The CloudKit bridge (CloudKit Web Services: private database, one custom zone) and the `cloudKit` provider
        // on it.
        .target(name: "CloudSyncCloudKit", dependencies: ["CloudSync", "CloudSyncHTTP", "CloudSyncAuth"]),

        // The `googleDrive` provider: a Google account's Drive app data folder over CloudSyncHTTP, signed in with
        // CloudSyncAuth's OAuth flow.
        .target(name: "CloudSyncDrive", dependencies: ["CloudSync", "CloudSyncHTTP", "CloudSyncAuth"]),

        // Encryption at rest: the libsodium envelope codec and its key sources.
        .target(name: "CloudSyncCrypto", dependencies: ["CloudSync", "CloudSyncSodium"]),
        // Encrypted, content-addressed, versioned backups of key sets, kept in any provider.
        .target(
            name: "CloudSyncBackup", dependencies: ["CloudSync", "CloudSyncSodium", "CloudSyncZlib", "CloudSyncZstd"]),

        // Local persistence and providers on SQLite and the file system.
        .target(
            name: "CloudSyncLocal", dependencies: ["CloudSync", "CloudSyncFiles", "CloudSyncSQLite", "CloudSyncSodium"]),

        // The pipeline language and the job contract: YAML -> checked spec -> plan -> compiled store, the job type
        // protocol and its registry, the state protocols and the report vocabulary. No provider, no SQLite, no libpq:
        // a program that only loads and checks pipelines links none of them.
        .target(
            name: "CloudSyncPipeline",
            dependencies: [
                "CloudSync", "CloudSyncYAML", "CloudSyncSodium", "CloudSyncCrypto", "CloudSyncBackup", "CloudSyncJQ",
            ]),

        // Where a pipeline's state is kept: a SQLite file in its state directory, or a PostgreSQL schema that runners
        // on several machines share (shards, set-aside keys, the shared outbox, kept reports, run locks, slot claims);
        // and the accounts file named sign-ins live in.
        .target(
            name: "CloudSyncPipelineState",
            dependencies: [
                "CloudSync", "CloudSyncPipeline", "CloudSyncLocal", "CloudSyncSQLite", "CloudSyncPostgres",
                "CloudSyncSodium",
            ]),

        // The built-in job types, one file each, with what they share: key merging and the export-file format. They
        // see state only through the job context.
        .target(
            name: "CloudSyncJobs",
            dependencies: [
                "CloudSync", "CloudSyncPipeline", "CloudSyncBackup", "CloudSyncCrypto", "CloudSyncLocal",
                "CloudSyncSQLite", "CloudSyncSodium", "CloudSyncJQ",
            ]),

        // Running pipelines: the run session, runner, executor, sharded runs, the shared outbox drain, reports and
        // Prometheus text, history, credentials; and the assembly lists of built-in providers and state stores.
        .target(
            name: "CloudSyncRunner",
            dependencies: [
                "CloudSync", "CloudSyncPipeline", "CloudSyncPipelineState", "CloudSyncJobs", "CloudSyncLocal",
                "CloudSyncS3", "CloudSyncCloudKit", "CloudSyncDrive", "CloudSyncSodium", "CMalloc",
            ]),

        // `cloudsync serve`: pipelines on their schedules, outbox flushes on timers, and the HTTP face (health,
        // Prometheus metrics, the JSON API, the status page) on the loopback server.
        .target(
            name: "CloudSyncService",
            dependencies: [
                "CloudSync", "CloudSyncPipeline", "CloudSyncRunner", "CloudSyncHTTP", "CloudSyncHTTPServer",
                "CloudSyncSodium",
            ]),

        // The command line: argument parsing, exit codes, what people see.
        .target(
            name: "CloudSyncCLI",
            dependencies: [
                "CloudSync", "CloudSyncCrypto", "CloudSyncPipeline", "CloudSyncPipelineState", "CloudSyncJobs",
                "CloudSyncRunner", "CloudSyncCloudKit", "CloudSyncBackup", "CloudSyncService", "CloudSyncHTTPServer",
                "CBuildInfo", "CloudSyncFiles",
                // Only for `cloudsync version`, which names the C libraries' versions through their faces (libcurl's
                // directly: it has no face, as URLSession is the only one that calls it).
                "CloudSyncSQLite", "CloudSyncSodium", "CloudSyncYAML", "CloudSyncOpenSSL", "CloudSyncPostgres", "CCurl",
            ]),
        // `cloudsync`: the command line's `main.swift`.
        .executableTarget(name: "cloudsync", dependencies: ["CloudSyncCLI", "CloudSyncRunner"]),
        // The second process some tests need: a writer to kill, a concurrent writer (see CloudSyncLocalTests), an HTTP
        // client run with proxy variables of its own (see CloudSyncHTTPTests).
        .executableTarget(
            name: "cloudsync-test-fixture",
            dependencies: ["CloudSync", "CloudSyncHTTP", "CloudSyncLocal", "CloudSyncTesting"]),
        // `make bench`: throughput figures, never run by the tests.
        .executableTarget(
            name: "cloudsync-bench",
            dependencies: [
                "CloudSync", "CloudSyncSQLite", "CloudSyncSodium", "CloudSyncYAML", "CloudSyncLocal", "CloudSyncCrypto",
                "CloudSyncTesting", "CloudSyncHTTP", "CloudSyncS3", "CloudSyncPipeline", "CloudSyncRunner", "CSodium",
                "CloudSyncAuth",
                "CloudSyncEmulator", "CloudSyncDrive", "CloudSyncCloudKit", "CloudSyncBackup", "CCrypto",
            ]),

        // The fuzzers' entry points (YAML, pipeline loader, envelope decoder, export reader, the decompressors):
        // driven by libFuzzer in `make fuzz`, replayed over the kept corpus by CloudSyncReliabilityTests.
        .target(
            name: "CloudSyncFuzzing",
            dependencies: [
                "CloudSync", "CloudSyncCrypto", "CloudSyncHTTPServer", "CloudSyncJobs", "CloudSyncPipeline",
                "CloudSyncRunner", "CloudSyncSodium", "CloudSyncYAML", "CloudSyncZlib", "CloudSyncZstd",
            ]),

        // Test support shipped as a normal target: temporary directories, test doubles, a test transport; re-exports the
        // loopback server and the emulators.
        .target(
            name: "CloudSyncTesting",
            dependencies: [
                "CloudSync", "CloudSyncHTTP", "CloudSyncHTTPServer", "CloudSyncEmulator", "CloudSyncBackup",
                "CloudSyncCrypto", "CloudSyncSodium",
            ]),

        .testTarget(name: "CloudSyncSQLiteTests", dependencies: ["CloudSyncSQLite", "CloudSyncTesting"]),
        .testTarget(name: "CloudSyncPostgresTests", dependencies: ["CloudSyncPostgres", "CloudSyncTesting"]),
        .testTarget(name: "CloudSyncSodiumTests", dependencies: ["CloudSyncSodium", "CloudSyncTesting"]),
        .testTarget(name: "CloudSyncYAMLTests", dependencies: ["CloudSyncYAML"]),
        .testTarget(name: "CloudSyncZstdTests", dependencies: ["CloudSync", "CloudSyncZstd", "CloudSyncTesting"]),
        .testTarget(name: "CloudSyncJQTests", dependencies: ["CloudSync", "CloudSyncJQ", "CloudSyncTesting"]),
        .testTarget(name: "CloudSyncZlibTests", dependencies: ["CloudSync", "CloudSyncZlib", "CloudSyncTesting"]),
        .testTarget(name: "CloudSyncOpenSSLTests", dependencies: ["CloudSyncOpenSSL"]),
        // The pipeline only for its PostgreSQL outbox storage, which the outbox's property test also runs against.
        .testTarget(
            name: "CloudSyncTests",
            dependencies: [
                "CloudSync", "CloudSyncPipeline", "CloudSyncPipelineState", "CloudSyncJobs", "CloudSyncRunner",
                "CloudSyncTesting",
            ]),
        .testTarget(
            name: "CloudSyncBackupTests",
            dependencies: ["CloudSync", "CloudSyncBackup", "CloudSyncCrypto", "CloudSyncSodium", "CloudSyncTesting"]),
        .testTarget(
            name: "CloudSyncCLITests",
            dependencies: [
                "CloudSync", "CloudSyncAuth", "CloudSyncCLI", "CloudSyncHTTP", "CloudSyncLocal", "CloudSyncPipeline",
                "CloudSyncPipelineState", "CloudSyncJobs", "CloudSyncRunner",
                "CloudSyncPostgres", "CloudSyncS3", "CloudSyncSQLite", "CloudSyncTesting", "cloudsync",
                "CloudSyncSodium", "CloudSyncYAML", "CloudSyncOpenSSL",
            ]),
        .testTarget(
            name: "CloudSyncServiceTests",
            dependencies: [
                "CloudSync", "CloudSyncHTTP", "CloudSyncHTTPServer", "CloudSyncLocal", "CloudSyncPipeline",
                "CloudSyncPipelineState", "CloudSyncJobs", "CloudSyncRunner",
                "CloudSyncService", "CloudSyncTesting",
            ]),
        .testTarget(name: "CloudSyncTestingTests", dependencies: ["CloudSyncHTTP", "CloudSyncTesting"]),
        .testTarget(
            name: "CloudSyncHTTPTests",
            dependencies: ["CloudSync", "CloudSyncHTTP", "CloudSyncTesting", "cloudsync-test-fixture"]),
        .testTarget(
            name: "CloudSyncAuthTests",
            dependencies: ["CloudSync", "CloudSyncAuth", "CloudSyncHTTP", "CloudSyncTesting"]),
        .testTarget(
            name: "CloudSyncEmulatorTests",
            dependencies: ["CloudSync", "CloudSyncAuth", "CloudSyncHTTP", "CloudSyncTesting", "cloudsync-emulator"]),
        .testTarget(
            name: "CloudSyncS3Tests",
            dependencies: [
                "CloudSync", "CloudSyncHTTP", "CloudSyncLocal", "CloudSyncS3", "CloudSyncSodium", "CloudSyncTesting",
                "CloudSyncBackup", "CloudSyncCrypto", "CloudSyncPostgres", "cloudsync",
            ]),
        .testTarget(
            name: "CloudSyncCloudKitTests",
            dependencies: [
                "CloudSync", "CloudSyncAuth", "CloudSyncCloudKit", "CloudSyncHTTP", "CloudSyncPipeline",
                "CloudSyncPipelineState", "CloudSyncJobs", "CloudSyncRunner",
                "CloudSyncTesting",
            ]),
        .testTarget(
            name: "CloudSyncDriveTests",
            dependencies: [
                "CloudSync", "CloudSyncAuth", "CloudSyncCLI", "CloudSyncDrive", "CloudSyncHTTP", "CloudSyncPipeline",
                "CloudSyncPipelineState", "CloudSyncJobs", "CloudSyncRunner",
                "CloudSyncTesting", "cloudsync", "cloudsync-emulator",
            ]),
        .testTarget(
            name: "CloudSyncPipelineTests",
            dependencies: [
                "CloudSync", "CloudSyncPipeline", "CloudSyncPipelineState", "CloudSyncJobs", "CloudSyncRunner",
                "CloudSyncPostgres", "CloudSyncSQLite", "CloudSyncTesting",
            ]),
        .testTarget(
            name: "CloudSyncCryptoTests",
            dependencies: ["CloudSync", "CloudSyncCrypto", "CloudSyncSodium", "CloudSyncTesting"]),
        .testTarget(
            name: "CloudSyncReliabilityTests",
            dependencies: [
                "CloudSync", "CloudSyncCloudKit", "CloudSyncCrypto", "CloudSyncEmulator", "CloudSyncFuzzing",
                "CloudSyncPipeline", "CloudSyncPipelineState", "CloudSyncJobs", "CloudSyncRunner", "CloudSyncS3",
                "CloudSyncTesting", "CloudSyncYAML", "cloudsync",
            ]),
        .testTarget(
            name: "CloudSyncLocalTests",
            dependencies: [
                "CloudSync", "CloudSyncLocal", "CloudSyncSQLite", "CloudSyncTesting", "cloudsync-test-fixture",
            ]),
    ],
    swiftLanguageModes: [.v6]
)

// `make fuzz` sets CLOUDSYNC_FUZZ=1 and builds with `--sanitize=fuzzer`: only then does the libFuzzer driver exist,
// since its entry points replace `main` (libFuzzer brings its own), which no ordinary build could link.
if Context.environment["CLOUDSYNC_FUZZ"] == "1" {
    package.targets.append(
        .executableTarget(
            name: "cloudsync-fuzz", dependencies: ["CloudSyncFuzzing"],
            swiftSettings: [.unsafeFlags(["-parse-as-library"])]))
}
