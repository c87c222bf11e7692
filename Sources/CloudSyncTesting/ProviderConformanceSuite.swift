import CloudSync

/// The checks every `Provider` must pass, whatever it stores in: run it from a provider's own tests with a
/// factory that returns a fresh, empty, available provider each time.
///
/// `run` returns one line per broken requirement (empty when the provider conforms), so any test framework can
/// assert on it: `#expect(await ProviderConformanceSuite.run { ... } == [])`.
public enum ProviderConformanceSuite {
    /// Runs every check, each on a fresh provider from `makeProvider`, and returns one line per broken requirement,
    /// each starting with the check's name; empty when the provider conforms.
    ///
    /// A factory or check that throws counts as that check's failure rather than ending the run.
    public static func run(_ makeProvider: @Sendable () async throws -> any Provider) async -> [String] {
        var failures: [String] = []
        for check in checks {
            do {
                let provider = try await makeProvider()
                var sink = Failures(name: check.name)
                try await check.body(provider, &sink)
                failures += sink.messages
            } catch {
                failures.append("\(check.name): threw \(error)")
            }
        }
        return failures
    }

    /// Checks that a wrapper forwards everything it does not mean to change.
    ///
    /// `wrap` puts the wrapper under test around the provider it is given. Run it for every wrapper (metering, fault injection, dry runs) besides
    /// ``run(_:)``; a wrapper that drops account events or `clearCaches()` leaves the store blind to account switches.
    ///
    /// Returns one line per requirement the wrapper does not forward.
    public static func runForwarding(_ wrap: @Sendable (any Provider) async throws -> any Provider) async -> [String] {
        var failures = Failures(name: "forwarding")
        do {
            let inner = ProbeProvider()
            let wrapper = try await wrap(inner)
            failures.expect(wrapper.id == inner.id, "id is \(wrapper.id), not the wrapped \(inner.id)")
            failures.expect(
                wrapper.capabilities.emitsAccountEvents && wrapper.capabilities.emitsRemoteChanges,
                "the wrapper hides the wrapped provider's event capabilities")
            failures.expect(
                await wrapper.availability() == inner.availabilityAnswer,
                "availability() is not the wrapped provider's answer with its reason")
            failures.expect(
                (try? await wrapper.accountIdentity()) == inner.identity, "accountIdentity() is not forwarded")
            let accounts = Counter()
            let remotes = Counter()
            let account = wrapper.subscribeToAccountChanges { _ in accounts.next() }
            let remote = wrapper.subscribeToRemoteChanges { _ in remotes.next() }
            inner.sendEvents()
            failures.expect(
                accounts.value == 1, "an account event of the wrapped provider reached \(accounts.value) handlers")
            failures.expect(
                remotes.value == 1, "a remote change of the wrapped provider reached \(remotes.value) handlers")
            account?.cancel()
            remote?.cancel()
            inner.sendEvents()
            failures.expect(
                accounts.value == 1 && remotes.value == 1, "cancelling the subscriptions did not stop events")
            await wrapper.clearCaches()
            failures.expect(
                inner.clearCachesCalls == 1,
                "clearCaches() reached the wrapped provider \(inner.clearCachesCalls) times")
            await wrapper.close()
            failures.expect(inner.closeCalls == 1, "close() reached the wrapped provider \(inner.closeCalls) times")
        } catch {
            failures.expect(false, "threw \(error)")
        }
        return failures.messages
    }

    /// What every call of a closed provider throws.
    ///
    /// In the order get, set, remove, listKeys, quota; nil where a call did not throw a `CloudSyncError`. A provider
    /// that holds files or connections should fail each with `ERR_CLOSED`.
    public static func errorsAfterClose(_ provider: any Provider) async -> [CloudSyncError?] {
        func error(_ call: () async throws -> Void) async -> CloudSyncError? {
            do {
                try await call()
                return nil
            } catch {
                return error as? CloudSyncError
            }
        }
        return [
            await error { _ = try await provider.get(["conformance.k"]) },
            await error { _ = try await provider.set([KeyValue("conformance.k", "v")]) },
            await error { _ = try await provider.remove(["conformance.k"]) },
            await error { _ = try await provider.listKeys(after: nil, limit: 10) },
            await error { _ = try await provider.quota() },
        ]
    }

