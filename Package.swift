// swift-tools-version: 6.0
import PackageDescription

// Layers, lowest first: C libraries -> their Swift faces -> the core (`CloudSync`) -> the CLI -> the executable.
// Dependencies point down only; see ../shared/DESIGN.md.
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
        .library(name: "CloudSyncHTTP", targets: ["CloudSyncHTTP"]),
        .library(name: "CloudSyncHTTPServer", targets: ["CloudSyncHTTPServer"]),
        .library(name: "CloudSyncTesting", targets: ["CloudSyncTesting"]),
        .executable(name: "cloudsync", targets: ["cloudsync"]),
    ],
    targets: [
        // C libraries, found with pkg-config and installed from Debian's packages.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(name: "CYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),

        // Thin Swift faces: no C type reaches their public API.
        .target(name: "CloudSyncSQLite", dependencies: ["CSQLite"]),
        .target(name: "CloudSyncSodium", dependencies: ["CSodium"]),
        .target(name: "CloudSyncYAML", dependencies: ["CYAML"]),

        // The core library.
        .target(name: "CloudSync", dependencies: ["CloudSyncSodium"]),

        // HTTP for the REST providers: deadline -> retry -> auth -> transport (URLSession over libcurl); nothing above it
        // needs URLSession. FoundationNetworking comes with the toolchain's Foundation, so it is no package dependency.
        .target(name: "CloudSyncHTTP", dependencies: ["CloudSync"]),

        // A loopback HTTP/1.1 server on POSIX sockets with routes and fault plans: the emulators and the tests serve
        // from it, and `cloudsync login` receives its OAuth redirect on it.
        .target(name: "CloudSyncHTTPServer", dependencies: ["CloudSyncHTTP"]),

        // Encryption at rest: the libsodium envelope codec and its key sources.
        .target(name: "CloudSyncCrypto", dependencies: ["CloudSync", "CloudSyncSodium"]),

        // Local persistence and providers on SQLite and the file system.
        .target(name: "CloudSyncLocal", dependencies: ["CloudSync", "CloudSyncSQLite", "CloudSyncSodium"]),

        // Pipeline files: YAML -> checked spec -> compiled store and jobs; no side effects until run.
        .target(
            name: "CloudSyncPipeline",
            dependencies: [
                "CloudSync", "CloudSyncYAML", "CloudSyncSodium", "CloudSyncCrypto", "CloudSyncLocal", "CloudSyncSQLite",
            ]),

        // The command line: argument parsing, exit codes, what people see.
        .target(
            name: "CloudSyncCLI", dependencies: ["CloudSync", "CloudSyncCrypto", "CloudSyncPipeline"]),
        .executableTarget(name: "cloudsync", dependencies: ["CloudSyncCLI"]),
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
                "CloudSyncTesting",
            ]),

        // Test support shipped as a normal target: temporary directories, test doubles, a test transport; re-exports the
        // loopback server.
        .target(name: "CloudSyncTesting", dependencies: ["CloudSync", "CloudSyncHTTP", "CloudSyncHTTPServer"]),

        .testTarget(name: "CloudSyncSQLiteTests", dependencies: ["CloudSyncSQLite", "CloudSyncTesting"]),
        .testTarget(name: "CloudSyncSodiumTests", dependencies: ["CloudSyncSodium", "CloudSyncTesting"]),
        .testTarget(name: "CloudSyncYAMLTests", dependencies: ["CloudSyncYAML"]),
        .testTarget(name: "CloudSyncTests", dependencies: ["CloudSync", "CloudSyncTesting"]),
        .testTarget(
            name: "CloudSyncCLITests",
            dependencies: [
                "CloudSync", "CloudSyncCLI", "CloudSyncHTTP", "CloudSyncLocal", "CloudSyncPipeline", "CloudSyncSQLite",
                "CloudSyncTesting",
                "cloudsync",
            ]),
        .testTarget(name: "CloudSyncTestingTests", dependencies: ["CloudSyncHTTP", "CloudSyncTesting"]),
        .testTarget(
            name: "CloudSyncHTTPTests",
            dependencies: ["CloudSync", "CloudSyncHTTP", "CloudSyncTesting", "cloudsync-test-fixture"]),
        .testTarget(
            name: "CloudSyncPipelineTests",
            dependencies: ["CloudSync", "CloudSyncPipeline", "CloudSyncSQLite", "CloudSyncTesting"]),
        .testTarget(
            name: "CloudSyncCryptoTests",
            dependencies: ["CloudSync", "CloudSyncCrypto", "CloudSyncSodium", "CloudSyncTesting"]),
        .testTarget(
            name: "CloudSyncLocalTests",
            dependencies: [
                "CloudSync", "CloudSyncLocal", "CloudSyncSQLite", "CloudSyncTesting", "cloudsync-test-fixture",
            ]),
    ],
    swiftLanguageModes: [.v6]
)
