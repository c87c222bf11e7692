import Synchronization

/// A storage provider: where the store keeps values.
///
/// Requirements every provider must meet (`ProviderConformanceSuite` in `CloudSyncTesting` checks them):
///
/// - **Sendable and re-entrant.** The store calls a provider from many tasks at once.
/// - **Batch-first, positional results.** `get`, `set` and `remove` take arrays and return one result per input, in
///   the same order: `results[i]` is about `keys[i]`. A failure of one key is a value in its slot, not a throw; throw
///   only when the whole batch failed (offline, signed out, timed out). Never receive more keys than
///   ``ProviderCapabilities/batchLimit``; the store chunks for you.
/// - **Values are opaque strings**, stored and returned byte for byte (after the codec, which the store applies).
///   An empty string is a value; a missing key reads as `nil`. Removing a missing key succeeds.
/// - **Errors are ``CloudSyncError``s** with the code that says what the caller should do; the store wraps anything
///   else as `ERR_PROVIDER`, which is never retried.
/// - **A key is its UTF-8 bytes** (``StoreKey``): two keys are the same key exactly when their bytes are, so `café`
///   precomposed (U+00E9) and decomposed (`e` + U+0301) are two keys, and `Apple` and `apple` are two. Never
///   compare, hash or sort keys with `String`'s own `==`, hashing or `<` (canonical equivalence); key collections by
///   ``StoreKey``.
/// - **Listing is paged**, never all keys at once: `listKeys(after:)` with the previous page's
///   ``KeyPage/nextCursor`` continues where it stopped, and a nil cursor means the end. Every key present for the
///   whole listing is yielded exactly once, whatever order the server answers in, and a cursor stays valid when
///   keys it already yielded are removed (a clear removes each page before asking for the next). Keys written or
///   removed during a listing may or may not appear (a change feed may yield a key rewritten meanwhile again).
///   Page by something that names a key (the last one yielded) rather than by a server's position or collation, or
///   de-duplicate and sort yourself. ``ProviderCapabilities/listsInKeyOrder`` promises bytewise order. A provider
///   that cannot list says so in its capabilities and throws `ERR_UNSUPPORTED`.
/// - **Cancellation is honoured** where the provider can: the store enforces its own deadline anyway and stops
///   waiting, but a provider that keeps working after cancellation wastes requests.
/// - **Never block the calling thread.** The store starts each call on its caller's thread and the call runs there
///   until it first suspends; only from then on can the deadline release the caller. Blocking work (file system,
///   SQLite, a C library) goes to a thread or queue of its own and is awaited, as the bundled providers do.
/// - **Availability is cheap to ask, and says why not**: ``availability()`` answers ``Availability/available`` or
///   the reason it cannot serve (signed out, offline, misconfigured, platform lacks it). The store memoises the
///   answer for a short time and bounds the probe by its timeout; a probe that hangs only makes the provider
///   unavailable (``UnavailableReason/timedOut``).
/// - **Quota reports what the provider knows**: nil when it cannot know (never a guess); a nil total means
///   unlimited, not zero.
/// - **Events only where supported**: ``subscribeToAccountChanges(_:)`` and ``subscribeToRemoteChanges(_:)``
///   return nil when the provider has no such events, rather than a subscription that never fires.
/// - **`clearCaches()`** forgets everything remembered about the signed-in account (file ids, reachability); the
///   store calls it when the account's identity changes.
/// - **`close()`** releases connections and files (SQLite checkpoints its write-ahead log). Whoever made the
///   provider closes it, once, after its last call; calls after `close()` fail or report ``UnavailableReason/closed``.
///   The store never closes the providers it is given.
/// - **Wrappers forward everything**: a provider that wraps another (metering, fault injection, dry runs) forwards
///   every requirement, events and `close()` included; build one on ``ForwardingProvider``.
public protocol Provider: Sendable {
    /// A name unique within a store, used in errors, reports and the outbox.
    var id: String { get }
    /// What the provider can do, declared once.
    var capabilities: ProviderCapabilities { get }

    /// Whether the provider can serve requests now (signed in, reachable, configured), and if not, why.
    func availability() async -> Availability

