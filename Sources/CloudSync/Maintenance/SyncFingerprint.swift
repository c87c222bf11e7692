internal import CloudSyncSodium

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What each provider held of one key when a sync last left it: a digest of the encoded value per provider.
///
/// Values never appear, only BLAKE2b digests of what each provider stored (after its codec), so a provider whose
/// codec encrypts is compared with its own earlier copy, never with another provider's.
///
/// A fingerprint is kept in its stored form, ``text``: a sync reads one per key from the snapshot and, for a key no
/// provider changed, only compares digests in place, so it never builds a dictionary for it.
///
/// A fingerprint may also hold each provider's version tag (``KeyPage/versions``), recorded only by a sync that found
/// every provider the fingerprint names holding one value, each the copy its digest describes. A later sync whose
/// listings give the same tags knows the key is still in sync without reading it (``tags``).
public struct SyncFingerprint: Sendable, Equatable {
    /// The stored form: `provider=digest` pairs sorted by provider, separated by the ASCII unit separator; then, when
    /// tags were recorded, the ASCII record separator and `provider=tag` pairs in the same form.
    public private(set) var text: String

    /// Digest (hexadecimal) of the encoded value each provider held, by provider id.
    ///
    /// A provider that lacked the key has no entry. Setting it drops any recorded ``tags``, which vouched for the
    /// digests before.
    public var digests: [String: String] {
        get {
            var digests: [String: String] = [:]
            forEachDigest { provider, digest in
                digests[String(decoding: provider, as: UTF8.self)] = String(decoding: digest, as: UTF8.self)
            }
            return digests
        }
        set { text = Self.text(of: newValue) }
    }

    /// A fingerprint of these digests.
    public init(_ digests: [String: String]) { text = Self.text(of: digests) }

    /// A fingerprint of each provider's digest, positionally (`ids[i]` held `digests[i]`, nil where it held nothing),
    /// with `others` (pairs of provider id and digest) besides, and the tags of `ids`, positionally, when given: what
    /// ``init(_:tags:)`` makes of the same digests and tags, without a dictionary.
    ///
    /// A sync makes one for every key it writes or first records, so the common case (no `others`, `ids` already in
    /// order) spells the text straight into one allocation; any other case sorts pairs first.
    init(ids: [String], digests: [String?], others: [(String, String)], tags: [String?]? = nil) {
        guard others.isEmpty, ids.count <= 64, zip(ids, ids.dropFirst()).allSatisfy({ $0 < $1 }) else {
            self.init(sorting: ids, digests: digests, others: others, tags: tags)
            return
        }
        // Which tags are kept, and how: bit `i` of `kept` when provider `i`'s tag is recorded, of `asDigest` when it
        // is its digest (kept empty).
        var (kept, asDigest): (UInt64, UInt64) = (0, 0)
        var count = 0
        var pairs = 0
        for (id, digest) in zip(ids, digests) {
            guard let digest else { continue }
            count += (pairs > 0 ? 1 : 0) + id.utf8.count + 1 + digest.utf8.count
            pairs += 1
        }
        if let tags {
            for (index, tag) in tags.enumerated() where index < ids.count {
                guard let tag, Self.canRecord(tag: tag) else { continue }
                kept |= 1 << index
                let same = digests[index] == tag
                if same { asDigest |= 1 << index }
                count += 1 + ids[index].utf8.count + 1 + (same ? 0 : tag.utf8.count)
            }
        }
        let spelled = String(unsafeUninitializedCapacity: count) { buffer in
            var at = 0
            func put(_ text: String) {
                at = UnsafeMutableBufferPointer(rebasing: buffer[at...]).initialize(from: text.utf8).1 + at
            }
            func put(_ byte: UInt8) {
                buffer[at] = byte
                at += 1
            }
            var first = true
            for (id, digest) in zip(ids, digests) {
                guard let digest else { continue }
                if !first { put(Self.separator) }
                first = false
                put(id)
                put(UInt8(ascii: "="))
                put(digest)
            }
            if kept != 0, let tags {
                put(Self.tagsMark)
                first = true
                for index in ids.indices where kept & (1 << index) != 0 {
                    if !first { put(Self.separator) }
                    first = false
                    put(ids[index])
                    put(UInt8(ascii: "="))
                    if asDigest & (1 << index) == 0, let tag = tags[index] { put(tag) }
                }
            }
            return at
        }
        self.init(text: spelled)
    }

