import CloudSync
import CloudSyncPipeline
import CloudSyncPipelineState
import CloudSyncRunner
import CloudSyncYAML
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
        let account = parsed.value(Commands.loginAccount) ?? provider.account
        if let refusal = Self.accountRefusal(account, provider: provider) {
            return usageError(refusal, Commands.login)
        }
        if let pid = await PipelineCredentials.lockHolder(of: compiled) {
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
        if let account { return keep(credentials, of: provider, as: account, compiled) }
        let kept = credentials.keys.map(\.summary).sorted().joined(separator: " and ")
        let path: String
        do {
            path = try PipelineCredentials.store(credentials, for: provider.id, in: compiled)
        } catch {
            return refused(error, compiled)
        }
        standardError("Signed in: the \(kept) of provider '\(provider.id)' is kept in \(path).\n")
        return .success
    }

    /// Why `account` cannot be the one `provider` signs in as: its pipeline declares another, or the name holds
    /// characters an account name may not; nil when it can.
    static func accountRefusal(_ account: String?, provider: ProviderSpec) -> String? {
        if let declared = provider.account, account != declared {
            return "provider '\(provider.id)' signs in with account '\(declared)' (its account field); --account "
                + "\(account ?? "") would keep credentials it never reads"
        }
        if let account, !account.isEmpty,
            account.contains(where: { !($0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0))) })
        {
            return "--account may contain only ASCII letters, digits, '.', '_' and '-'; found '\(account)'"
        }
        return nil
    }

    /// Keeps a sign-in's credentials as the named account, which every pipeline whose provider of that type names it
    /// signs in with.
    private func keep(
        _ credentials: [StoredCredential: String], of provider: ProviderSpec, as account: String,
        _ compiled: CompiledPipeline
    ) -> ExitCode {
        let kept = credentials.keys.map(\.summary).sorted().joined(separator: " and ")
        do {
            let store = try accountStore(compiled, create: true)
            for (credential, value) in credentials.sorted(by: { $0.key.name < $1.key.name }) {
                try store.setValue(value, account: account, type: provider.type, name: credential.name)
            }
            standardError(
                "Signed in: the \(kept) of provider '\(provider.id)' is kept as account '\(account)' in "
                    + "\(store.path); every pipeline whose \(provider.type) provider says account: \(account) signs "
                    + "in with it.\n")
            return .success
        } catch {
            standardError("Error: \(error.code): \(error.message)\n")
            return .jobError
        }
    }

    func logout(_ parsed: ParsedArguments) -> ExitCode {
        let provider: ProviderSpec
        let signIn: any ProviderSignIn
        let compiled: CompiledPipeline
        switch signInTarget(parsed, Commands.logout, onlyProviderMatters: true) {
        case .success(let target): (compiled, provider, signIn) = target
        case .failure(let stopped): return stopped.status
        }
        if let account = provider.account {
            do {
                let store = try accountStore(compiled, create: false)
                var forgotten: [StoredCredential] = []
                for credential in signIn.credentials
                where try store.value(account: account, name: credential.name) != nil {
                    try store.setValue(nil, account: account, type: provider.type, name: credential.name)
                    forgotten.append(credential)
                }
                standardError(
                    forgotten.isEmpty
                        ? "Account '\(account)' was not signed in: no credentials were kept for it.\n"
                        : "Signed out: forgot the \(forgotten.map(\.summary).joined(separator: " and ")) of account "
                            + "'\(account)', for every pipeline that uses it.\n")
                return .success
            } catch {
                standardError("Error: \(error.code): \(error.message)\n")
                return .jobError
            }
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
    ///
    /// With `onlyProviderMatters` (logout), a variable that only the file's other providers read and that is not set
    /// gets a stand-in value: forgetting one provider's credentials needs neither another provider's secrets nor the
    /// environment of the runs that use them.
    private func signInTarget(
        _ parsed: ParsedArguments, _ command: CommandSpec, onlyProviderMatters: Bool = false
    ) -> Result<(CompiledPipeline, ProviderSpec, any ProviderSignIn), Stopped> {
        let file = parsed.argument(Commands.file) ?? ""
        let id = parsed.value(Commands.loginProvider) ?? ""
        let environment = onlyProviderMatters ? environmentStandingIn(forOthersThan: id, in: file) : nil
        guard let compiled = compile(file, environment: environment) else { return .failure(Stopped(status: .usage)) }
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

    /// The environment, plus a stand-in for each unset `${env:NAME}` (without a default) that only providers other
    /// than `id` read; nil when the file cannot be read or parsed (loading it says why).
    private func environmentStandingIn(forOthersThan id: String, in file: String) -> [String: String]? {
        guard let text = try? String(contentsOfFile: file, encoding: .utf8),
            let root = try? YAMLParser().parse(text), let top = root.mapping
        else { return nil }
        var othersRead = Set<String>()
        var restReads = Set<String>()
        for pair in top {
            if pair.key.scalar == "providers", let providers = pair.value.mapping {
                for provider in providers {
                    let reads = Self.variablesWithoutDefault(in: provider.value)
                    if provider.key.scalar == id { restReads.formUnion(reads) } else { othersRead.formUnion(reads) }
                }
            } else {
                restReads.formUnion(Self.variablesWithoutDefault(in: pair.key))
                restReads.formUnion(Self.variablesWithoutDefault(in: pair.value))
            }
        }
        var standIns = environment
        for name in othersRead.subtracting(restReads) where standIns[name] == nil {
            standIns[name] = "unset-for-logout"
        }
        return standIns
    }

    /// The names of the `${env:NAME}` references without a `:-default` in every scalar under `node`; `$${` is a
    /// literal `${`, not a reference.
    private static func variablesWithoutDefault(in node: YAMLNode) -> Set<String> {
        if let scalar = node.scalar {
            var names = Set<String>()
            var rest = Substring(scalar)
            while let start = rest.range(of: "${env:") {
                let escaped = start.lowerBound > rest.startIndex && rest[rest.index(before: start.lowerBound)] == "$"
                guard let end = rest[start.upperBound...].firstIndex(of: "}") else { break }
                let reference = rest[start.upperBound..<end]
                if !escaped, !reference.contains(":-") { names.insert(String(reference)) }
                rest = rest[rest.index(after: end)...]
            }
            return names
        }
        let children = (node.sequence ?? []) + (node.mapping ?? []).flatMap { [$0.key, $0.value] }
        return children.reduce(into: Set<String>()) { $0.formUnion(variablesWithoutDefault(in: $1)) }
    }

    /// The accounts file for this environment (``AccountStore``).
    func accountStore(_ compiled: CompiledPipeline?, create: Bool) throws(CloudSyncError) -> AccountStore {
        guard let directory = compiled?.accountsDirectory ?? NamedAccounts.directory(environment: environment) else {
            throw CloudSyncError(
                .config, "no place for the accounts file: set CLOUDSYNC_ACCOUNTS_DIR, XDG_STATE_HOME or HOME")
        }
        return try AccountStore(directory: directory, create: create)
    }

    /// `text` with the provider's secret field values struck out.
    private func redacted(_ text: String, _ provider: ProviderSpec) -> String {
        provider.secrets.filter { !$0.isEmpty }.sorted { $0.count > $1.count }.reduce(text) {
            $0.replacingOccurrences(of: $1, with: "<redacted>")
        }
    }
}