    /// Collects the broken expectations of one check.
    struct Failures {
        let name: String
        var messages: [String] = []

        mutating func expect(_ condition: Bool, _ message: @autoclosure () -> String) {
            if !condition { messages.append("\(name): \(message())") }
        }
    }

    typealias Check = (name: String, body: @Sendable (any Provider, inout Failures) async throws -> Void)

    /// The values read, with a failed key shown as `<error: CODE>` so it never passes for a value or for nil.
    static func values(_ results: [Result<String?, CloudSyncError>]) -> [String?] {
        results.map { result in
            switch result {
            case .success(let value): return value
            case .failure(let error): return "<error: \(error.code)>"
            }
        }
    }

    /// Every key `provider` lists, page by page of `limit`, in the order listed (at most 1,000 pages).
    static func listEverything(_ provider: any Provider, limit: Int) async throws -> [String] {
        var keys: [String] = []
        var cursor: String?
        var pages = 0
        repeat {
            let page = try await provider.listKeys(after: cursor, limit: limit)
            keys += page.keys
            cursor = page.nextCursor
            pages += 1
        } while cursor != nil && pages < 1000
        return keys
    }

    static func allSucceeded(_ results: [Result<Void, CloudSyncError>]) -> Bool {
        results.allSatisfy { (try? $0.get()) != nil }
    }

