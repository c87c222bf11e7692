import CloudSync

/// What a mirror job saw both sides hold for one key when it last made them agree: a digest of the value, and the
/// version tag each side's listing gave then (`KeyPage.versions`), where it gave one.
///
/// While both tags are unchanged, nobody has written the key on either side since, so the job need not read it; a
/// tag that changed means someone did, and the job reads and compares again.
public struct MirrorRow: Sendable, Equatable {
    /// `SyncFingerprint.digest(of:)` of the decoded value both sides held.
    public var digest: String
    /// The source's version tag then; nil when it has none.
    public var sourceVersion: String?
    /// The destination's version tag then; nil when it has none, or when the job wrote the key and has not listed
    /// the destination since.
    public var destinationVersion: String?

    /// A row for a value with this digest and these tags.
    public init(digest: String, sourceVersion: String?, destinationVersion: String?) {
        self.digest = digest
        self.sourceVersion = sourceVersion
        self.destinationVersion = destinationVersion
    }
}
