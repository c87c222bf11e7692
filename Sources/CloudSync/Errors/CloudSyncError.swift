/// A stable error code.
///
/// The list below, and which codes are retryable, is the one place either is decided.
public struct ErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The stable text of the code (`ERR_TIMEOUT`), the form reports and logs carry.
    public let rawValue: String

    /// A code from its text, so codes read back from reports and outbox rows compare equal to the named ones.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The operation ran out of time (the store's `timeout`).
    ///
    /// Retryable: it says nothing about whether the
    /// operation can succeed.
    public static let timeout = ErrorCode(rawValue: "ERR_TIMEOUT")
    /// The provider could not be reached.
    public static let offline = ErrorCode(rawValue: "ERR_OFFLINE")
    /// The provider asked for fewer requests; see `retryAfterMs`.
    public static let rateLimited = ErrorCode(rawValue: "ERR_RATE_LIMITED")
    /// The account exists but is temporarily unavailable.
    public static let accountUnavailable = ErrorCode(rawValue: "ERR_ACCOUNT_UNAVAILABLE")
    /// The provider failed on its side (an HTTP 5xx); trying again later may work.
    public static let server = ErrorCode(rawValue: "ERR_SERVER")
    /// Nobody is signed in to the provider, or the credentials were revoked.
    public static let notSignedIn = ErrorCode(rawValue: "ERR_NOT_SIGNED_IN")
    /// The provider is full.
    public static let quotaExceeded = ErrorCode(rawValue: "ERR_QUOTA_EXCEEDED")
    /// The encoded value fits no configured provider.
    public static let payloadTooLarge = ErrorCode(rawValue: "ERR_PAYLOAD_TOO_LARGE")
    /// The key breaks a rule of a configured provider.
    public static let invalidKey = ErrorCode(rawValue: "ERR_INVALID_KEY")
    /// The provider's configuration (container, bucket, credentials' scope) is wrong.
    public static let containerMisconfigured = ErrorCode(rawValue: "ERR_CONTAINER_MISCONFIGURED")
    /// A stored value could not be decoded by the codec (wrong key, tampered, not an envelope).
    public static let decode = ErrorCode(rawValue: "ERR_DECODE")
    /// A value could not be encoded by the codec.
    public static let encode = ErrorCode(rawValue: "ERR_ENCODE")
    /// No configured provider is available for the operation.
    public static let noProvider = ErrorCode(rawValue: "ERR_NO_PROVIDER")
    /// The provider cannot do what was asked (list keys, for example).
    public static let unsupported = ErrorCode(rawValue: "ERR_UNSUPPORTED")
    /// The provider failed in a way none of the other codes describe, or broke the provider contract.
    public static let provider = ErrorCode(rawValue: "ERR_PROVIDER")
    /// The operation was cancelled by its caller (a task cancelled, a run interrupted); nothing failed.
    ///
    /// Not retryable by the outbox: the caller chose to stop.
    public static let cancelled = ErrorCode(rawValue: "ERR_CANCELLED")
    /// Another process holds what this one needs: another run of the same pipeline holds its lock.
    ///
    /// Retryable: it passes when that run ends.
    public static let locked = ErrorCode(rawValue: "ERR_LOCKED")
    /// The store was closed.
    public static let closed = ErrorCode(rawValue: "ERR_CLOSED")
    /// The store or a provider was configured inconsistently (two providers with one id, an unknown provider).
    public static let config = ErrorCode(rawValue: "ERR_CONFIG")
    /// A sync would delete more keys than its `maxDeletes` allows, so it deleted none; check them, then allow the
    /// deletions once (`cloudsync run --force`).
    public static let tooManyDeletes = ErrorCode(rawValue: "ERR_TOO_MANY_DELETES")
    /// A job did not run because a job it needs (`needs:`) did not end `ok`; fix that one, then run again.
    public static let needsNotMet = ErrorCode(rawValue: "ERR_NEEDS_NOT_MET")
    /// A conditional write or removal found the key changed since it was read (another writer landed in between), so
    /// it changed nothing and left the other writer's value; the next run sees the new value.
    ///
    /// Not retryable: sending the same change again would overwrite what the condition protects.
    public static let changedSinceRead = ErrorCode(rawValue: "ERR_CHANGED_SINCE_READ")
    /// A migration's value transform failed on the key's value (it is not JSON, the jq program raised an error or
    /// gave no single value, or it reached a CPU or memory limit), so the key was not written; fix the program or
    /// the value, then run again.
    public static let transform = ErrorCode(rawValue: "ERR_TRANSFORM")

    /// Every code the library produces, in documentation order.
    public static let all: [ErrorCode] = [
        .timeout, .offline, .rateLimited, .accountUnavailable, .server, .notSignedIn, .quotaExceeded,
        .payloadTooLarge, .invalidKey, .containerMisconfigured, .decode, .encode, .noProvider, .unsupported,
        .provider, .cancelled, .locked, .closed, .config, .tooManyDeletes, .needsNotMet, .changedSinceRead,
        .transform,
    ]

    /// Whether trying the same operation again later may succeed without anyone doing anything.
    ///
    /// Only these are queued by the outbox; everything else needs a person (sign in, free space, fix the key or the
    /// configuration) and fails at once.
    public var isRetryable: Bool {
        switch self {
        case .timeout, .offline, .rateLimited, .accountUnavailable, .server, .locked: return true
        default: return false
        }
    }

    /// The stable text, so interpolating a code prints what reports carry.
    public var description: String { rawValue }
}

