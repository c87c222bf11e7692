import CloudSync
import CloudSyncPipeline
import CloudSyncPipelineState
import Foundation

extension RunSession {
    /// Makes every provider the file declares through its factory, each with its slice of `state` (or, signing in
    /// with a named account, of the accounts file) and metrics of its own.
    ///
    /// A provider that cannot be made does not stop the run: it stands in as unavailable (`UnopenedProvider`), saying
    /// why, and the jobs that need it fail with that error, so the report says what went wrong.
    static func makeProviders(
        _ compiled: CompiledPipeline, access: Access, state: any ProviderStateStore, clock: any StoreClock,
        logger: ProviderLogger
    ) -> (made: [String: any Provider], unopened: [String: CloudSyncError], metrics: [String: ProviderMetrics]) {
        let spec = compiled.spec
        var metrics: [String: ProviderMetrics] = [:]
        for provider in spec.providers { metrics[provider.id] = ProviderMetrics() }
        var made: [String: any Provider] = [:]
        var unopened: [String: CloudSyncError] = [:]
        let accounts = namedAccounts(compiled, access: access)
        for provider in spec.providers {
            var store = state
            if let account = provider.account, let accounts {
                switch accounts {
                case .success(let opened):
                    store = AccountProviderStateStore(
                        accounts: opened, account: account, type: provider.type, pipeline: state)
                case .failure(let error):
                    unopened[provider.id] = error
                    made[provider.id] = UnopenedProvider(
                        id: provider.id, capabilities: provider.configured.capabilities, error: error)
                    continue
                }
            }
            var context = ProviderContext(
                providerID: provider.id, clock: clock, state: ProviderState(provider: provider.id, store: store),
                metrics: metrics[provider.id]!, logger: logger.redacting(provider.secrets).labelled(provider.id),
                directory: spec.directory, readOnly: access == .dryRun, pipelineFile: spec.file)
            context.account = provider.account
            do {
                made[provider.id] = try provider.configured.make(context: context)
            } catch {
                unopened[provider.id] = error
                made[provider.id] = UnopenedProvider(
                    id: provider.id, capabilities: provider.configured.capabilities, error: error)
            }
        }
        return (made, unopened, metrics)
    }

    /// The accounts file, opened once, when a provider signs in with a named account; nil when none does.
    private static func namedAccounts(_ compiled: CompiledPipeline, access: Access)
        -> Result<AccountStore, CloudSyncError>?
    {
        let spec = compiled.spec
        guard spec.providers.contains(where: { $0.account != nil }) else { return nil }
        return Result { () throws(CloudSyncError) in
            guard let directory = compiled.accountsDirectory else {
                throw CloudSyncError(
                    .config,
                    "providers of \(spec.name) sign in with named accounts, but no accounts file can be found: set "
                        + "CLOUDSYNC_ACCOUNTS_DIR (or HOME) where the run happens")
            }
            return try AccountStore(directory: directory, create: false, readOnly: access == .dryRun)
        }
    }
}