    static let checks: [Check] = [
        (
            "a fresh provider is available and empty",
            { provider, failures in
                failures.expect(await provider.isAvailable(), "isAvailable() is false")
                failures.expect(
                    values(try await provider.get(["conformance.absent"])) == [nil], "a missing key is not nil")
                if provider.capabilities.canList {
                    let page = try await provider.listKeys(after: nil, limit: 10)
                    failures.expect(
                        page.keys.isEmpty && page.nextCursor == nil, "listing an empty provider gave \(page)")
                }
            }
        ),
        (
            "values round-trip byte for byte",
            { provider, failures in
                let large = String(
                    repeating: "0123456789abcdef",
                    count: min(provider.capabilities.maxValueBytes ?? 65_536, 65_536) / 16)
                let items = [
                    KeyValue("conformance.empty", ""), KeyValue("conformance.text", "plain"),
                    KeyValue("conformance.unicode", "héllo — 日本 🌍\n\ttabs \"quotes\" \\ back"),
                    KeyValue("conformance.json", #"{"updatedAt":"2026-01-01T00:00:00Z","v":[1,2]}"#),
                    KeyValue("conformance.large", large),
                ]
                let stored = try await provider.set(items)
                failures.expect(
                    stored.count == items.count, "set returned \(stored.count) results for \(items.count) items")
                failures.expect(allSucceeded(stored), "set failed: \(stored)")
                let read = values(try await provider.get(items.map(\.key)))
                for (item, value) in zip(items, read) {
                    failures.expect(
                        value == item.value, "\(item.key) read back differently (\(value?.utf8.count ?? -1) bytes)")
                }
            }
        ),
        (
            "a listed version tag changes when the value does",
            { provider, failures in
                guard provider.capabilities.canList else { return }
                func tag() async throws -> (tags: [String?]?, count: Int) {
                    let page = try await provider.listKeys(after: nil, limit: 10)
                    return (page.versions, page.keys.count)
                }
                _ = try await provider.set([KeyValue("conformance.tagged", "first")])
                let before = try await tag()
                guard let tags = before.tags else { return }
                failures.expect(tags.count == before.count, "\(tags.count) version tags for \(before.count) keys")
                _ = try await provider.set([KeyValue("conformance.tagged", "second")])
                let after = try await tag()
                if let old = tags.first ?? nil, let new = after.tags?.first ?? nil {
                    failures.expect(old != new, "the version tag stayed \(old) after the value changed")
                }
                // A provider that says its tags are its values' digests is taken at its word by a sync, which records
                // the digest of what it wrote as the tag: it must be exactly that.
                if provider.capabilities.tagsAreValueDigests {
                    let digest = SyncFingerprint.digest(of: "second")
                    let listed = (after.tags?.first ?? nil) ?? "none"
                    failures.expect(
                        listed == digest,
                        "tagsAreValueDigests, but the tag of \"second\" is \(listed), not its digest \(digest)")
                }
            }
        ),
        (
            "conditional writes and removals change only what their condition names",
            { provider, failures in
                let key = "conformance.conditional"
                func code<T>(_ results: [Result<T, CloudSyncError>]) -> ErrorCode? {
                    guard results.count == 1, case .failure(let error) = results[0] else { return nil }
                    return error.code
                }
                func stored() async throws -> String? { values(try await provider.get([key])).first ?? nil }
                guard provider.capabilities.conditionalWrites else {
                    // Without the capability a condition is refused, never ignored.
                    let refused = try await provider.set([KeyValue(key, "one")], conditions: [.absent])
                    failures.expect(
                        code(refused) == .unsupported, "a conditional set without conditionalWrites gave \(refused)")
                    failures.expect(try await stored() == nil, "a refused conditional set stored its value")
                    return
                }
                func succeeded<T>(_ results: [Result<T, CloudSyncError>]) -> Bool {
                    guard results.count == 1, case .success = results[0] else { return false }
                    return true
                }
                let created = try await provider.set([KeyValue(key, "one")], conditions: [.absent])
                failures.expect(succeeded(created), "a set on the condition absent failed: \(created)")
                guard case .success(let read?)? = try await provider.getVersioned([key]).first,
                    let first = read.version
                else { return failures.expect(false, "getVersioned gave no version tag for a stored key") }
                failures.expect(read.value == "one", "getVersioned read \(read.value), not one")
                if provider.capabilities.canList,
                    let listed = try await provider.listKeys(after: nil, limit: 10).versions?.first ?? nil
                {
                    failures.expect(listed == first, "listing tags the value \(listed), getVersioned \(first)")
                }
                let again = try await provider.set([KeyValue(key, "two")], conditions: [.absent])
                failures.expect(
                    code(again) == .changedSinceRead, "a set on the condition absent over a stored key gave \(again)")
                let replaced = try await provider.set([KeyValue(key, "two")], conditions: [.version(first)])
                failures.expect(succeeded(replaced), "a set on the condition of the current tag failed: \(replaced)")
                let second = (try await provider.getVersioned([key]).first.flatMap { try? $0.get() } ?? nil)?.version
                if case .success(let answered?)? = replaced.first {
                    failures.expect(
                        answered == second, "set answered the tag \(answered), a read gives \(second ?? "none")")
                }
                let stale = try await provider.set([KeyValue(key, "three")], conditions: [.version(first)])
                failures.expect(code(stale) == .changedSinceRead, "a set on a stale tag gave \(stale)")
                let staleRemoval = try await provider.remove([key], conditions: [.version(first)])
                failures.expect(
                    code(staleRemoval) == .changedSinceRead, "a removal on a stale tag gave \(staleRemoval)")
                failures.expect(try await stored() == "two", "a refused conditional change changed the value")
                if let second {
                    let removed = try await provider.remove([key], conditions: [.version(second)])
                    failures.expect(allSucceeded(removed), "a removal on the current tag failed: \(removed)")
                    failures.expect(try await stored() == nil, "a removal on the current tag left the key")
                    let gone = try await provider.remove([key], conditions: [.version(second)])
                    failures.expect(allSucceeded(gone), "a conditional removal of a missing key failed: \(gone)")
                }
            }
        ),
        (
            "batch results are positional",
            { provider, failures in
                _ = try await provider.set([KeyValue("conformance.a", "A"), KeyValue("conformance.b", "B")])
                let read = values(try await provider.get(["conformance.b", "conformance.missing", "conformance.a"]))
                failures.expect(read == ["B", nil, "A"], "get([b, missing, a]) gave \(read)")
                let limit = provider.capabilities.batchLimit
                let many = (0..<limit).map { KeyValue("conformance.batch.\($0)", "v\($0)") }
                let stored = try await provider.set(many)
                failures.expect(stored.count == limit && allSucceeded(stored), "a full batch of \(limit) did not store")
                let back = values(try await provider.get(many.map(\.key)))
                failures.expect(back == many.map(\.value), "a full batch of \(limit) did not read back in order")
            }
        ),
        (
            "writes overwrite and removes remove",
            { provider, failures in
                _ = try await provider.set([KeyValue("conformance.k", "one")])
                _ = try await provider.set([KeyValue("conformance.k", "two")])
                failures.expect(values(try await provider.get(["conformance.k"])) == ["two"], "overwrite did not take")
                let removed = try await provider.remove(["conformance.k", "conformance.never-written"])
                failures.expect(
                    removed.count == 2 && allSucceeded(removed), "remove (one missing key) failed: \(removed)")
                failures.expect(values(try await provider.get(["conformance.k"])) == [nil], "a removed key still reads")
            }
        ),
        (
            "listing pages cover every key once and end",
            { provider, failures in
                guard provider.capabilities.canList else {
                    do {
                        _ = try await provider.listKeys(after: nil, limit: 10)
                        failures.expect(false, "canList is false but listKeys did not throw")
                    } catch let error as CloudSyncError {
                        failures.expect(error.code == .unsupported, "listKeys threw \(error.code), not ERR_UNSUPPORTED")
                    }
                    return
                }
                let keys = (0..<25).map { "conformance.list.\(String($0 + 100))" }
                for chunk in stride(from: 0, to: keys.count, by: provider.capabilities.batchLimit) {
                    let slice = keys[chunk..<min(chunk + provider.capabilities.batchLimit, keys.count)]
                    _ = try await provider.set(slice.map { KeyValue($0, "x") })
                }
                var seen: [String] = []
                var cursor: String?
                var pages = 0
                repeat {
                    let page = try await provider.listKeys(after: cursor, limit: 7)
                    failures.expect(page.keys.count <= 7, "a page held \(page.keys.count) keys for a limit of 7")
                    seen += page.keys
                    cursor = page.nextCursor
                    pages += 1
                } while cursor != nil && pages < 100
                failures.expect(pages < 100, "listing never ended")
                failures.expect(seen.count == seen.keySet().count, "listing repeated keys")
                failures.expect(
                    seen.keySet() == keys.keySet(), "listing gave \(seen.count) keys, expected \(keys.count)")
            }
        ),
        (
            "canonically equivalent keys are different keys",
            { provider, failures in
                // A provider whose key rules refuse the spellings (CloudKit's record names are ASCII) cannot merge
                // them either.
                let twins = KeyTwins.canonical.map { "conformance.twin." + $0 }.filter { key in
                    provider.capabilities.keyRules.allSatisfy { $0.allows(key) }
                }
                guard !twins.isEmpty else { return }
                let stored = try await provider.set(twins.map { KeyValue($0, KeyTwins.value(for: $0)) })
                failures.expect(allSucceeded(stored), "set of \(twins.count) twins failed: \(stored)")
                let read = values(try await provider.get(twins))
                failures.expect(
                    read == twins.map { KeyTwins.value(for: $0) }, "twins read back each other's values: \(read)")
                if provider.capabilities.canList {
                    let listed = try await listEverything(provider, limit: 2)
                    failures.expect(
                        listed.keySet() == twins.keySet() && listed.count == twins.count,
                        "listing \(twins.count) twins gave \(listed.count) keys, \(listed.keySet().count) distinct")
                    if provider.capabilities.listsInKeyOrder {
                        failures.expect(
                            listed == twins.sortedAsKeys(), "listsInKeyOrder, but twins listed as \(listed)")
                    }
                }
                let removed = try await provider.remove([twins[0]])
                failures.expect(allSucceeded(removed), "removing one twin failed: \(removed)")
                let after = values(try await provider.get(twins))
                failures.expect(
                    after == [nil] + twins.dropFirst().map { KeyTwins.value(for: $0) },
                    "removing \(twins[0].unicodeScalars.map { String($0.value, radix: 16) }) took its twins too: \(after)"
                )
            }
        ),
        (
            "keys differing in case list once each, in byte order where declared",
            { provider, failures in
                guard provider.capabilities.canList else { return }
                let keys = KeyTwins.caseMixed.map { "conformance." + $0 }.filter { key in
                    provider.capabilities.keyRules.allSatisfy { $0.allows(key) }
                }
                _ = try await provider.set(keys.map { KeyValue($0, "x") })
                for limit in [1, 3] {
                    let listed = try await listEverything(provider, limit: limit)
                    failures.expect(
                        listed.count == keys.count && listed.keySet() == keys.keySet(),
                        "pages of \(limit) listed \(listed), expected each of \(keys) once")
                    if provider.capabilities.listsInKeyOrder {
                        failures.expect(
                            listed == keys.sortedAsKeys(), "listsInKeyOrder, but pages of \(limit) listed \(listed)")
                    }
                }
            }
        ),
        (
            "removing every key while paging leaves none",
            { provider, failures in
                guard provider.capabilities.canList else { return }
                let keys = (0..<40).map { "conformance.drain.\(String($0 + 100))" }
                for chunk in stride(from: 0, to: keys.count, by: provider.capabilities.batchLimit) {
                    let slice = keys[chunk..<min(chunk + provider.capabilities.batchLimit, keys.count)]
                    _ = try await provider.set(slice.map { KeyValue($0, "x") })
                }
                // As a clear job does: list a page, remove it, ask for the next page with the cursor.
                var removed = 0
                var cursor: String?
                var pages = 0
                repeat {
                    let page = try await provider.listKeys(after: cursor, limit: 7)
                    let results = try await provider.remove(page.keys)
                    failures.expect(allSucceeded(results), "removing a page failed: \(results)")
                    removed += page.keys.count
                    cursor = page.nextCursor
                    pages += 1
                } while cursor != nil && pages < 100
                let left = try await listEverything(provider, limit: 100)
                failures.expect(
                    removed == keys.count && left.isEmpty,
                    "removed \(removed) of \(keys.count) while paging; \(left.count) keys left")
            }
        ),
        (
            "quota and events are reported only where declared",
            { provider, failures in
                let quota = try await provider.quota()
                if provider.capabilities.reportsQuota {
                    failures.expect(quota != nil, "reportsQuota is true but quota() is nil")
                    if let used = quota?.usedBytes, let total = quota?.totalBytes {
                        failures.expect(used >= 0 && total >= 0, "negative quota figures \(used)/\(total)")
                    }
                } else {
                    failures.expect(quota == nil, "reportsQuota is false but quota() gave \(String(describing: quota))")
                }
                let account = provider.subscribeToAccountChanges { _ in }
                failures.expect(
                    (account != nil) == provider.capabilities.emitsAccountEvents,
                    "account subscription does not match emitsAccountEvents")
                account?.cancel()
                let remote = provider.subscribeToRemoteChanges { _ in }
                failures.expect(
                    (remote != nil) == provider.capabilities.emitsRemoteChanges,
                    "remote-change subscription does not match emitsRemoteChanges")
                remote?.cancel()
                failures.expect(provider.capabilities.batchLimit >= 1, "batchLimit is below 1")
                await provider.clearCaches()
            }
        ),
    ]
}
