/// What a saved plan (`cloudsync plan --out`, `cloudsync apply`) is bound to.
///
/// The pipeline file and job it was made from, and the salt its value digests are made with: the first line of a plan
/// file.
public struct SavedPlanHeader: Codable, Sendable, Equatable {
    /// The plan format's name, always ``format``.
    public var format: String
    /// The format's version, ``version``.
    public var version: Int
    /// The pipeline file, as an absolute path.
    public var pipeline: String
    /// The SHA-256 of the pipeline file's bytes when the plan was made (hexadecimal).
    public var pipelineDigest: String
    /// The job planned, by name, and its type (`migrate`, `move`).
    public var job: String
    public var type: String
    /// The job's fields as the file gave them, each as text, so a changed pipeline can be refused naming what changed.
    public var fields: [String: String]
    /// When the plan was made (ISO 8601, UTC).
    public var createdAt: String
    /// The salt of the plan's value digests (hexadecimal).
    public var salt: String

    /// The format's name.
    public static let format = "cloudsync-plan"
    /// The format's version.
    public static let version = 1

    /// A header; see the properties.
    public init(
        pipeline: String, pipelineDigest: String, job: String, type: String, fields: [String: String],
        createdAt: String, salt: String
    ) {
        format = Self.format
        version = Self.version
        self.pipeline = pipeline
        self.pipelineDigest = pipelineDigest
        self.job = job
        self.type = type
        self.fields = fields
        self.createdAt = createdAt
        self.salt = salt
    }
}

/// How a run's one job meets a saved plan: writing one instead of changing anything, or applying one.
public enum SavedPlanMode: Sendable, Equatable {
    /// Read both sides and write the plan to `path` (nothing else is written).
    case write(SavedPlanHeader, path: String)
    /// Apply the plan at `path` (already checked whole and against the pipeline).
    case apply(SavedPlanHeader, path: String)
}

extension JobFieldValue {
    /// The value as text, for a plan's record of a job's fields: stable across runs, readable in a refusal.
    public var planText: String {
        switch self {
        case .text(let text): text
        case .path(let path): path.written
        case .boolean(let value): String(value)
        case .number(let value): value.rounded() == value ? String(Int(value)) : String(value)
        case .list(let items): items.joined(separator: ", ")
        case .deleteLimit(let limit): String(describing: limit)
        case .keepPolicy(let policy): String(describing: policy)
        case .rename(let rename): rename.description
        }
    }
}
