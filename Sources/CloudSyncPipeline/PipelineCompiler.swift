import CloudSync
import CloudSyncCrypto
import CloudSyncSodium
import CloudSyncYAML

/// A pipeline ready to run: its codecs built (key files read), its store options decided, its providers described
/// but not yet opened.
///
/// Compiling has no side effect beyond reading key files.
public struct CompiledPipeline: Sendable {
    /// The checked pipeline file this was compiled from.
    public let spec: PipelineSpec
    /// The codecs the file declares, by id, their keys already read; each key's passphrase is stretched on first use.
    public let codecs: [String: EnvelopeCodec]
    /// Where named accounts' sign-ins are kept for this environment (``NamedAccounts/directory(environment:)``); nil
    /// when it names no place.
    public var accountsDirectory: String? = nil

    /// The store's options: everything but the outbox, whose durable storage lives in the state directory the
    /// runner owns.
    public var storeOptions: StoreOptions {
        var options = StoreOptions()
        let store = spec.store
        options.writeMode = store.writeMode
        switch store.tiering {
        case .auto: options.tiering = .auto
        case .off: options.tiering = .off
        case .thresholds(let kv, let record): options.tiering = .thresholds(kvMaxBytes: kv, recordMaxBytes: record)
        }
        switch store.resolver {
        case .none: options.resolver = nil
        case .timestamp(let field): options.resolver = Resolver.timestamp(field: field)
        case .union(let id): options.resolver = Resolver.union(id: id)
        }
        options.repairOnRead = store.repairOnRead
        options.validateKeys = store.validateKeys
        options.timeout = store.timeoutMs > 0 ? .milliseconds(store.timeoutMs) : nil
        options.codec = store.codec.flatMap { codecs[$0] }
        for provider in spec.providers {
            if let codec = provider.codec { options.providerCodecs[provider.id] = codecs[codec] }
            if let cap = provider.maxValueBytes { options.maxValueBytes[provider.id] = cap }
        }
        return options
    }
}

/// Turns a loaded spec into a ``CompiledPipeline``.
public enum PipelineCompiler {
    /// Builds the codecs, reading their key files and passphrases; every key that cannot be read is an error
    /// pointing at its line in the file.
    public static func compile(_ spec: PipelineSpec, environment: [String: String]) throws(PipelineError)
        -> CompiledPipeline
    {
        var diagnostics: [PipelineDiagnostic] = []
        var codecs: [String: EnvelopeCodec] = [:]
        for codec in spec.codecs {
            var keys: [EnvelopeCodec.Key] = []
            for key in codec.keys {
                do throws(CloudSyncError) {
                    keys.append(try load(key, environment: environment))
                } catch {
                    // Name files as the pipeline wrote them, not by the absolute path they resolved to.
                    var message = error.message
                    if case .file(let path) = key.source {
                        message = message.replacingOccurrences(of: path.value, with: path.written)
                    }
                    if case .passphraseFile(let path) = key.source {
                        message = message.replacingOccurrences(of: path.value, with: path.written)
                    }
                    diagnostics.append(
                        PipelineDiagnostic(
                            file: spec.file, mark: key.mark,
                            message: "key `\(key.id)` of codec `\(codec.id)`: \(message)"))
                }
            }
            guard keys.count == codec.keys.count, !keys.isEmpty else { continue }
            do {
                codecs[codec.id] = try EnvelopeCodec(keys: keys, allowPlaintext: codec.allowPlaintext)
            } catch {
                diagnostics.append(PipelineDiagnostic(file: spec.file, mark: codec.mark, message: error.message))
            }
        }
        guard diagnostics.isEmpty else { throw PipelineError(diagnostics: diagnostics, source: spec.source) }
        var compiled = CompiledPipeline(spec: spec, codecs: codecs)
        compiled.accountsDirectory = NamedAccounts.directory(environment: environment)
        return compiled
    }

    private static func load(_ key: CodecSpec.Key, environment: [String: String]) throws(CloudSyncError)
        -> EnvelopeCodec.Key
    {
        switch key.source {
        case .file(let path):
            return try .keyFile(id: key.id, path: path.value)
        case .environment(let variable):
            guard let value = environment[variable] else {
                throw CloudSyncError(
                    .config, "environment variable \(variable) is not set; it should hold a base64 key")
            }
            let bytes: SecretBytes
            do {
                bytes = try SecretBytes.load(base64Key: value, origin: "environment variable \(variable)")
            } catch {
                throw CloudSyncError(.config, error.message)
            }
            return try .raw(id: key.id, bytes)
        case .passphraseEnvironment(let variable):
            guard let value = environment[variable] else {
                throw CloudSyncError(
                    .config, "environment variable \(variable) is not set; it should hold the passphrase")
            }
            guard !value.isEmpty else {
                throw CloudSyncError(
                    .config, "environment variable \(variable) is empty; it should hold the passphrase")
            }
            return try .passphrase(id: key.id, SecretBytes(utf8: value))
        case .passphraseFile(let path):
            return try .passphrase(id: key.id, file: path.value)
        }
    }
}

extension CompiledPipeline {
    /// The codec provider values are encrypted with: the store's, else the first the file declares; nil for none.
    public var stateCodec: (any ValueCodec)? {
        spec.store.codec.flatMap { codecs[$0] } ?? spec.codecs.first.flatMap { codecs[$0.id] }
    }
}