    /// Values for `keys`, positionally; nil for a key that is not stored.
    func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>]
    /// Stores each value under its key, positionally.
    func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>]
    /// Removes each key, positionally; removing a key that is not stored succeeds.
    func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>]

    /// Values for `keys` with each one's version tag, positionally; nil for a key that is not stored.
    ///
    /// The tag is the one ``listKeys(after:limit:)`` gives the same stored value, and the one a
    /// ``WriteCondition/version(_:)`` names. The default reads with ``get(_:)`` and tags nothing (or tags each value
    /// with its digest where ``ProviderCapabilities/tagsAreValueDigests`` says that is the provider's tag).
    func getVersioned(_ keys: [String]) async throws -> [Result<VersionedValue?, CloudSyncError>]
    /// Stores each value under its key if its condition holds when the write arrives (nil: unconditionally),
    /// positionally; each success carries the version tag the provider gave the stored value, nil when it told none.
    ///
    /// A condition that does not hold fails its slot with `ERR_CHANGED_SINCE_READ` and changes nothing. Only a
    /// provider with ``ProviderCapabilities/conditionalWrites`` takes conditions; the default fails a conditional
    /// slot with `ERR_UNSUPPORTED` and sends the others through ``set(_:)``.
    func set(_ items: [KeyValue], conditions: [WriteCondition?]) async throws -> [Result<String?, CloudSyncError>]
    /// Removes each key if its condition holds when the removal arrives (nil: unconditionally), positionally; as
    /// ``set(_:conditions:)``, a condition that does not hold fails with `ERR_CHANGED_SINCE_READ`.
    ///
    /// A key not stored is removed already, whatever its condition named.
    func remove(_ keys: [String], conditions: [WriteCondition?]) async throws -> [Result<Void, CloudSyncError>]

    /// One page of keys after `cursor` (nil: from the start), at most `limit` of them.
    func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage

    /// Space used and available, or nil when the provider cannot know.
    func quota() async throws -> ProviderQuota?

    /// How many keys it holds, when it can count them without listing them (a SQL `count(*)`); nil otherwise.
    /// Jobs show it as their progress total.
    func keyCount() async throws -> Int?

    /// Where the provider's change feed stands now, as an opaque cursor for ``changes(since:limit:)``; nil when the
    /// provider offers no change feed (the default).
    ///
    /// A feed must report every key set or removed after the cursor was taken, by anyone; a provider that cannot
    /// see every removal offers no feed, because a sync trusting it would bring removed keys back.
    func changeFeedCursor() async throws -> String?

    /// One page of the keys set or removed since `cursor` (from ``changeFeedCursor()`` or an earlier page), at most
    /// about `limit` of them; ``ChangeFeedAnswer/expired(_:)`` when the cursor is no longer usable (the change log was
    /// pruned past it, or it belongs to another database), so the caller falls back to a full comparison.
    func changes(since cursor: String, limit: Int) async throws -> ChangeFeedAnswer

    /// Calls `handler` on account changes; nil when the provider has no account events.
    func subscribeToAccountChanges(_ handler: @escaping @Sendable (AccountEvent) -> Void) -> ProviderSubscription?
    /// Calls `handler` when data changes elsewhere; nil when the provider has no change events.
    func subscribeToRemoteChanges(_ handler: @escaping @Sendable (RemoteChange) -> Void) -> ProviderSubscription?

    /// Forgets everything cached about the current account.
    func clearCaches() async

    /// An opaque, stable id of the account signed in now (CloudKit's user record name, a Drive user's permission
    /// id); nil when the provider has no accounts. A run compares it with the last run's to notice an account
    /// switch between runs.
    func accountIdentity() async throws -> String?

    /// Releases connections and files; the provider serves no call after it.
    func close() async
}

extension Provider {
    /// Whether ``availability()`` answers ``Availability/available``.
    public func isAvailable() async -> Bool { await availability().isAvailable }

