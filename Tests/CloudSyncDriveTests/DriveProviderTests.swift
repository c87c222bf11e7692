import CloudSync
import CloudSyncDrive
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

@Suite struct DriveProviderTests {
    @Test func passesTheConformanceSuiteAgainstTheEmulator() async throws {
        let host = try DriveHost()
        #expect(await ProviderConformanceSuite.run { host.provider() } == [])
    }

    @Test func requestsPerOperationAreTheIssuesFigures() async throws {
        let host = try DriveHost()
        let provider = host.provider()
        let keys = (0..<250).map { String(format: "key-%03d", $0) }
        // Cold cache: one listing (empty), then one multipart create per key.
        #expect(succeeded(try await provider.set(keys.map { KeyValue($0, "value of \($0)") })))
        #expect(host.count("GET", "/drive/v3/files") == 1)
        #expect(host.count("POST", "/upload/drive/v3/files") == 250)

        host.clearLog()
        #expect(try values(await provider.get(["key-007"])) == ["value of key-007"])
        #expect(host.log.count == 1)

        host.clearLog()
        #expect(succeeded(try await provider.set([KeyValue("key-007", "changed")])))
        #expect(host.log.count == 1)
        #expect(host.log.first?.method == "PATCH")

        host.clearLog()
        #expect(succeeded(try await provider.remove(keys)))
        #expect(host.log.count == 3)
        #expect(host.count("POST", "/batch/drive/v3") == 3)
        #expect(try values(await provider.get(["key-007", "key-100"])) == [nil, nil])
    }

    @Test func aColdBatchReadListsOnceThenDownloadsEachKey() async throws {
        let host = try DriveHost()
        let account = host.signIn()
        let writer = host.provider(refreshToken: account.refreshToken)
        #expect(succeeded(try await writer.set([KeyValue("a", "1"), KeyValue("b", "2"), KeyValue("c", "3")])))
        let reader = host.provider(refreshToken: account.refreshToken)
        host.clearLog()
        #expect(try values(await reader.get(["a", "b", "c", "missing"])) == ["1", "2", "3", nil])
        #expect(host.count("GET", "/drive/v3/files") == 1)
        #expect(host.log.filter { $0.queryItems.contains { $0.name == "alt" && $0.value == "media" } }.count == 3)
        // One uncached key is one search by name, not a listing of everything.
        let single = host.provider(refreshToken: account.refreshToken)
        host.clearLog()
        #expect(try values(await single.get(["b"])) == ["2"])
        let search = host.log.first { $0.path == "/drive/v3/files" }
        #expect(search?.queryItems.first { $0.name == "q" }?.value == "name = 'b' and trashed = false")
        #expect(host.log.count == 2)
    }

    @Test func listingTwoThousandFiveHundredKeysTakesThreePages() async throws {
        let host = try DriveHost()
        let account = host.signIn()
        for number in 0..<2500 {
            host.files.addFile(user: account.user, name: String(format: "k%05d", number), content: Data("v".utf8))
        }
        let provider = host.provider(refreshToken: account.refreshToken)
        host.clearLog()
        var keys: [String] = []
        var cursor: String?
        repeat {
            let page = try await provider.listKeys(after: cursor, limit: 1000)
            keys += page.keys
            cursor = page.nextCursor
        } while cursor != nil
        #expect(keys.count == 2500)
        #expect(keys == keys.sorted())
        #expect(host.count("GET", "/drive/v3/files") == 3)
    }

    @Test func keysWithQuotesAndBackslashesAreFoundByName() async throws {
        let host = try DriveHost()
        let account = host.signIn()
        let key = #"it's a \ key"#
        #expect(succeeded(try await host.provider(refreshToken: account.refreshToken).set([KeyValue(key, "v")])))
        let fresh = host.provider(refreshToken: account.refreshToken)
        #expect(try values(await fresh.get([key])) == ["v"])
    }
}
