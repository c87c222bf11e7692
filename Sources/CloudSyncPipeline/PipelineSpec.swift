import CloudSync
import CloudSyncYAML
import Foundation

/// A pipeline file as written, checked and with paths resolved, but not yet compiled: nothing here has touched a
/// provider, the network, or the disk beyond reading the file.
public struct PipelineSpec: Sendable {
    /// The pipeline file's path, and the directory relative paths resolve against.
    public var file: String
    /// The file's text, for rendering errors found after loading.
    public var source: String
    /// The pipeline file's directory, absolute: relative paths in the file (providers, key files, exports, reports)
    /// resolve against it, never the working directory.
    public var directory: String
    /// The file's format version; only 1 is loaded, a newer one is refused.
    public var version: Int
    /// The pipeline's name (`[A-Za-z0-9._-]+`), naming its default state directory and its reports.
    public var name: String
    /// The state directory (outbox, run history, lock), absolute; with ``sharedState`` nothing is kept there.
    public var state: String
    /// Where the state lives instead of ``state`` when the file says `state: { postgresql: … }`; nil for the
    /// directory.
    public var sharedState: SharedStateSpec? = nil
    /// Providers in the order the file declares them.
    public var providers: [ProviderSpec]
    /// The codecs the file declares, in file order; providers and the store name them by id.
    public var codecs: [CodecSpec]
    /// How the store over the providers is configured.
    public var store: StoreSpec
    /// The jobs, in the order a run performs them.
    public var jobs: [JobSpec]
    /// The numbered migrations, in the order they apply (`migrations:`); a run applies those its state does not
    /// record applied before any job.
    public var migrations: [MigrationSpec] = []
    /// Where reports go, with `{name}` and `{startedAt}` still to fill in; nil when the file names none.
    public var reportPath: String?
    /// A stable path the newest report is also written to (replaced atomically); nil for none.
    public var reportLatest: String? = nil
    /// How many timestamped reports to keep (older ones are deleted after each run); nil keeps all.
    public var reportKeep: Int? = nil
    /// A Prometheus textfile (for node_exporter's textfile collector) describing the last run; nil for none.
    public var reportMetrics: String? = nil
    /// When the pipeline is due (`schedule:`); nil for a pipeline run only when asked.
    public var schedule: PipelineSchedule? = nil
    /// What is worth knowing about the file but does not stop it from loading (a provider type never available on
    /// this platform).
    public var warnings: [PipelineDiagnostic] = []
    /// The name as the file writes it (a `${env:…}` reference stays a reference), for output that shows the file.
    public var writtenName: String? = nil
    /// Provider fields whose `${env:…}` variable was unset, left unread because the file was loaded for a command
    /// that reaches no provider (``PipelineLoader/UnsetVariables/deferred``); empty otherwise.
    public var unsetVariables: [UnsetVariable] = []
}

/// A provider's field whose environment variable was not set when the file was loaded for local work.
public struct UnsetVariable: Sendable, Equatable {
    /// The variable `${env:…}` named.
    public var variable: String
    /// The provider and its field.
    public var provider: String
    public var field: String
    /// Where in the file.
    public var mark: YAMLMark

    /// `MY_KEY_ID (provider bucket, accessKeyId, p.yaml:5:93)`.
    public func described(file: String) -> String {
        "\(variable) (provider \(provider), \(field), \(file):\(mark.line):\(mark.column))"
    }
}

/// `state: { postgresql: URL, schema: NAME }`: the pipeline's state in a PostgreSQL schema several runners share.
public struct SharedStateSpec: Sendable, Equatable {
    /// The libpq URL or connection string; it may hold a password, so output shows ``Interpolated/display`` (the
    /// `${env:…}` reference) or ``server`` and never the value.
    public var url: Interpolated
    /// The schema the tables live in, created when missing; many pipelines may share one.
    public var schema: String

    /// The default schema.
    public static let defaultSchema = "cloudsync"

    /// `host:port/database` as the URL names them, without role or password; nil for a `key=value` string.
    public var server: String? {
        guard let components = URLComponents(string: url.value),
            components.scheme == "postgresql" || components.scheme == "postgres"
        else { return nil }
        let database = components.path.drop { $0 == "/" }
        return "\(components.host ?? "localhost"):\(components.port ?? 5432)/\(database.isEmpty ? "?" : database)"
    }

    /// How output names this state: server and schema, never the URL.
    public var description: String {
        "PostgreSQL \(server.map { $0 + ", " } ?? "")schema \(schema)"
    }
}

/// A value taken from the file, remembering whether it came from `${...}` so output can show the reference
/// instead of what it expanded to.
public struct Interpolated: Sendable, Equatable {
    /// The value after interpolation, what the pipeline uses (a path already resolved against the file's directory
    /// where the field is a path).
    public var value: String
    /// The text as written in the file.
    public var written: String

    /// Whether `${...}` interpolation changed the text, so output shows ``written`` rather than ``value``.
    public var isInterpolated: Bool { value != written }
    /// What output may show: the written reference for interpolated values, never their expansion.
    public var display: String { written }