/// The one error type of the store and its providers: a stable code, what happened, and what it concerns.
public struct CloudSyncError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What the caller should do about it (retry, sign in, fix the key), stable across releases.
    public let code: ErrorCode
    /// What happened and, where there is something to do, what to do.
    ///
    /// Never holds values or secrets.
    public let message: String
    /// The provider concerned, by id.
    public var provider: String?
    /// The key concerned.
    public var key: String?
    /// How long the provider asked the caller to wait before trying again.
    public var retryAfterMs: Int?
    /// What the service said, as fields (HTTP status, its own code and reason, the request id); nil when the error
    /// did not come from a service's answer.
    public var context: ErrorContext?

    /// An error with `code` and a `message` saying what happened and what to do; name the provider and key where
    /// there are ones, so reports can point at them, and keep what the service said in `context`.
    public init(
        _ code: ErrorCode, _ message: String, provider: String? = nil, key: String? = nil, retryAfterMs: Int? = nil,
        context: ErrorContext? = nil
    ) {
        self.code = code
        self.message = message
        self.provider = provider
        self.key = key
        self.retryAfterMs = retryAfterMs
        self.context = context
    }

    /// The same error with another `code` and `message` (a layer that knows what the service meant), keeping where
    /// it came from: provider, key, the wait asked for and the service's context.
    public func restated(_ code: ErrorCode, _ message: String) -> CloudSyncError {
        CloudSyncError(code, message, provider: provider, key: key, retryAfterMs: retryAfterMs, context: context)
    }

    /// Whether trying again later may succeed; see ``ErrorCode/isRetryable``.
    public var isRetryable: Bool { code.isRetryable }

    /// `ERR_CODE [provider p, key "k"]: message`.
    public var description: String {
        var context: [String] = []
        if let provider { context.append("provider \(provider)") }
        if let key { context.append("key \"\(key)\"") }
        if let retryAfterMs { context.append("retry after \(retryAfterMs) ms") }
        let concerning = context.isEmpty ? "" : " [\(context.joined(separator: ", "))]"
        return "\(code.rawValue)\(concerning): \(message)"
    }

    /// The same error, attributed to `provider` and `key` where it did not already name them.
    public func attributed(provider: String? = nil, key: String? = nil) -> CloudSyncError {
        var copy = self
        if copy.provider == nil { copy.provider = provider }
        if copy.key == nil { copy.key = key }
        return copy
    }

    /// The error of a batch that failed as a whole, handed to one of its keys: the same code, message and provider,
    /// naming `key` (whichever key's request met the failure first).
    public func concerning(key: String) -> CloudSyncError {
        var copy = self
        copy.key = key
        return copy
    }

    /// The same error naming no key: a failure of the whole batch (the connection, the account, the bucket) that
    /// one key's request happened to meet first.
    public func concerningNoKey() -> CloudSyncError {
        var copy = self
        copy.key = nil
        return copy
    }

    /// Any error a provider threw, as a `CloudSyncError`.
    static func wrapping(_ error: any Error, provider: String, key: String? = nil) -> CloudSyncError {
        if let error = error as? CloudSyncError { return error.attributed(provider: provider, key: key) }
        if error is CancellationError {
            return CloudSyncError(.cancelled, "the operation was cancelled", provider: provider, key: key)
        }
        return CloudSyncError(
            .provider, "provider failed: \(error)", provider: provider, key: key)
    }
}
