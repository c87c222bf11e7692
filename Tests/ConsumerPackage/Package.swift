// swift-tools-version: 6.0
import PackageDescription

// A package that uses CloudSync the way an outside consumer does: only through its library products, by path.
// `make test` builds and runs it (scripts/check-consumer.sh); its main.swift holds README.md's Swift examples.
let package = Package(
    name: "ConsumerPackage",
    dependencies: [.package(name: "CloudSync", path: "../..")],
    targets: [
        .executableTarget(
            name: "consumer",
            dependencies: [
                .product(name: "CloudSync", package: "CloudSync"),
                .product(name: "CloudSyncLocal", package: "CloudSync"),
                .product(name: "CloudSyncCrypto", package: "CloudSync"),
                .product(name: "CloudSyncPipeline", package: "CloudSync"),
                .product(name: "CloudSyncPipelineState", package: "CloudSync"),
                .product(name: "CloudSyncJobs", package: "CloudSync"),
                .product(name: "CloudSyncRunner", package: "CloudSync"),
                .product(name: "CloudSyncTesting", package: "CloudSync"),
            ]),
        // Reads and checks pipelines with types of its own, on the pipeline language alone: no provider, no SQLite,
        // no libpq in the binary (scripts/check-consumer.sh looks).
        .executableTarget(
            name: "pipeline-language", dependencies: [.product(name: "CloudSyncPipeline", package: "CloudSync")]),
    ],
    swiftLanguageModes: [.v6]
)