    /// A value and the text the file wrote for it.
    package init(value: String, written: String) {
        self.value = value
        self.written = written
    }
}

/// One provider as the file declares it: its type's fields read and checked by the type's factory, nothing opened.
public struct ProviderSpec: Sendable {
    /// The provider's id in the file, unique among its providers, naming it in the store, jobs and reports.
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
    /// The named account whose sign-in it uses (`AccountStore`), instead of one this pipeline keeps.
    public var account: String? = nil
    /// Its fields whose variable was left unread (see ``PipelineSpec/unsetVariables``).
    public var unsetVariables: [UnsetVariable] = []
    /// Where the provider is declared in the file, for errors found after loading.
    public var mark: YAMLMark

    /// The expanded values of the secret fields, for redaction.
    public var secrets: [String] {
        secretFields.compactMap { fields.text($0) }
    }
}

/// One codec as the file declares it: its key ring, nothing read yet (key files and variables are read when the
/// pipeline is compiled).
public struct CodecSpec: Sendable {
    /// Where one key of a codec comes from; read at compile time, never stored in the spec.
    public enum KeySource: Sendable {
        case file(Interpolated)
        case environment(String)
        case passphraseEnvironment(String)
        case passphraseFile(Interpolated)
    }

    /// One key of a codec's ring.
    public struct Key: Sendable {
        /// The key's id, written into every envelope it encrypts.
        public var id: String
        /// Where the key's bytes or passphrase come from.
        public var source: KeySource
        /// Where the key is declared in the file.
        public var mark: YAMLMark
    }

    /// The codec's id in the file (`store.codec` and `providers.<id>.codec` name it).
    public var id: String
    /// The key ring, first key current: it encrypts, all of them decrypt.
    public var keys: [Key]
    /// Whether values that are not envelopes are read as they are (default false).
    public var allowPlaintext: Bool
    /// Where the codec is declared in the file.
    public var mark: YAMLMark
}

/// The store's conflict resolver as the file names it: `none` (the default), the newest by a timestamp field, or a
/// union.
public enum ResolverSpec: Sendable, Equatable {
    case none
    case timestamp(field: String)
    case union(id: String?)
}

/// The store's size tiering as the file sets it: `auto` (the default thresholds), `off`, or explicit thresholds in
/// bytes.
public enum TieringSpec: Sendable, Equatable {
    case auto, off
    case thresholds(kvMaxBytes: Int, recordMaxBytes: Int)
}

/// The store's outbox settings; the defaults are the core's `Outbox.Limits` defaults.
public struct OutboxSpec: Sendable, Equatable {
    /// Whether writes that fail for a provider are queued and retried (default true).
    public var enabled = true
    /// The most entries the outbox keeps.
    public var maxEntries = Outbox.Limits.defaultMaxEntries
    /// How many times an entry is tried before it is dropped.
    public var maxAttempts = Outbox.Limits.defaultMaxAttempts
    /// How long, in milliseconds, an entry is kept before it is dropped.
    public var maxAgeMs: Int64 = Outbox.Limits.defaultMaxAge.milliseconds
    /// How often `cloudsync serve` drains the outbox between runs (`autoFlush`), in milliseconds.
    ///
    /// Nil for never (the default); `autoFlush: true` is the seed's 60 s timer.
    public var autoFlushMs: Int64? = nil
}

/// The `store` section: which providers the store spans and its options, as written (defaults filled in), not yet
/// compiled.
public struct StoreSpec: Sendable {
    /// The provider ids the store spans, in preference order, each once; declared providers not listed are reachable
    /// only by jobs.
    public var providers: [String]
    /// Failover (the default) or mirror.
    public var writeMode: WriteMode
    /// Size tiering (default `auto`).
    public var tiering: TieringSpec
    /// Conflict resolution (default `none`).
    public var resolver: ResolverSpec
    /// Whether a resolving read writes the winner back to providers that disagreed or lacked it (default true).
    public var repairOnRead: Bool
    /// Whether keys are checked against every provider's rules before use (default true).
    public var validateKeys: Bool
    /// The deadline of every provider call, in milliseconds; 0 for none.
    ///
    /// The file's `timeoutMs`, else the environment's `CLOUDSYNC_TIMEOUT_MS` (``timeoutFromEnvironment``), else 15000.
    public var timeoutMs: Int
    /// Whether ``timeoutMs`` came from `CLOUDSYNC_TIMEOUT_MS` (the file sets none).
    public var timeoutFromEnvironment = false
    /// The codec id for providers without their own; nil for none (the file's `none` reads as nil).
    public var codec: String?
    /// Outbox settings.
    public var outbox: OutboxSpec
}

/// One job, in file order.
public struct JobSpec: Sendable {
    /// The job type as written (`sync`, `migrate`, ...).
    public var type: String
    /// The job's name, unique in the pipeline: as written, or `<position>-<type>`; reports, progress, `--job` and
    /// `needs` use it.
    public var name: String
    /// The names of the jobs that must end `ok` before this one runs, each earlier in the file.
    public var needs: [String]
    /// The job, configured by its type from its fields.
    public var job: ConfiguredJob
    /// Where the job is declared in the file.
    public var mark: YAMLMark
}
