import Testing

@testable import CloudSync

/// The positional form a sync builds its rows with, against the dictionary form written before it: both must spell
/// every row the same, or a sync would rewrite rows it left alone and take unchanged keys for changed ones.
@Suite struct SyncFingerprintBuildTests {
    /// SplitMix64: the same cases on every run of a seed.
    private struct Seeded: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func thePositionalFormSpellsWhatTheDictionaryFormDoes(seed: UInt64) {
        var random = Seeded(state: seed)
        // Ids that overlap as prefixes, hold "=", or sort apart bytewise and by String order alike.
        let names = ["a", "ab", "a=b", "b", "b.2", "Z", "é", "sqlite-1", "sqlite-10"]
        let values = (0..<4).map { SyncFingerprint.digest(of: "v\($0)") }
        for _ in 0..<2_000 {
            let ids = Array(names.shuffled(using: &random).prefix(Int.random(in: 1...4, using: &random)))
            let others = names.filter { !ids.contains($0) }.shuffled(using: &random)
                .prefix(Int.random(in: 0...2, using: &random)).map { ($0, values.randomElement(using: &random)!) }
            let digests = ids.map { _ in Bool.random(using: &random) ? values.randomElement(using: &random) : nil }
            // Tags: none, the digest itself, one of its own, or one that cannot be recorded.
            let tags: [String?]? =
                Bool.random(using: &random)
                ? nil
                : ids.indices.map { index in
                    switch Int.random(in: 0..<5, using: &random) {
                    case 0: return nil
                    case 1: return digests[index] ?? "etag"
                    case 2: return "etag-\(index)"
                    case 3: return "not=recordable"
                    default: return values.randomElement(using: &random)
                    }
                }
            var byID = Dictionary(uniqueKeysWithValues: others)
            for (id, digest) in zip(ids, digests) { byID[id] = digest }
            let expected =
                tags.map { tags in
                    SyncFingerprint(
                        byID,
                        tags: Dictionary(
                            uniqueKeysWithValues: zip(ids, tags).compactMap { id, tag in tag.map { (id, $0) } }))
                } ?? SyncFingerprint(byID)
            let built = SyncFingerprint(ids: ids, digests: digests, others: Array(others), tags: tags)
            #expect(
                built.text == expected.text,
                "ids \(ids) digests \(digests) others \(others) tags \(String(describing: tags))")
            #expect(
                built.digests(besides: ids).map { "\($0.0)=\($0.1)" }
                    == others.sorted { $0.0 < $1.0 }.map { "\($0.0)=\($0.1)" })
            // The one-look check of a page's listed tags answers what asking provider by provider does.
            let candidates = values + ["etag-0", "etag-1", "not=recordable"] + (tags ?? []).compactMap { $0 }
            let listed = ids.map { _ in
                Int.random(in: 0..<8, using: &random) == 0 ? nil : candidates.randomElement(using: &random)
            }
            #expect(
                built.recordsTags(listed.map { [$0] }, item: 0, of: ids)
                    == zip(ids, listed).allSatisfy { id, tag in tag.map { built.recordsTag($0, for: id) } ?? false },
                "\(built.text.debugDescription) listed \(listed)")
            for (id, digest) in zip(ids, digests) {
                #expect(built.hasDigest(for: id) == (digest != nil))
                #expect(built.records(digest ?? values[0], for: id) == (digest != nil))
            }
        }
    }
}