    /// By default a provider cannot know its quota.
    public func quota() async throws -> ProviderQuota? { nil }
    /// By default a provider cannot count its keys without listing them.
    public func keyCount() async throws -> Int? { nil }
    /// By default a provider offers no change feed.
    public func changeFeedCursor() async throws -> String? { nil }
    /// By default a provider offers no change feed: every cursor is expired.
    public func changes(since cursor: String, limit: Int) async throws -> ChangeFeedAnswer {
        .expired("this provider offers no change feed")
    }
    /// By default a provider has no account events.
    public func subscribeToAccountChanges(_ handler: @escaping @Sendable (AccountEvent) -> Void)
        -> ProviderSubscription?
    { nil }
    /// By default a provider has no remote-change events.
    public func subscribeToRemoteChanges(_ handler: @escaping @Sendable (RemoteChange) -> Void)
        -> ProviderSubscription?
    { nil }
    /// By default a provider caches nothing about the account.
    public func clearCaches() async {}
    /// By default a provider has no accounts.
    public func accountIdentity() async throws -> String? { nil }
    /// By default a provider holds nothing to release.
    public func close() async {}
}

/// Whether a provider can serve requests now, and if not, why.
public enum Availability: Sendable, Equatable, CustomStringConvertible {
    case available
    /// Cannot serve now: the reason, and a sentence for people saying what to do.
    case unavailable(UnavailableReason, String)

    /// Whether the provider can serve requests.
    public var isAvailable: Bool { self == .available }

    /// The reason it cannot serve; nil when available.
    public var reason: UnavailableReason? {
        if case .unavailable(let reason, _) = self { return reason }
        return nil
    }

    /// `available`, or `<reason>: <what to do>`.
    public var description: String {
        switch self {
        case .available: return "available"
        case .unavailable(let reason, let detail): return "\(reason.rawValue): \(detail)"
        }
    }
}

/// Why a provider cannot serve requests.
public enum UnavailableReason: String, Sendable, Equatable, CaseIterable, Codable {
    /// Nobody is signed in, or the credentials were revoked.
    case signedOut
    /// The provider cannot be reached (network down, server gone, disk not mounted).
    case offline
    /// The provider's configuration is wrong (a path that is not a directory, a missing container).
    case misconfigured
    /// This platform has no implementation of the provider (the iCloud key-value store on Linux).
    case unsupportedPlatform
    /// The availability probe did not answer within the store's deadline.
    case timedOut
    /// The provider was closed.
    case closed
    /// Unavailable for a reason none of the others names (a test double switched off, for example).
    case other
}

extension Availability {
    /// Why a provider whose availability probe failed with `error` cannot serve.
    ///
    /// Signed out for refused credentials, misconfigured for a missing or forbidden container (or a wrong
    /// configuration), offline, timed out, closed; other for anything else. The message is the error's.
    public init(probeFailure error: CloudSyncError) {
        let reason: UnavailableReason
        switch error.code {
        case .notSignedIn: reason = .signedOut
        case .containerMisconfigured, .config: reason = .misconfigured
        case .offline: reason = .offline
        case .timeout: reason = .timedOut
        case .closed: reason = .closed
        default: reason = .other
        }
        self = .unavailable(reason, error.message)
    }
}

extension UnavailableReason {
    /// The error code a call that needs the provider fails with for this reason.
    public var errorCode: ErrorCode {
        switch self {
        case .signedOut: return .notSignedIn
        case .offline: return .offline
        case .timedOut: return .timeout
        case .misconfigured: return .containerMisconfigured
        case .closed: return .closed
        case .unsupportedPlatform: return .unsupported
        case .other: return .noProvider
        }
    }
}

/// A key and its value.
public struct KeyValue: Sendable, Hashable {
    /// The key.
    public let key: String
    /// The value, as stored (encoded when a codec applies).
    public let value: String

    /// The pair `key`, `value`.
    public init(_ key: String, _ value: String) {
        self.key = key
        self.value = value
    }
}

extension KeyValue {
    /// Equal when both the keys and the values have the same UTF-8 bytes (see ``StoreKey``).
    public static func == (lhs: KeyValue, rhs: KeyValue) -> Bool {
        StoreKey.bytesEqual(lhs.key, rhs.key) && StoreKey.bytesEqual(lhs.value, rhs.value)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(StoreKey(key))
        hasher.combine(StoreKey(value))
    }
}

