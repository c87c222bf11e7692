/// One page of a key listing.
public struct KeyPage: Sendable, Equatable {
    /// The keys of this page, in the provider's stable order.
    public var keys: [String]
    /// Where the next page starts; nil when this is the last page.
    public var nextCursor: String?
    /// The provider's own version tag of each key's stored value, positionally, where its listing tells it for free.
    ///
    /// S3's ETag, Drive's checksum, CloudKit's `recordChangeTag`: a tag that changes whenever the stored value
    /// does, whoever changed it. Nil when the provider has none; a nil entry for a key it cannot tag.
    ///
    /// Jobs compare tags with the ones they saw last time to skip reading values nobody changed.
    public var versions: [String?]?
    /// The bytes each key's stored value takes, positionally, where the listing tells it for free (a directory's
    /// file sizes, S3's `Size`); nil when the provider tells none.
    ///
    /// A job that reads values can then take a large one another way (a backup, as a file in windows) before
    /// reading it whole.
    public var sizes: [Int64?]?
    /// When each key's stored value was last written, in milliseconds since the epoch by the provider's own clock
    /// (a directory's file modification time, S3's `LastModified`, Drive's `modifiedTime`), positionally; nil when
    /// the listing tells none.
    ///
    /// Processes on machines whose clocks disagree can compare these with each other: a backup repository judges
    /// the age of its locks by them.
    public var modified: [Int64?]?

    /// A page of `keys`, followed by `nextCursor`, with each key's version tag, size and modification time where
    /// the provider knows them.
    public init(
        keys: [String], nextCursor: String?, versions: [String?]? = nil, sizes: [Int64?]? = nil,
        modified: [Int64?]? = nil
    ) {
        precondition(versions == nil || versions?.count == keys.count, "one version tag per key, or none")
        precondition(sizes == nil || sizes?.count == keys.count, "one size per key, or none")
        precondition(modified == nil || modified?.count == keys.count, "one modification time per key, or none")
        self.keys = keys
        self.nextCursor = nextCursor
        self.versions = versions
        self.sizes = sizes
        self.modified = modified
    }

    /// Key `index`'s version tag; nil when the provider gave none.
    public func version(at index: Int) -> String? {
        guard let versions, index < versions.count else { return nil }
        return versions[index]
    }

    /// Throws `ERR_PROVIDER` when this page, asked for after `cursor`, names that same cursor as the next: the
    /// listing would never end.
    public func requireProgress(after cursor: String?, provider: String) throws(CloudSyncError) {
        guard nextCursor == nil || nextCursor != cursor else {
            throw CloudSyncError(
                .provider, "listing returned the same cursor twice; it would never end", provider: provider)
        }
    }
}
