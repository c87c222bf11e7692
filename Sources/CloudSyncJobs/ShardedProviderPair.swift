import CloudSyncPipeline

/// The configuration of a job between two providers that may be split into shards: it reads `from`, and writes to or
/// compares with `to`.
protocol ShardedProviderPair {
    var from: String { get }
    var to: String { get }
    var shards: Int { get }
}

extension JobType where Configuration: ShardedProviderPair {
    /// Ranges of `from`'s keys.
    ///
    /// A run that reads both sides lists `to`'s keys in its range too, so a key only `to` holds falls in one range as
    /// well.
    func sharding(of configuration: Configuration) -> JobSharding? {
        JobSharding(shards: configuration.shards, source: configuration.from)
    }

    /// The two providers.
    func providers(of configuration: Configuration, store: [String]) -> [String] {
        [configuration.from, configuration.to]
    }
}
