import CloudSync
import CloudSyncLocal

/// The provider types `cloudsync` knows: one registration line per type.
public enum BuiltInProviders {
    /// Every built-in provider type, in the order the schema and the README list them.
    public static var registry: ProviderRegistry {
        var registry = ProviderRegistry()
        registry.register(MemoryProviderFactory())
        registry.register(SQLiteProviderFactory())
        registry.register(DirectoryProviderFactory())
        registry.register(ICloudKeyValueProviderFactory())
        return registry
    }
}
