import CloudSync
import Foundation

/// The bridge's stable error codes, the ones the reference bridge rejects with.
public struct CloudKitErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The stable text (`CK_NOT_AUTHENTICATED`).
    public let rawValue: String

    /// A code from its text.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Nobody is signed in (no web auth token, or it expired or was refused), or the API token was refused.
    public static let notAuthenticated = CloudKitErrorCode(rawValue: "CK_NOT_AUTHENTICATED")
    /// The custom zone does not exist (never created, or deleted): ``CloudKitBridge/ensureZone()`` creates it.
    public static let zoneNotFound = CloudKitErrorCode(rawValue: "CK_ZONE_NOT_FOUND")
    /// The change token was expired or refused: fetch again from nil.
    public static let tokenExpired = CloudKitErrorCode(rawValue: "CK_TOKEN_EXPIRED")
    /// The user's iCloud storage is full; not worth retrying until they free space.
    public static let quotaExceeded = CloudKitErrorCode(rawValue: "CK_QUOTA_EXCEEDED")
    /// Throttled or temporarily unavailable: retry after ``CloudKitError/retryAfterMs``.
    public static let retryLater = CloudKitErrorCode(rawValue: "CK_RETRY_LATER")
    /// CloudKit could not be reached, or did not answer in time.
    public static let network = CloudKitErrorCode(rawValue: "CK_NETWORK")
    /// The record exists (a create) or changed on the server since its change tag was read.
    public static let conflict = CloudKitErrorCode(rawValue: "CK_CONFLICT")
    /// The request was refused as malformed: a bad record name, type or field, or an unknown record type in
    /// production.
    public static let badInput = CloudKitErrorCode(rawValue: "CK_BAD_INPUT")
    /// Anything else.
    public static let error = CloudKitErrorCode(rawValue: "CK_ERROR")

    /// Every code, in documentation order.
    public static let all: [CloudKitErrorCode] = [
        .notAuthenticated, .zoneNotFound, .tokenExpired, .quotaExceeded, .retryLater, .network, .conflict, .badInput,
        .error,
    ]

    /// The stable text.
    public var description: String { rawValue }
}