/// What a provider can do.
///
/// Declared once; the store routes, chunks and validates by it.
public struct ProviderCapabilities: Sendable, Equatable {
    /// The largest value, in UTF-8 bytes of the encoded value, the provider accepts; nil for no cap.
    public var maxValueBytes: Int?
    /// Which tiering threshold caps this provider when tiering is on.
    public var tier: StorageTier
    /// Rules every key must satisfy while this provider is configured.
    public var keyRules: [KeyRule]
    /// Most keys one batch call may carry (at least 1).
    public var batchLimit: Int
    /// Whether `listKeys` works.
    public var canList: Bool
    /// Whether `quota()` can return figures.
    public var reportsQuota: Bool
    /// Whether account events are emitted.
    public var emitsAccountEvents: Bool
    /// Whether remote-change events are emitted.
    public var emitsRemoteChanges: Bool
    /// Whether `listKeys` pages through keys in bytewise (UTF-8) order, which lets a sync merge listings as they
    /// come; a sync sorts the listing of a provider without it in a temporary table first.
    public var listsInKeyOrder: Bool
    /// Whether the cursor `listKeys` takes is a key: the listing goes on just after it, whether or not it was listed,
    /// so a listing in key order may start anywhere (a sharded job starts its range there).
    public var cursorIsKey: Bool
    /// For a provider whose batch call sends one request per key (S3's objects, Drive's files), how many it has in
    /// flight at once; nil for a provider that answers a batch in one request or a few (SQLite, CloudKit).
    ///
    /// The store's deadline bounds a request, not a batch split into many: a batch of `n` keys may take
    /// `ceil(n / requestsAtOnce)` deadlines, so a 1,000-object S3 batch on a slow endpoint is not cut off whole.
    public var requestsAtOnce: Int?
    /// Whether ``Provider/set(_:conditions:)`` and ``Provider/remove(_:conditions:)`` take conditions, checked by the
    /// provider itself when the change arrives (an S3 `If-Match`, a CloudKit record change tag, a SQLite
    /// transaction), so a writer in another process cannot land unseen between a read and the change.
    public var conditionalWrites: Bool
    /// Whether the version tag `listKeys` gives a key (``KeyPage/versions``) is always
    /// ``SyncFingerprint/digest(of:)`` of the value stored under it, as SQLite's is: a sync that writes a value then
    /// knows the tag the next listing will give it, and records it at once instead of reading the key again next time.
    public var tagsAreValueDigests: Bool

    /// Capabilities; every argument defaults to what a plain file store can do.
    public init(
        maxValueBytes: Int? = nil, tier: StorageTier = .file, keyRules: [KeyRule] = [], batchLimit: Int = 100,
        canList: Bool = true, reportsQuota: Bool = false, emitsAccountEvents: Bool = false,
        emitsRemoteChanges: Bool = false, listsInKeyOrder: Bool = false, cursorIsKey: Bool = false,
        requestsAtOnce: Int? = nil, tagsAreValueDigests: Bool = false, conditionalWrites: Bool = false
    ) {
        precondition(batchLimit >= 1, "batchLimit must be at least 1")
        self.maxValueBytes = maxValueBytes
        self.tier = tier
        self.keyRules = keyRules
        self.batchLimit = batchLimit
        self.canList = canList
        self.reportsQuota = reportsQuota
        self.emitsAccountEvents = emitsAccountEvents
        self.emitsRemoteChanges = emitsRemoteChanges
        self.listsInKeyOrder = listsInKeyOrder
        self.cursorIsKey = cursorIsKey
        self.requestsAtOnce = requestsAtOnce.map { max(1, $0) }
        self.tagsAreValueDigests = tagsAreValueDigests
        self.conditionalWrites = conditionalWrites
    }
}

/// The kind of storage behind a provider, which decides the tiering threshold that caps it.
public enum StorageTier: String, Sendable, Equatable {
    /// A small key-value store (the iCloud key-value store): capped by `kvMaxBytes`.
    case keyValue
    /// One record per key (CloudKit): capped by `recordMaxBytes`.
    case record
    /// Whole files or objects (Drive, S3, SQLite, a directory): no tiering cap.
    case file
}

