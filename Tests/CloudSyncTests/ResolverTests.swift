import CloudSync
import CloudSyncTesting
import Synchronization
import Testing

private func candidates(_ values: String...) -> [Candidate] {
    values.enumerated().map { Candidate(provider: "p\($0.offset)", value: $0.element) }
}

@Suite struct TimestampResolverTests {
    let newest = Resolver.timestamp(field: "updatedAt")

    @Test func epochMillisecondsAsNumbersOrDigitStrings() {
        #expect(
            newest.resolve(candidates(#"{"updatedAt":1000,"v":"a"}"#, #"{"updatedAt":2000,"v":"b"}"#))
                == #"{"updatedAt":2000,"v":"b"}"#)
        #expect(
            newest.resolve(candidates(#"{"updatedAt":"3000","v":"a"}"#, #"{"updatedAt":2000,"v":"b"}"#))
                == #"{"updatedAt":"3000","v":"a"}"#)
    }

    @Test(arguments: [
        // (older, newer): offsets, fractions and Z all compare on one timeline.
        ("2026-03-01T10:00:00Z", "2026-03-01T10:00:00.001Z"),
        ("2026-03-01T12:00:00+02:00", "2026-03-01T10:30:00Z"),  // 10:00Z vs 10:30Z
        ("2026-03-01T10:00:00Z", "2026-03-01T05:30:01-04:30"),  // 10:00Z vs 10:00:01Z
        ("2026-03-01T10:00:00.999999Z", "2026-03-01T10:00:01Z"),
        ("1999-12-31T23:59:59Z", "2000-01-01T00:00:00+0000"),
    ])
    func isoStringsWithOffsetsAndFractions(older: String, newer: String) {
        let old = #"{"updatedAt":"\#(older)"}"#
        let new = #"{"updatedAt":"\#(newer)"}"#
        #expect(newest.resolve(candidates(old, new)) == new)
        #expect(newest.resolve(candidates(new, old)) == new)
    }

    @Test func isoAndMillisecondsCompareOnOneTimeline() {
        // 2026-01-01T00:00:00Z is 1767225600000 ms.
        let iso = #"{"updatedAt":"2026-01-01T00:00:00.5Z"}"#
        let millis = #"{"updatedAt":1767225600000}"#
        #expect(newest.resolve(candidates(millis, iso)) == iso)
    }

    @Test func aDatableCandidateBeatsOneThatIsNot() {
        let dated = #"{"updatedAt":1}"#
        for undatable in [
            "not json", #"["array"]"#, #"{"other":5}"#, #"{"updatedAt":"yesterday"}"#, #"{"updatedAt":true}"#,
            #"{"updatedAt":"2026-13-01T00:00:00Z"}"#,
        ] {
            #expect(newest.resolve(candidates(undatable, dated)) == dated, "\(undatable)")
        }
    }

    @Test func tiesAndUndatableValuesKeepTheEarlierProvider() {
        let first = #"{"updatedAt":5,"from":"first"}"#
        let second = #"{"updatedAt":5,"from":"second"}"#
        #expect(newest.resolve(candidates(first, second)) == first)
        #expect(newest.resolve(candidates("plain one", "plain two")) == "plain one")
        #expect(newest.resolve([]) == nil)
    }
}

@Suite struct UnionResolverTests {
    @Test func objectsMergeByIdInStableOrder() {
        let union = Resolver.union(id: "id")
        let merged = union.resolve(
            candidates(#"[{"id":1,"n":"a"},{"id":2,"n":"b"}]"#, #"[{"id":3,"n":"c"},{"id":1,"n":"a-changed"}]"#))
        #expect(merged == #"[{"id":1,"n":"a"},{"id":2,"n":"b"},{"id":3,"n":"c"}]"#)
    }

    @Test func plainScalarsMergeByValue() {
        let union = Resolver.union()
        #expect(
            union.resolve(candidates(#"["tip.1","tip.2"]"#, #"["tip.3","tip.1"]"#)) == #"["tip.1","tip.2","tip.3"]"#)
        #expect(union.resolve(candidates("[1, 2]", "[2, 3, 1]")) == "[1,2,3]")
    }

    @Test func candidatesThatAreNotArraysAreLeftOut() {
        let union = Resolver.union()
        #expect(union.resolve(candidates("oops", #"["a"]"#, #"{"x":1}"#, #"["b"]"#)) == #"["a","b"]"#)
        #expect(union.resolve(candidates("first", "second")) == "first")
    }

    @Test func deletionsDoNotPropagate() {
        // Device one removed "b"; device two still has it: the union brings it back.
        let union = Resolver.union()
        #expect(union.resolve(candidates(#"["a"]"#, #"["a","b"]"#)) == #"["a","b"]"#)
    }
}

@Suite struct ReadRepairTests {
    @Test func theMixedFleetStoryReturnsTheNewerValueAndHeals() async throws {
        let icloud = makeProvider("icloudKV", Kind.keyValue)
        let drive = makeProvider("googleDrive")
        let configure: (inout StoreOptions) -> Void = {
            $0.writeMode = .mirror
            $0.resolver = Resolver.timestamp(field: "updatedAt")
        }
        // 1. The iPhone writes: iCloud and Drive both hold A.
        let iPhone = try makeStore([icloud, drive], configure)
        let valueA = #"{"updatedAt":"2026-03-01T10:00:00Z","theme":"dark"}"#
        try await iPhone.set(valueA, forKey: "settings")
        // 2. The Android phone, which cannot reach iCloud, writes B to Drive.
        icloud.isAvailableNow = false
        let android = try makeStore([icloud, drive], configure)
        let valueB = #"{"updatedAt":"2026-03-01T11:00:00Z","theme":"light"}"#
        try await android.set(valueB, forKey: "settings")
        #expect(try await raw(icloud, "settings") == valueA)
        // 3. The iPhone reads: the newer value wins, and one read leaves both providers equal.
        icloud.isAvailableNow = true
        let reader = try makeStore([icloud, drive], configure)
        #expect(try await reader.get("settings") == valueB)
        #expect(try await raw(icloud, "settings") == valueB)
        #expect(try await raw(drive, "settings") == valueB)
        icloud.resetCounts()
        #expect(try await reader.get("settings") == valueB)
        #expect(icloud.calls(.set) == 0)  // nothing left to repair
    }

    @Test func aProviderLackingTheKeyIsRepairedToo() async throws {
        let first = makeProvider("first")
        let second = makeProvider("second")
        _ = try await second.set([KeyValue("k", #"{"updatedAt":1}"#)])
        let store = try makeStore([first, second]) { $0.resolver = Resolver.timestamp(field: "updatedAt") }
        #expect(try await store.get("k") == #"{"updatedAt":1}"#)
        #expect(try await raw(first, "k") == #"{"updatedAt":1}"#)
    }

    @Test func repairOnReadFalseLeavesTheStaleCopy() async throws {
        let first = makeProvider("first")
        let second = makeProvider("second")
        _ = try await first.set([KeyValue("k", #"{"updatedAt":1}"#)])
        _ = try await second.set([KeyValue("k", #"{"updatedAt":2}"#)])
        first.resetCounts()
        let store = try makeStore([first, second]) {
            $0.resolver = Resolver.timestamp(field: "updatedAt")
            $0.repairOnRead = false
        }
        #expect(try await store.get("k") == #"{"updatedAt":2}"#)
        #expect(try await raw(first, "k") == #"{"updatedAt":1}"#)
        #expect(first.calls(.set) == 0)
    }

    @Test func aFailedRepairIsReportedAndNeverFailsTheRead() async throws {
        let first = makeProvider("first")
        let second = makeProvider("second")
        _ = try await first.set([KeyValue("k", #"{"updatedAt":1}"#)])
        _ = try await second.set([KeyValue("k", #"{"updatedAt":2}"#)])
        first.fail(.set, with: offline)
        let errors = ErrorLog()
        let store = try makeStore([first, second]) {
            $0.resolver = Resolver.timestamp(field: "updatedAt")
            $0.onError = errors.handler
        }
        #expect(try await store.get("k") == #"{"updatedAt":2}"#)
        #expect(errors.all.map(\.code) == [.offline])
        #expect(errors.all.first?.provider == "first")
        #expect(try await raw(first, "k") == #"{"updatedAt":1}"#)
    }

    @Test func aCustomResolverReturningNilReadsAsAbsentAndRepairsNothing() async throws {
        let first = makeProvider("first")
        let second = makeProvider("second")
        _ = try await first.set([KeyValue("k", "one")])
        _ = try await second.set([KeyValue("k", "two")])
        first.resetCounts()
        second.resetCounts()
        let seen = Mutex<[[Candidate]]>([])
        let store = try makeStore([first, second]) {
            $0.resolver = Resolver.custom { candidates in
                seen.withLock { $0.append(candidates) }
                return nil
            }
        }
        #expect(try await store.get("k") == nil)
        #expect(
            seen.withLock { $0 } == [
                [Candidate(provider: "first", value: "one"), Candidate(provider: "second", value: "two")]
            ])
        #expect(first.calls(.set) + second.calls(.set) == 0)
    }

    @Test func resolversComparePlaintextAndRepairsAreEncodedPerProvider() async throws {
        let first = makeProvider("first")
        let second = makeProvider("second")
        let store = try makeStore([first, second]) {
            $0.resolver = Resolver.union()
            $0.codec = BracketCodec()
        }
        _ = try await first.set([KeyValue("tips", #"[enc:tips:["a"]]"#)])
        _ = try await second.set([KeyValue("tips", #"[enc:tips:["b"]]"#)])
        #expect(try await store.get("tips") == #"["a","b"]"#)
        #expect(try await raw(first, "tips") == #"[enc:tips:["a","b"]]"#)
        #expect(try await raw(second, "tips") == #"[enc:tips:["a","b"]]"#)
    }

    @Test func aResolvingMultiGetOf500KeysBatchesReadsAndRepairs() async throws {
        let providers = [
            makeProvider("a", ProviderCapabilities(batchLimit: 100)),
            makeProvider("b", ProviderCapabilities(batchLimit: 200)),
            makeProvider("c", ProviderCapabilities(batchLimit: 500)),
        ]
        let keys = (0..<500).map { "k\($0)" }
        // a holds everything at time 1, b holds the even keys at time 2, c holds nothing.
        _ = try await providers[0].set(keys.map { KeyValue($0, #"{"t":1}"#) }.prefix(100).map { $0 })
        for chunk in stride(from: 100, to: 500, by: 100) {
            _ = try await providers[0].set(keys[chunk..<chunk + 100].map { KeyValue($0, #"{"t":1}"#) })
        }
        _ = try await providers[1].set(
            keys.enumerated().filter { $0.offset % 2 == 0 }.map { KeyValue($0.element, #"{"t":2}"#) })
        for provider in providers { provider.resetCounts() }

        let store = try makeStore(providers) { $0.resolver = Resolver.timestamp(field: "t") }
        let values = try await store.multiGet(keys)
        #expect(values.enumerated().allSatisfy { $0.element == ($0.offset % 2 == 0 ? #"{"t":2}"# : #"{"t":1}"#) })
        #expect(providers.map { $0.calls(.get) } == [5, 3, 1])
        // a: 250 even keys repaired in 3 batches of 100; b: 250 odd keys in 2 of 200; c: all 500 in 1.
        #expect(providers.map { $0.calls(.set) } == [3, 2, 1])
        #expect(providers.map { $0.keysRequested(.set) } == [250, 250, 500])
    }

    @Test func allItemsResolvesToo() async throws {
        let first = makeProvider("first")
        let second = makeProvider("second")
        _ = try await first.set([KeyValue("x", #"{"t":1}"#), KeyValue("y", #"{"t":5}"#)])
        _ = try await second.set([KeyValue("x", #"{"t":3}"#)])
        let store = try makeStore([first, second]) { $0.resolver = Resolver.timestamp(field: "t") }
        #expect(try await store.allItems() == ["x": #"{"t":3}"#, "y": #"{"t":5}"#])
    }
}
