import CloudSync
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncPipeline
@testable import CloudSyncPipelineState

/// The accounts file: credentials by account, one provider type per account, and the routing that sends only
/// sign-in credentials there while a provider's other values stay in its pipeline's state.
@Suite struct AccountStoreTests {
    @Test func credentialsAreKeptByAccountAndAnAccountHoldsOneProviderType() throws {
        let directory = try TemporaryDirectory(prefix: "accounts")
        let store = try AccountStore(directory: directory.path + "/nested", create: true)
        try store.setValue("1//work", account: "work", type: "googleDrive", name: "signIn.oauthRefreshToken")
        try store.setValue("ck-token", account: "phone", type: "cloudKit", name: "signIn.cloudKitWebAuthToken")
        #expect(try store.value(account: "work", name: "signIn.oauthRefreshToken") == "1//work")
        #expect(try store.value(account: "phone", name: "signIn.oauthRefreshToken") == nil)
        #expect(throws: CloudSyncError.self) {
            try store.setValue("x", account: "work", type: "cloudKit", name: "signIn.cloudKitWebAuthToken")
        }
        #expect(try store.accounts().map(\.name) == ["phone", "work"])
        #expect(try store.accounts().map(\.type) == ["cloudKit", "googleDrive"])
        #expect(try store.remove("work"))
        #expect(try !store.remove("work"))
        #expect(try store.value(account: "work", name: "signIn.oauthRefreshToken") == nil)
        // Reopened, the rest is still there; an accounts file that does not exist is not created by a reader.
        #expect(
            try AccountStore(directory: directory.path + "/nested", create: false).value(
                account: "phone", name: "signIn.cloudKitWebAuthToken") == "ck-token")
        #expect(throws: CloudSyncError.self) { try AccountStore(directory: directory.path + "/none", create: false) }
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/none"))
    }

    @Test func onlySignInCredentialsGoToTheAccountAndAnotherTypeIsRefusedThem() throws {
        let directory = try TemporaryDirectory(prefix: "accounts-routing")
        let accounts = try AccountStore(directory: directory.path, create: true)
        let pipeline = InMemoryProviderStateStore()
        let state = ProviderState(
            provider: "drive",
            store: AccountProviderStateStore(
                accounts: accounts, account: "work", type: "googleDrive", pipeline: pipeline))
        try state.replace(.oauthRefreshToken, with: "1//rotated")
        try state.set("cursor-7", for: "changes.cursor")
        #expect(try accounts.value(account: "work", name: "signIn.oauthRefreshToken") == "1//rotated")
        #expect(try pipeline.value(provider: "drive", name: "signIn.oauthRefreshToken") == nil)
        #expect(try pipeline.value(provider: "drive", name: "changes.cursor") == "cursor-7")
        #expect(try accounts.value(account: "work", name: "changes.cursor") == nil)
        let other = ProviderState(
            provider: "ck",
            store: AccountProviderStateStore(accounts: accounts, account: "work", type: "cloudKit", pipeline: pipeline))
        #expect(throws: CloudSyncError.self) { try other.credential(.cloudKitWebAuthToken) }
    }

    @Test func theFileIsFoundWhereTheEnvironmentSays() {
        #expect(
            NamedAccounts.directory(environment: ["CLOUDSYNC_ACCOUNTS_DIR": "/srv/acc", "HOME": "/root"]) == "/srv/acc")
        #expect(
            NamedAccounts.directory(environment: ["XDG_STATE_HOME": "/x/state", "HOME": "/h"]) == "/x/state/cloudsync")
        #expect(NamedAccounts.directory(environment: ["HOME": "/h"]) == "/h/.local/state/cloudsync")
        #expect(NamedAccounts.directory(environment: ["XDG_STATE_HOME": "relative"]) == nil)
        #expect(NamedAccounts.directory(environment: [:]) == nil)
    }
}