/// A key set or removed, as a change feed reports it.
public struct KeyChange: Sendable, Hashable {
    /// The key.
    public var key: String
    /// Whether its last change was a removal.
    public var removed: Bool

    /// A change of `key`.
    public init(key: String, removed: Bool) {
        self.key = key
        self.removed = removed
    }
}

extension KeyChange {
    /// Equal when the keys have the same UTF-8 bytes (see ``StoreKey``) and both are removals or both are not.
    public static func == (lhs: KeyChange, rhs: KeyChange) -> Bool {
        lhs.removed == rhs.removed && StoreKey.bytesEqual(lhs.key, rhs.key)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(StoreKey(key))
        hasher.combine(removed)
    }
}

/// One page of a change feed.
public struct ChangePage: Sendable, Equatable {
    /// Keys set or removed since the cursor asked with, each at most once per page, in no particular order.
    public var changes: [KeyChange]
    /// Where the next page starts; once ``hasMore`` is false, where the next run's feed starts.
    public var cursor: String
    /// Whether more changes follow at ``cursor``.
    public var hasMore: Bool

    /// A page of `changes`.
    public init(changes: [KeyChange], cursor: String, hasMore: Bool) {
        self.changes = changes
        self.cursor = cursor
        self.hasMore = hasMore
    }
}

/// What a change feed answers for a cursor.
public enum ChangeFeedAnswer: Sendable, Equatable {
    /// The changes since the cursor.
    case changes(ChangePage)
    /// The cursor can no longer be served, and why: compare everything instead.
    case expired(String)
}

/// Space a provider reports.
///
/// A nil total means unlimited, not zero.
public struct ProviderQuota: Sendable, Equatable {
    /// Bytes in use; nil when unknown.
    public var usedBytes: Int64?
    /// Bytes available in all; nil means unlimited, not zero.
    public var totalBytes: Int64?

    /// Space used and in all; nil where unknown (a nil total is unlimited).
    public init(usedBytes: Int64?, totalBytes: Int64?) {
        self.usedBytes = usedBytes
        self.totalBytes = totalBytes
    }
}

/// The state of the account behind a provider.
public enum AccountStatus: String, Sendable, Equatable {
    case available, noAccount, restricted, temporarilyUnavailable, couldNotDetermine
}

/// A change of the account behind a provider.
public struct AccountEvent: Sendable, Equatable {
    /// Whether a different user is now signed in (or nobody is).
    public var identityChanged: Bool
    /// The account's state after the change.
    public var status: AccountStatus
    /// The provider that reported it.
    public var provider: String
    /// Identifies the underlying system event, so one event relayed by two providers is delivered once.
    public var eventID: String?

    /// An account change reported by `provider`.
    public init(identityChanged: Bool, status: AccountStatus, provider: String, eventID: String? = nil) {
        self.identityChanged = identityChanged
        self.status = status
        self.provider = provider
        self.eventID = eventID
    }
}

/// Data that changed elsewhere.
public struct RemoteChange: Sendable, Equatable {
    /// The provider that reported it.
    public var provider: String
    /// The keys that changed, when the provider knows them; nil for "something changed".
    public var keys: [String]?

    /// A change reported by `provider`, of `keys` when it knows them.
    public init(provider: String, keys: [String]?) {
        self.provider = provider
        self.keys = keys
    }
}

/// A live event subscription, stopped by ``cancel()``.
///
/// Cancelling twice is harmless.
public final class ProviderSubscription: Sendable {
    private let onCancel: Mutex<(@Sendable () -> Void)?>

    /// A subscription that runs `onCancel` once, when cancelled.
    public init(onCancel: @escaping @Sendable () -> Void) { self.onCancel = Mutex(onCancel) }

    /// Stops the events; later calls do nothing.
    public func cancel() {
        let action = onCancel.withLock { action in
            defer { action = nil }
            return action
        }
        action?()
    }
}
