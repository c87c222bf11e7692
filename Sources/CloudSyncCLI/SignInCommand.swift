import CloudSync
import CloudSyncPipeline
import Foundation

/// `cloudsync login FILE --provider ID [--no-browser]` and `cloudsync logout FILE --provider ID`.
///
/// The sign-in itself is the provider type's (``ProviderSignIn``, from its factory); this only finds the provider,
/// lets the sign-in talk to the person on standard error and input, and keeps or forgets what it yields with
/// ``PipelineCredentials``. No credential is ever printed.
extension CommandLineTool {
    func login(_ parsed: ParsedArguments) async -> ExitCode {
        let provider: ProviderSpec
        let signIn: any ProviderSignIn
        let compiled: CompiledPipeline
        switch signInTarget(parsed, Commands.login) {
        case .success(let target): (compiled, provider, signIn) = target
        case .failure(let stopped): return stopped.status
        }
        if let pid = PipelineCredentials.lockHolder(of: compiled) {
            standardError(
                "Error: \(compiled.spec.name) is running (\(RunRefusal.holder(pid)), lock \(compiled.spec.state)/run.lock); "
                    + "sign in when it has finished\n")
            return .locked
        }
        let errorWriter = standardError
        let interaction = SignInInteraction(
            show: { errorWriter($0 + "\n") }, readLine: standardInput, noBrowser: parsed.flag(Commands.loginNoBrowser))
        standardError("Signing in provider '\(provider.id)' (\(provider.type)): \(signIn.method).\n")
        let credentials: [StoredCredential: String]
        do {
            credentials = try await signIn.signIn(interaction)
        } catch {
            let message = redacted(error.message, provider)
            standardError("Error: the sign-in of provider '\(provider.id)' failed: \(error.code): \(message)\n")
            return .failure
        }
        let path: String
        do {
            path = try PipelineCredentials.store(credentials, for: provider.id, in: compiled)
        } catch {
            return refused(error, compiled)
        }
        let kept = credentials.keys.map(\.summary).sorted().joined(separator: " and ")
        standardError("Signed in: the \(kept) of provider '\(provider.id)' is kept in \(path).\n")
        return .success
    }

    func logout(_ parsed: ParsedArguments) -> ExitCode {
        let provider: ProviderSpec
        let signIn: any ProviderSignIn
        let compiled: CompiledPipeline
        switch signInTarget(parsed, Commands.logout) {
        case .success(let target): (compiled, provider, signIn) = target
        case .failure(let stopped): return stopped.status
        }
        let forgotten: [StoredCredential]
        do {
            forgotten = try PipelineCredentials.forget(signIn.credentials, for: provider.id, in: compiled)
        } catch {
            return refused(error, compiled)
        }
        if forgotten.isEmpty {
            standardError("Provider '\(provider.id)' was not signed in: no credentials were kept for it.\n")
        } else {
            let what = forgotten.map(\.summary).joined(separator: " and ")
            standardError("Signed out: forgot the \(what) of provider '\(provider.id)'.\n")
        }
        return .success
    }

    /// The pipeline, the provider `--provider` names and its sign-in; stops with a usage error naming the provider
    /// when there is no such provider or its type needs no sign-in.
    private func signInTarget(
        _ parsed: ParsedArguments, _ command: CommandSpec
    ) -> Result<(CompiledPipeline, ProviderSpec, any ProviderSignIn), Stopped> {
        let file = parsed.argument(Commands.file) ?? ""
        guard let compiled = compile(file) else { return .failure(Stopped(status: .usage)) }
        let id = parsed.value(Commands.loginProvider) ?? ""
        let ids = compiled.spec.providers.map(\.id)
        guard let provider = compiled.spec.providers.first(where: { $0.id == id }) else {
            var message = "no provider '\(id)' in \(file); its providers: " + ids.joined(separator: ", ")
            if let guess = closest(id, among: ids) { message += "; did you mean '\(guess)'?" }
            return .failure(Stopped(status: usageError(message, command)))
        }
        guard let signIn = provider.configured.signIn else {
            let message =
                "provider '\(id)' (\(provider.type)) needs no sign-in; \(command.name) is for providers that sign in "
                + "to an account in a browser"
            return .failure(Stopped(status: usageError(message, command)))
        }
        return .success((compiled, provider, signIn))
    }

    /// `text` with the provider's secret field values struck out.
    private func redacted(_ text: String, _ provider: ProviderSpec) -> String {
        provider.secrets.filter { !$0.isEmpty }.sorted { $0.count > $1.count }.reduce(text) {
            $0.replacingOccurrences(of: $1, with: "<redacted>")
        }
    }
}
