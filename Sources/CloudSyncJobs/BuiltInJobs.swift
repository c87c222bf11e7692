import CloudSyncPipeline

/// The job types this build of CloudSync ships, as `cloudsync` registers them: one registration line per type.
///
/// It lives in the pipeline library rather than the command line so that a program running pipelines from Swift
/// starts from the same registry and adds its own types to it.
public enum BuiltInJobs {
    /// Every built-in job type, in the order the schema and the documentation list them.
    public static var registry: JobRegistry {
        var registry = JobRegistry()
        registry.register(SyncJob())
        registry.register(MigrateJob())
        registry.register(MoveJob())
        registry.register(MirrorJob())
        registry.register(CheckJob())
        registry.register(ClearJob())
        registry.register(QuotaJob())
        registry.register(ExportJob())
        registry.register(ImportJob())
        registry.register(VerifyJob())
        registry.register(RekeyJob())
        registry.register(FlushJob())
        registry.register(BackupJob())
        registry.register(RestoreJob())
        registry.register(ForgetJob())
        return registry
    }
}