/// A failure of the CloudKit bridge: the stable code, and what CloudKit said.
///
/// The message never holds a token: the API token and web auth tokens are struck from everything the server echoes.
public struct CloudKitError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What the caller should do.
    public var code: CloudKitErrorCode
    /// What happened.
    public var message: String
    /// What to do about it, as a clause starting with `; ` (empty when the code calls for nothing in particular):
    /// kept beside the message, so a caller that reads the error anew (a missing zone that is really an expired
    /// token) replaces the advice without editing the message's text.
    public var advice: String = ""
    /// CloudKit's `serverErrorCode` (`ZONE_NOT_FOUND`), when the server answered with one.
    public var serverErrorCode: String?
    /// The HTTP status of the answer, when there was one.
    public var httpStatus: Int?
    /// How long CloudKit asked to wait before retrying (its `retryAfter`), in milliseconds.
    public var retryAfterMs: Int?
    /// The record a per-record error concerns.
    public var recordName: String?
    /// The Apple sign-in address of an `AUTHENTICATION_REQUIRED` answer.
    public var redirectURL: String?
    /// The HTTP layer's error when no CloudKit answer was read (offline, timed out, cancelled, gave up retrying).
    public var underlying: CloudSyncError?
    /// CloudKit's own `reason`, with credentials struck, when it gave one.
    public var reason: String?

    /// An error; see the properties.
    public init(
        _ code: CloudKitErrorCode, _ message: String, serverErrorCode: String? = nil, httpStatus: Int? = nil,
        retryAfterMs: Int? = nil, recordName: String? = nil, redirectURL: String? = nil,
        underlying: CloudSyncError? = nil, reason: String? = nil
    ) {
        self.code = code
        self.message = message
        self.serverErrorCode = serverErrorCode
        self.httpStatus = httpStatus
        self.retryAfterMs = retryAfterMs
        self.recordName = recordName
        self.redirectURL = redirectURL
        self.underlying = underlying
        self.reason = reason
    }

    /// What happened and what to do: the message and its advice.
    public var text: String { message + advice }

    /// `CK_CODE (SERVER_CODE): message; advice`.
    public var description: String {
        "\(code.rawValue)\(serverErrorCode.map { " (\($0))" } ?? ""): \(text)"
    }

    /// The bridge code for a `serverErrorCode` (api-facts B.6).
    public static func code(forServerErrorCode serverCode: String, reason: String = "") -> CloudKitErrorCode {
        switch serverCode {
        case "AUTHENTICATION_REQUIRED", "AUTHENTICATION_FAILED": return .notAuthenticated
        case "ZONE_NOT_FOUND": return .zoneNotFound
        case "QUOTA_EXCEEDED": return .quotaExceeded
        case "THROTTLED", "TRY_AGAIN_LATER": return .retryLater
        case "CONFLICT", "EXISTS": return .conflict
        case "CHANGE_TOKEN_EXPIRED", "SYNC_TOKEN_EXPIRED": return .tokenExpired
        case "BAD_REQUEST", "VALIDATING_REFERENCE_ERROR", "ATOMIC_ERROR", "NOT_FOUND", "LIMIT_EXCEEDED":
            return .badInput
        default: return .error
        }
    }

    /// The error a CloudKit error dictionary (top-level or per record) describes.
    ///
    /// `aboutSyncToken`: the request carried a sync token (`changes/zone` after a cursor), so a `BAD_REQUEST` whose
    /// reason names a token is that token expired or refused (``CloudKitErrorCode/tokenExpired``). The code and the
    /// reason decide together, since CloudKit Web Services documents no code of its own for it.
    static func from(
        dictionary: [String: Any], httpStatus: Int?, doing what: String, secrets: [String],
        aboutSyncToken: Bool = false
    ) -> CloudKitError {
        let serverCode = dictionary["serverErrorCode"] as? String ?? "UNKNOWN_ERROR"
        let reason = strike(secrets, from: dictionary["reason"] as? String ?? "")
        let retryAfter = (dictionary["retryAfter"] as? NSNumber).map { Int(($0.doubleValue * 1000).rounded(.up)) }
        let recordName = dictionary["recordName"] as? String
        var code = code(forServerErrorCode: serverCode, reason: reason)
        if aboutSyncToken, serverCode == "BAD_REQUEST", mentionsSyncToken(reason) {
            code = .tokenExpired
        }
        let status = httpStatus.map { " (HTTP \($0))" } ?? ""
        let said = reason.isEmpty ? "" : ": \(reason)"
        var error = CloudKitError(
            code, "CloudKit answered \(serverCode)\(status) \(what)\(said)",
            serverErrorCode: serverCode, httpStatus: httpStatus, retryAfterMs: retryAfter, recordName: recordName,
            redirectURL: dictionary["redirectURL"] as? String, reason: reason.isEmpty ? nil : reason)
        error.advice = Self.advice(for: code)
        return error
    }

    /// Whether a `BAD_REQUEST` reason is about the sync token; CloudKit Web Services documents no code of its own for
    /// an expired change token, so the reason is what tells (api-facts B.6 lists none; this is an inference).
    ///
    /// Any token but the request's credentials (the API token, the web auth token) counts, in whatever words: "the
    /// syncToken is expired", "change token", "continuation marker".
    static func mentionsSyncToken(_ reason: String) -> Bool {
        let lower = reason.lowercased()
        if lower.contains("api token") || lower.contains("apitoken") || lower.contains("auth") { return false }
        return ["token", "continuation", "marker"].contains { lower.contains($0) }
    }

    /// What to do about `code`, as a clause starting with `; `.
    static func advice(for code: CloudKitErrorCode) -> String {
        switch code {
        case .notAuthenticated: return "; sign in again (`cloudsync login`) or check the API token"
        case .zoneNotFound: return "; create the zone (ensureZone, `cloudsync cloudkit ensure-zone`)"
        case .tokenExpired: return "; fetch the changes again from the start (no token)"
        case .quotaExceeded: return "; the user's iCloud storage is full, free space there"
        case .retryLater: return "; try again later"
        default: return ""
        }
    }

    /// The bridge error for a failure of the HTTP layer (no CloudKit answer was read).
    static func from(_ error: CloudSyncError, doing what: String) -> CloudKitError {
        let code: CloudKitErrorCode
        switch error.code {
        case .offline, .timeout: code = .network
        case .rateLimited, .server: code = .retryLater
        case .notSignedIn: code = .notAuthenticated
        default: code = .error
        }
        return CloudKitError(
            code, "\(what): \(error.message)", retryAfterMs: error.retryAfterMs, underlying: error)
    }
}

/// `text` with every one of `secrets` replaced by `<redacted>`, longest first, raw and percent-encoded.
func strike(_ secrets: [String], from text: String) -> String {
    var all: [String] = []
    for secret in secrets where !secret.isEmpty {
        all.append(secret)
        if let encoded = secret.addingPercentEncoding(withAllowedCharacters: .alphanumerics), encoded != secret {
            all.append(encoded)
        }
    }
    return all.sorted { $0.count > $1.count }.reduce(text) {
        $0.replacingOccurrences(of: $1, with: "<redacted>")
    }
}