    /// ``init(ids:digests:others:tags:)`` for any ids and others: the pairs are sorted by provider id first.
    private init(sorting ids: [String], digests: [String?], others: [(String, String)], tags: [String?]?) {
        var pairs = others
        for (id, digest) in zip(ids, digests) { if let digest { pairs.append((id, digest)) } }
        pairs.sort { $0.0 < $1.0 }
        var text = ""
        text.reserveCapacity(pairs.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 2 } + 16)
        Self.append(pairs, to: &text)
        if let tags {
            var recorded: [(String, String)] = []
            for (index, tag) in tags.enumerated() {
                guard let tag, let kept = Self.recorded(tag: tag, digest: digests[index]) else { continue }
                recorded.append((ids[index], kept))
            }
            if !recorded.isEmpty {
                recorded.sort { $0.0 < $1.0 }
                text.unicodeScalars.append("\u{1E}")
                Self.append(recorded, to: &text)
            }
        }
        self.text = text
    }

    /// Appends `pairs` (sorted by provider id) as `id=value` separated by the unit separator.
    private static func append(_ pairs: [(String, String)], to text: inout String) {
        for (index, (id, value)) in pairs.enumerated() {
            if index > 0 { text.unicodeScalars.append("\u{1F}") }
            text += id
            text.unicodeScalars.append("=")
            text += value
        }
    }

    /// The fingerprint `text` spells (as ``text`` writes it).
    public init(text: String) { self.text = text }

    /// A fingerprint of these digests, each provider's listed version tag recorded beside its digest (a tag
    /// ``canRecord(tag:)`` refuses is left out).
    ///
    /// A tag equal to its provider's digest (a provider whose tag is the digest of the stored value, as SQLite's is)
    /// is kept as an empty tag, `provider=`, rather than twice.
    public init(_ digests: [String: String], tags: [String: String]) {
        text = Self.text(of: digests)
        var recorded: [String: String] = [:]
        for (provider, tag) in tags {
            if let kept = Self.recorded(tag: tag, digest: digests[provider]) { recorded[provider] = kept }
        }
        if !recorded.isEmpty { text += "\u{1E}" + Self.text(of: recorded) }
    }

    private static let separator: UInt8 = 0x1F
    /// Starts the tags, after the digests.
    private static let tagsMark: UInt8 = 0x1E

    private static func text(of digests: [String: String]) -> String {
        var text = ""
        append(digests.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }, to: &text)
        return text
    }

    /// How `tag` is kept beside `digest`: nil when it cannot be (``canRecord(tag:)``), empty when it is the digest.
    private static func recorded(tag: String, digest: String?) -> String? {
        guard canRecord(tag: tag) else { return nil }
        return digest == tag ? "" : tag
    }

    /// Whether `tag` can be kept in a fingerprint: not empty, and without "=" or either separator (a tag that cannot
    /// is simply not recorded, so its key is read on every sync).
    public static func canRecord(tag: String) -> Bool {
        guard !tag.isEmpty else { return false }
        // A plain loop over the bytes: a sync asks this of every tag it records, and stepping through `utf8` by
        // index was most of building a row.
        var tag = tag
        return tag.withUTF8 { bytes in
            for byte in bytes where byte == UInt8(ascii: "=") || byte == separator || byte == tagsMark { return false }
            return true
        }
    }

    /// Each provider's version tag recorded with its digest, by provider id; empty when none was recorded.
    public var tags: [String: String] {
        var tags: [String: String] = [:]
        var text = text
        text.withUTF8 { bytes in
            guard let recorded = Self.sections(of: UnsafeRawBufferPointer(bytes)).tags else { return }
            Self.forEachPair(in: recorded) { provider, tag in
                tags[String(decoding: provider, as: UTF8.self)] = String(decoding: tag, as: UTF8.self)
            }
        }
        // An empty tag stands for the provider's digest.
        let digests = digests
        for (provider, tag) in tags where tag.isEmpty { tags[provider] = digests[provider] }
        return tags
    }

    /// These digests, with `tags` recorded instead of any recorded now.
    public func withTags(_ tags: [String: String]) -> SyncFingerprint {
        var untagged = self
        var text = text
        untagged.text = text.withUTF8 {
            String(decoding: Self.sections(of: UnsafeRawBufferPointer($0)).digests, as: UTF8.self)
        }
        return tags.isEmpty ? untagged : SyncFingerprint(untagged.digests, tags: tags)
    }

    /// These digests, with the tags of `ids` (positionally; nil for none) recorded instead of any recorded now.
    func withTags(_ tags: [String?], of ids: [String]) -> SyncFingerprint {
        withTags(Dictionary(uniqueKeysWithValues: zip(ids, tags).compactMap { id, tag in tag.map { (id, $0) } }))
    }

    /// Whether the tag recorded for `provider` is `tag`: the pair `provider=tag` is looked for in place, since a sync
    /// asks this of every listed copy of every key.
    func recordsTag(_ tag: String, for provider: String) -> Bool {
        var text = text
        var provider = provider
        var tag = tag
        return text.withUTF8 { bytes in
            let (digests, tags) = Self.sections(of: UnsafeRawBufferPointer(bytes))
            guard let tags else { return false }
            return provider.withUTF8 { id in
                tag.withUTF8 { tag in
                    let id = UnsafeRawBufferPointer(id)
                    let tag = UnsafeRawBufferPointer(tag)
                    if Self.holdsPair(tags, id: id, value: tag) { return true }
                    // An empty tag: the provider's tag is its digest.
                    return Self.holdsPair(tags, id: id, value: UnsafeRawBufferPointer(start: nil, count: 0))
                        && Self.holdsPair(digests, id: id, value: tag)
                }
            }
        }
    }

    /// Whether the tag recorded for each provider of `ids` is the one `columns` gives key `item` (a sync page's
    /// listed tags, positionally by provider): ``recordsTag(_:for:)`` for every provider, which a sync asks of every
    /// listed key, in one look at the stored text.
    func recordsTags(_ columns: [[String?]], item: Int, of ids: [String]) -> Bool {
        recordsTags(of: ids) { columns[$0][item] }
    }

    /// Whether the tag recorded for each provider of `ids` is `tag(i)` for the provider at position `i` (false where
    /// it answers nil): the test that spares a sync reading a key, in one look at the stored text.
    public func recordsTags(of ids: [String], _ tag: (Int) -> String?) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            let (digests, tags) = Self.sections(of: UnsafeRawBufferPointer(bytes))
            guard let tags else { return false }
            for (index, id) in ids.enumerated() {
                guard let tag = tag(index) else { return false }
                let held = id.utf8.withContiguousStorageIfAvailable { id in
                    tag.utf8.withContiguousStorageIfAvailable { tag in
                        Self.recordsTag(
                            UnsafeRawBufferPointer(tag), for: UnsafeRawBufferPointer(id), tags: tags, digests: digests)
                    }
                }
                guard (held ?? nil) ?? recordsTag(tag, for: id) else { return false }
            }
            return true
        }
    }

    /// Whether `tags` records `tag` for provider `id`: as itself, or as an empty tag where `digests` records it as
    /// the provider's digest.
    private static func recordsTag(
        _ tag: UnsafeRawBufferPointer, for id: UnsafeRawBufferPointer, tags: UnsafeRawBufferPointer,
        digests: UnsafeRawBufferPointer
    ) -> Bool {
        guard let recorded = value(of: id, in: tags) else { return false }
        if recorded.isEmpty { return value(of: id, in: digests).map { StoreKey.compareBytes($0, tag) == 0 } ?? false }
        return StoreKey.compareBytes(recorded, tag) == 0
    }

    /// The value of provider `id`'s pair in `pairs` (`id=value` pairs separated by the unit separator).
    ///
    /// Nil when it has none. A value never holds "=", so a pair whose rest after `id=` does is another provider's (an
    /// id may hold "=").
    private static func value(of id: UnsafeRawBufferPointer, in pairs: UnsafeRawBufferPointer)
        -> UnsafeRawBufferPointer?
    {
        // memchr and memcmp: a sync asks this of every provider of every key it lists.
        guard let base = pairs.baseAddress else { return nil }
        var start = 0
        while start < pairs.count {
            let end =
                memchr(base + start, Int32(separator), pairs.count - start).map { UnsafeRawPointer($0) - base }
                ?? pairs.count
            let valueStart = start + id.count + 1
            if valueStart <= end, pairs[valueStart - 1] == UInt8(ascii: "="),
                id.isEmpty || memcmp(base + start, id.baseAddress!, id.count) == 0
            {
                let value = UnsafeRawBufferPointer(start: base + valueStart, count: end - valueStart)
                if value.isEmpty || memchr(value.baseAddress!, Int32(UInt8(ascii: "=")), value.count) == nil {
                    return value
                }
            }
            start = end + 1
        }
        return nil
    }

    /// The stored text's digests, and its tags when any were recorded (each without the mark between them).
    private static func sections(of text: UnsafeRawBufferPointer)
        -> (digests: UnsafeRawBufferPointer, tags: UnsafeRawBufferPointer?)
    {
        guard let base = text.baseAddress, let found = memchr(base, Int32(tagsMark), text.count) else {
            return (text, nil)
        }
        let mark = UnsafeRawPointer(found) - base
        return (
            UnsafeRawBufferPointer(rebasing: text[..<mark]), UnsafeRawBufferPointer(rebasing: text[(mark + 1)...])
        )
    }

    /// Calls `body` with each `id=value` pair of `pairs` (separated by the unit separator), split at the pair's last
    /// "=" (a provider id may hold one; a digest or a tag never does); a pair without one is passed over.
    private static func forEachPair(
        in pairs: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void
    ) rethrows {
        var start = 0
        while start < pairs.count {
            var end = start
            while end < pairs.count, pairs[end] != separator { end += 1 }
            var equals = end - 1
            while equals >= start, pairs[equals] != UInt8(ascii: "=") { equals -= 1 }
            if equals >= start {
                try body(
                    UnsafeRawBufferPointer(rebasing: pairs[start..<equals]),
                    UnsafeRawBufferPointer(rebasing: pairs[(equals + 1)..<end]))
            }
            start = end + 1
        }
    }

    /// Whether `pairs` (`id=value` pairs separated by the unit separator) holds exactly `id`=`value`: the value
    /// ``value(of:in:)`` finds for `id` is `value`.
    private static func holdsPair(
        _ pairs: UnsafeRawBufferPointer, id: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer
    ) -> Bool {
        Self.value(of: id, in: pairs).map { StoreKey.compareBytes($0, value) == 0 } ?? false
    }

    /// Whether a digest is recorded for `provider`: it held the key when the row was written.
    func hasDigest(for provider: String) -> Bool {
        var found = false
        var provider = provider
        provider.withUTF8 { id in
            forEachDigest { recorded, _ in
                if !found, StoreKey.compareBytes(recorded, UnsafeRawBufferPointer(id)) == 0 { found = true }
            }
        }
        return found
    }

    /// The recorded digests of providers other than `ids`, as (provider id, digest) pairs in stored order; empty
    /// (and nothing made) when every recorded provider is one of `ids`.
    func digests(besides ids: [String]) -> [(String, String)] {
        var others: [(String, String)] = []
        forEachDigest { provider, digest in
            let listed = ids.contains { id in
                var id = id
                return id.withUTF8 { StoreKey.compareBytes(provider, UnsafeRawBufferPointer($0)) == 0 }
            }
            if !listed {
                others.append((String(decoding: provider, as: UTF8.self), String(decoding: digest, as: UTF8.self)))
            }
        }
        return others
    }

    /// Whether the digest recorded for `provider` is `digest` (false when none is recorded).
    func records(_ digest: String, for provider: String) -> Bool {
        var digest = digest
        return digest.withUTF8 { records(UnsafeRawBufferPointer($0), for: provider) }
    }

    /// Calls `body` with each provider's id and digest, as bytes, in stored order.
    func forEachDigest(_ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void) rethrows {
        var text = text
        try text.withUTF8 { bytes in
            try Self.forEachPair(in: Self.sections(of: UnsafeRawBufferPointer(bytes)).digests, body)
        }
    }

    /// Whether the digest recorded for `provider` is `digest` (false when none is recorded).
    ///
    /// Called for every copy of every key a sync finds unchanged, so it looks for the exact pair `provider=digest`
    /// in place rather than splitting the text (a digest never holds "=", so that pair is the one
    /// ``forEachDigest(_:)`` would give).
    func records(_ digest: UnsafeRawBufferPointer, for provider: String) -> Bool {
        var text = text
        var provider = provider
        return text.withUTF8 { bytes in
            provider.withUTF8 { id in
                Self.holdsPair(
                    Self.sections(of: UnsafeRawBufferPointer(bytes)).digests, id: UnsafeRawBufferPointer(id),
                    value: digest)
            }
        }
    }

    /// The digest the snapshot keeps of an encoded value: BLAKE2b, 16 bytes, in hexadecimal.
    public static func digest(of encoded: String) -> String {
        withDigest(of: encoded) { String(decoding: $0, as: UTF8.self) }
    }

    /// Calls `body` with ``digest(of:)``'s 32 hexadecimal digits, computed on the stack: a sync does this for every
    /// copy it reads.
    static func withDigest<R>(of encoded: String, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        var encoded = encoded
        return try encoded.withUTF8 { try withDigest(ofUTF8: UnsafeRawBufferPointer($0), body) }
    }

    /// ``digest(of:)`` of an encoded value given as its UTF-8 bytes: a provider that keeps values as text can tag its
    /// listing with it (``KeyPage/versions``) without making a `String` of each value.
    public static func digest(ofUTF8 bytes: UnsafeRawBufferPointer) -> String {
        withDigest(ofUTF8: bytes) { String(decoding: $0, as: UTF8.self) }
    }

    private static func withDigest<R>(
        ofUTF8 bytes: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R
    )
        rethrows -> R
    {
        var hash: (UInt64, UInt64) = (0, 0)
        // 32 digits and the terminator ``Hex`` writes after them.
        var digits: (UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &hash) { BLAKE2b.hash(bytes, into: $0) }
        withUnsafeBytes(of: &hash) { hash in withUnsafeMutableBytes(of: &digits) { Hex.encode(hash, into: $0) } }
        return try withUnsafeBytes(of: &digits) { try body(UnsafeRawBufferPointer(rebasing: $0[0..<32])) }
    }
}
