import CloudSync
import CloudSyncYAML

/// A pipeline file as written, checked and with paths resolved, but not yet compiled: nothing here has touched a
/// provider, the network, or the disk beyond reading the file.
public struct PipelineSpec: Sendable {
    /// The pipeline file's path, and the directory relative paths resolve against.
    public var file: String
    /// The file's text, for rendering errors found after loading.
    public var source: String
    public var directory: String
    public var version: Int
    public var name: String
    /// The state directory (outbox, run history, lock), absolute.
    public var state: String
    /// Providers in the order the file declares them.
    public var providers: [ProviderSpec]
    public var codecs: [CodecSpec]
    public var store: StoreSpec
    public var jobs: [JobSpec]
    /// Where reports go, with `{name}` and `{startedAt}` still to fill in; nil when the file names none.
    public var reportPath: String?
}

/// A value taken from the file, remembering whether it came from `${...}` so output can show the reference
/// instead of what it expanded to.
public struct Interpolated: Sendable, Equatable {
    public var value: String
    /// The text as written in the file.
    public var written: String

    public var isInterpolated: Bool { value != written }
    /// What output may show: the written reference for interpolated values, never their expansion.
    public var display: String { written }
}

/// One provider as the file declares it: its type's fields read and checked by the type's factory, nothing opened.
public struct ProviderSpec: Sendable {
    public var id: String
    /// The registered type name.
    public var type: String
    /// The type's configuration, ready to make the provider.
    public var configured: ConfiguredProvider
    /// The type's own fields as read (paths absolute), by name.
    public var fields: ProviderFieldValues
    /// Each given field as written, for output that must show references rather than what they expanded to.
    public var written: [String: Interpolated]
    /// Names of the given fields that hold secrets.
    public var secretFields: [String]
    /// Lowers the largest encoded value this provider takes.
    public var maxValueBytes: Int?
    /// A codec id for this provider, overriding the store's.
    public var codec: String?
    public var mark: YAMLMark

    /// The expanded values of the secret fields, for redaction.
    public var secrets: [String] {
        secretFields.compactMap { fields.text($0) }
    }
}

public struct CodecSpec: Sendable {
    public enum KeySource: Sendable {
        case file(Interpolated)
        case environment(String)
        case passphraseEnvironment(String)
        case passphraseFile(Interpolated)
    }

    public struct Key: Sendable {
        public var id: String
        public var source: KeySource
        public var mark: YAMLMark
    }

    public var id: String
    public var keys: [Key]
    public var allowPlaintext: Bool
    public var mark: YAMLMark
}

public enum ResolverSpec: Sendable, Equatable {
    case none
    case timestamp(field: String)
    case union(id: String?)
}

public enum TieringSpec: Sendable, Equatable {
    case auto, off
    case thresholds(kvMaxBytes: Int, recordMaxBytes: Int)
}

public struct OutboxSpec: Sendable, Equatable {
    public var enabled = true
    public var maxEntries = Outbox.Limits.defaultMaxEntries
    public var maxAttempts = Outbox.Limits.defaultMaxAttempts
    public var maxAgeMs: Int64 = Outbox.Limits.defaultMaxAge.milliseconds
}

public struct StoreSpec: Sendable {
    public var providers: [String]
    public var writeMode: WriteMode
    public var tiering: TieringSpec
    public var resolver: ResolverSpec
    public var repairOnRead: Bool
    public var validateKeys: Bool
    public var timeoutMs: Int
    public var codec: String?
    public var outbox: OutboxSpec
}

public enum Overwrite: String, Sendable, CaseIterable {
    case always, ifMissing
}

/// One job, in file order.
public struct JobSpec: Sendable {
    public enum Kind: Sendable {
        case sync(providers: [String]?)
        case migrate(from: String, to: String, keys: [String]?, continueOnError: Bool, overwrite: Overwrite)
        case clear(provider: String?, confirm: Bool)
        case quota(warnAbove: Double?, failOnWarning: Bool)
        case export(from: String, path: Interpolated, keys: [String]?, codec: String?)
        case `import`(path: Interpolated, to: String, overwrite: Overwrite)
        case verify(provider: String)
        case rekey(provider: String)
        case flush
    }

    public var type: String
    public var name: String
    public var kind: Kind
    public var mark: YAMLMark
}
