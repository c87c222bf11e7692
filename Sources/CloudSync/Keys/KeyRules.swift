internal import CloudSyncSodium

/// A rule a provider imposes on keys, checked by the store before any request.
public enum KeyRule: Sendable, Hashable, CustomStringConvertible {
    /// At least one character (every provider).
    case nonEmpty
    /// Only ASCII letters, digits, `.`, `_` and `-` (CloudKit record names).
    case recordNameCharacters
    /// No leading `_` (CloudKit reserves it).
    case noLeadingUnderscore
    /// At most this many characters.
    case maxCharacters(Int)
    /// At most this many bytes of UTF-8 (the iCloud key-value store: 64).
    case maxUTF8Bytes(Int)

    /// The rules of CloudKit record names.
    public static let cloudKitRecordName: [KeyRule] = [
        .recordNameCharacters, .noLeadingUnderscore, .maxCharacters(255),
    ]
    /// The rule of the iCloud key-value store.
    public static let iCloudKeyValue: [KeyRule] = [.maxUTF8Bytes(64)]

    /// The rule as a sentence, which starts the `ERR_INVALID_KEY` message.
    public var description: String {
        switch self {
        case .nonEmpty: return "a key may not be empty"
        case .recordNameCharacters: return "a key may contain only ASCII letters, digits, and . _ -"
        case .noLeadingUnderscore: return "a key may not start with _"
        case .maxCharacters(let limit): return "a key may be at most \(limit) characters"
        case .maxUTF8Bytes(let limit): return "a key may be at most \(limit) bytes of UTF-8"
        }
    }

    /// Whether `key` satisfies the rule.
    public func allows(_ key: String) -> Bool {
        switch self {
        case .nonEmpty: return !key.isEmpty
        case .recordNameCharacters: return key.utf8.allSatisfy(Self.isRecordNameByte)
        case .noLeadingUnderscore: return !key.hasPrefix("_")
        case .maxCharacters(let limit): return key.count <= limit
        case .maxUTF8Bytes(let limit): return key.utf8.count <= limit
        }
    }

    static func isRecordNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }
}

/// Maps any string to a key every provider accepts.
///
/// A key that already satisfies every rule comes back unchanged. Otherwise each character outside
/// `A-Z a-z 0-9 . _ -` becomes `_`, a leading `_` becomes `-`, the result is cut to fit 64 bytes, and a `-` and 16
/// hex digits of a SHA-256 hash of the original are appended, so two rewritten inputs share a key only if those 64
/// bits collide (a truncated or rewritten key without the hash would silently merge unrelated values). A rewritten
/// key is itself valid, so an input equal to another input's rewritten form maps to the same key: a caller that
/// needs the mapping one-to-one keeps its own record of inputs.
public func sanitizeKey(_ key: String) -> String {
    let everyRule: [KeyRule] = [.nonEmpty] + KeyRule.cloudKitRecordName + KeyRule.iCloudKeyValue
    if everyRule.allSatisfy({ $0.allows(key) }) { return key }

    var body = String(
        key.unicodeScalars.map { scalar -> Character in
            scalar.isASCII && KeyRule.isRecordNameByte(UInt8(scalar.value)) ? Character(scalar) : "_"
        })
    if body.hasPrefix("_") { body = "-" + body.dropFirst() }
    // 8 bytes of hash are 16 hex digits; with the separator they take 17 of the 64 bytes.
    let suffix = "-" + Hex.encode(Array(SHA256.hash(Array(key.utf8)).prefix(8)))
    return String(body.prefix(64 - suffix.utf8.count)) + suffix
}
