import CloudSync
import Testing

@Suite struct VersionTests {
    @Test func versionIsSemantic() {
        let parts = CloudSyncVersion.current.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        #expect(parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isNumber) })
    }
}
