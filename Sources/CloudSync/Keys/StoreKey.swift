#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A key as every provider sees it: its UTF-8 bytes.
///
/// Swift's `String` equality is Unicode canonical equivalence, so `"café"` spelt with U+00E9 and with `e` + U+0301
/// are one `String` value in a `Set` or a `Dictionary` — but they are two different keys to a directory, S3, Drive,
/// CloudKit or SQLite, which all compare bytes. `StoreKey` is the key's identity everywhere the store, the outbox,
/// the runner or a provider holds keys in a collection: two keys are equal exactly when their UTF-8 bytes are, they
/// hash by those bytes, and they order by them (the order of ``ProviderCapabilities/listsInKeyOrder``, of SQLite's
/// `BINARY` collation and of S3's listings).
///
/// Key the collection by `StoreKey` (`[StoreKey: String]`, `Set<StoreKey>`) and sort keys with ``StoreKey/<(_:_:)`` or
/// ``StoreKey/bytesPrecede(_:_:)``, never with `String`'s own `==`, hashing or `<`.
public struct StoreKey: Hashable, Comparable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The key, as the store's API takes it.
    public let string: String

    /// The key `string`, identified by its UTF-8 bytes.
    public init(_ string: String) { self.string = string }

    /// The key written as a literal.
    public init(stringLiteral value: String) { self.string = value }

    /// The key itself.
    public var description: String { string }

    public static func == (lhs: StoreKey, rhs: StoreKey) -> Bool { bytesEqual(lhs.string, rhs.string) }

    public static func < (lhs: StoreKey, rhs: StoreKey) -> Bool { bytesPrecede(lhs.string, rhs.string) }

    public func hash(into hasher: inout Hasher) {
        let hashed: Void? = string.utf8.withContiguousStorageIfAvailable { bytes in
            hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
        }
        if hashed == nil { for byte in string.utf8 { hasher.combine(byte) } }
        hasher.combine(string.utf8.count)
    }

    /// Whether `lhs` and `rhs` are the same key: the same UTF-8 bytes.
    public static func bytesEqual(_ lhs: String, _ rhs: String) -> Bool {
        guard lhs.utf8.count == rhs.utf8.count else { return false }
        return compareBytes(lhs, rhs) == 0
    }

    /// Whether key `lhs` sorts before `rhs` in bytewise UTF-8 order (a proper prefix sorts first).
    public static func bytesPrecede(_ lhs: String, _ rhs: String) -> Bool { compareBytes(lhs, rhs) < 0 }

    /// Negative, zero or positive as the bytes `left` sort before, equal or after `right`: memcmp order, then the
    /// shorter first (SQLite's BINARY collation orders text so too).
    public static func compareBytes(_ left: UnsafeRawBufferPointer, _ right: UnsafeRawBufferPointer) -> Int {
        let shared = min(left.count, right.count)
        if shared > 0, let l = left.baseAddress, let r = right.baseAddress {
            let order = memcmp(l, r, shared)
            if order != 0 { return Int(order) }
        }
        return left.count - right.count
    }

    /// Negative, zero or positive as `lhs`'s UTF-8 bytes sort before, equal or after `rhs`'s.
    public static func compareBytes(_ lhs: String, _ rhs: String) -> Int {
        let compared: Int? =
            lhs.utf8.withContiguousStorageIfAvailable { left in
                rhs.utf8.withContiguousStorageIfAvailable { right in
                    compareBytes(UnsafeRawBufferPointer(left), UnsafeRawBufferPointer(right))
                }
            } ?? nil
        if let compared { return compared }
        var left = lhs.utf8.makeIterator()
        var right = rhs.utf8.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case (let l?, let r?): if l != r { return Int(l) - Int(r) }
            }
        }
    }
}

extension Sequence where Element == String {
    /// The keys in bytewise UTF-8 order, the order providers list in.
    public func sortedAsKeys() -> [String] { sorted(by: StoreKey.bytesPrecede) }

    /// The keys as a set of ``StoreKey``s: canonically equivalent spellings stay distinct.
    public func keySet() -> Set<StoreKey> { Set(lazy.map { StoreKey($0) }) }
}
