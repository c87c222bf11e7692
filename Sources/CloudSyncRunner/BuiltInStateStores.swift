import CloudSyncPipeline
import CloudSyncPipelineState

/// The state stores this build of CloudSync ships, as `cloudsync` registers them: one registration line per store.
///
/// A program running pipelines from Swift starts from this registry and adds its own stores to it (see
/// docs/writing-a-state-store.md).
public enum BuiltInStateStores {
    /// Every built-in state store: PostgreSQL for pipelines that declare it, else the state directory.
    public static var registry: StateStoreRegistry {
        var registry = StateStoreRegistry()
        registry.register(PostgresStateStore())
        registry.register(DirectoryStateStore())
        return registry
    }
}
