import CloudSync
import CloudSyncCloudKit
import CloudSyncDrive
import CloudSyncLocal
import CloudSyncPipeline
import CloudSyncS3

/// The provider types this build of CloudSync ships, as `cloudsync` registers them: one registration line per type.
///
/// It lives in the pipeline library rather than the command line so that a program running pipelines from Swift
/// starts from the same registry and adds its own types to it.
public enum BuiltInProviders {
    /// Every built-in provider type, in the order the schema and docs/pipeline-reference.md list them.
    public static var registry: ProviderRegistry {
        var registry = ProviderRegistry()
        registry.register(MemoryProviderFactory())
        registry.register(SQLiteProviderFactory())
        registry.register(DirectoryProviderFactory())
        registry.register(S3ProviderFactory())
        registry.register(CloudKitProviderFactory())
        registry.register(DriveProviderFactory())
        registry.register(ICloudKeyValueProviderFactory())
        return registry
    }
}
