import CloudSync
import CloudSyncAuth
import CloudSyncPipeline
import CloudSyncPipelineState
import CloudSyncRunner
import CloudSyncTesting
import Foundation
import Synchronization
import Testing

@testable import CloudSyncCLI

/// `cloudsync login`, `run` and `cloudkit …` on a `cloudKit` provider, in-process against an in-process CloudKit
/// emulator whose tokens are single use (the documented rotation), so a run that did not keep the rotated token
/// before its next request, or did not keep it for the next run, fails.
@Suite struct CloudKitCommandTests {
    static let container = "iCloud.com.example.cloudsync"
    let directory: TemporaryDirectory
    let host: EmulatorServer
    let cloudKit: CloudKitEmulator
    let file: String
    let environment: [String: String]

    init() throws {
        directory = try TemporaryDirectory()
        var configuration = CloudKitWebAuthEmulator.Configuration()
        configuration.singleUseTokens = true
        cloudKit = CloudKitEmulator(webAuth: CloudKitWebAuthEmulator(configuration: configuration))
        host = try EmulatorServer(services: [cloudKit])
        let urls = host.urls["cloudkit"]!
        environment = ["CK_API_TOKEN": urls["apiToken"]!, "CK_ENDPOINT": urls["endpoint"]!]
        try FileManager.default.createDirectory(atPath: directory.path + "/files", withIntermediateDirectories: true)
        for (key, value) in [("alpha", "1"), ("beta", "two"), ("big", String(repeating: "x", count: 2_000_000))] {
            try value.write(toFile: directory.path + "/files/" + key, atomically: true, encoding: .utf8)
        }
        file = directory.path + "/ck.yaml"
        try """
        version: 1
        name: ck
        providers:
          files: { type: directory, path: files }
          ck:
            type: cloudKit
            container: \(Self.container)
            environment: development
            apiToken: ${env:CK_API_TOKEN}
            endpoint: ${env:CK_ENDPOINT}
        store:
          providers: [ck]
        jobs:
          - { type: migrate, name: copy, from: files, to: ck }

        """.write(toFile: file, atomically: true, encoding: .utf8)
    }

    var statePath: String { directory.path + "/.cloudsync/ck/state.db" }

    func keptToken() throws -> String? {
        let database = try StateDatabase(path: statePath, readOnly: true)
        defer { database.close() }
        return try ProviderState(provider: "ck", store: database).credential(.cloudKitWebAuthToken)
    }

    /// Runs `cloudsync` in-process; `paste` answers the sign-in's prompt from the address it printed.
    func run(_ arguments: [String], paste: (@Sendable (URL) async -> String?)? = nil) async -> (
        ExitCode, String, String
    ) {
        let output = Mutex("")
        let errors = Mutex("")
        let pasted = Mutex<[String]>([])
        let ready = DispatchSemaphore(value: 0)
        let copy: @Sendable (URL) async -> String? = paste ?? { _ in nil }
        let answer: @Sendable (URL) async -> Void = { url in
            let line = await copy(url)
            if let line { pasted.withLock { $0.append(line) } }
            ready.signal()
        }
        let answering = paste != nil
        let tool = CommandLineTool(
            standardOutput: { text in output.withLock { $0 += text } },
            standardError: { text in
                errors.withLock { $0 += text }
                let address = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first {
                    $0.hasPrefix("http://") && $0.contains("?")
                }
                if answering, let url = address.flatMap(URL.init(string:)) { Task { await answer(url) } }
            },
            standardInput: {
                ready.wait()
                return pasted.withLock { $0.isEmpty ? nil : $0.removeFirst() }
            },
            environment: environment, registry: BuiltInProviders.registry)
        let status = await tool.run(arguments)
        return (status, output.withLock { $0 }, errors.withLock { $0 })
    }

    /// The person: opens the sign-in page and copies the token it shows.
    static func signInAndCopyToken(_ url: URL) async -> String? {
        guard let page = try? await TestBrowser.open(url) else { return nil }
        let text = String(decoding: page.body, as: UTF8.self)
        guard let start = text.range(of: "<code id=\"ckWebAuthToken\">") else { return nil }
        return String(text[start.upperBound...].prefix { $0 != "<" }).replacingOccurrences(of: "&amp;", with: "&")
    }

    @Test func loginThenTwoRunsEachKeepingTheRotatedTokenForTheNext() async throws {
        defer { host.server.stop() }
        let (signedIn, _, signInErrors) = await run(
            ["login", file, "--provider", "ck", "--no-browser"], paste: Self.signInAndCopyToken)
        #expect(signedIn == .success, "\(signInErrors)")
        #expect(signInErrors.contains("CloudKit web sign-in"))
        let first = try #require(try keptToken())

        let (run1, _, errors1) = await run(["run", file, "--quiet"])
        // The 2 MB file fits no tier of this store: it fails alone, the others are copied.
        #expect(run1 == .failure, "\(errors1)")
        let second = try #require(try keptToken())
        #expect(second != first)
        #expect(
            cloudKit.database.recordNames(container: Self.container, environment: "development", zone: "CloudSyncZone")
                == ["alpha", "beta"])

        let (run2, _, errors2) = await run(["run", file, "--quiet"])
        #expect(run2 == .failure, "\(errors2)")
        #expect(!errors2.contains("ERR_NOT_SIGNED_IN"))
        #expect(try keptToken() != second)
        for token in [first, second] {
            #expect(!errors1.contains(token) && !errors2.contains(token) && !signInErrors.contains(token))
        }
    }

    @Test func signingInAsAnotherAppleIDIsNoticedAsAnIdentityChangeOnTheNextRun() async throws {
        defer { host.server.stop() }
        _ = await run(["login", file, "--provider", "ck", "--no-browser"], paste: Self.signInAndCopyToken)
        _ = await run(["run", file, "--quiet"])
        func identity() throws -> String? {
            let database = try StateDatabase(path: statePath, readOnly: true)
            defer { database.close() }
            return try database.identity(of: "ck")
        }
        #expect(try identity() == CloudKitWebAuthEmulator.userRecordName("user@example.com", Self.container))

        let (signedIn, _, _) = await run(["login", file, "--provider", "ck", "--no-browser"]) { url in
            await Self.signInAndCopyToken(URL(string: url.absoluteString + "&appleID=other@example.com")!)
        }
        #expect(signedIn == .success)
        _ = await run(["run", file, "--quiet"])
        #expect(try identity() == CloudKitWebAuthEmulator.userRecordName("other@example.com", Self.container))
    }

    @Test func cloudkitCommandsShowStatusMakeTheZoneListChangesAndDeleteIt() async throws {
        defer { host.server.stop() }
        let (notSignedIn, notOutput, notErrors) = await run(["cloudkit", "status", file, "--provider", "ck"])
        #expect(notSignedIn == .failure)
        #expect(notOutput.contains("account: noAccount"))
        #expect(notErrors.contains("cloudsync login"))

        let (signedIn, _, _) = await run(
            ["login", file, "--provider", "ck", "--no-browser"], paste: Self.signInAndCopyToken)
        #expect(signedIn == .success)
        let (status, output, _) = await run(["cloudkit", "status", file, "--provider", "ck", "--json"])
        #expect(status == .success)
        let object = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any]
        #expect(object?["accountStatus"] as? String == "available")
        #expect(object?["zoneExists"] as? Bool == false)
        #expect(
            object?["userRecordName"] as? String
                == CloudKitWebAuthEmulator.userRecordName("user@example.com", Self.container))

        #expect(await run(["cloudkit", "ensure-zone", file, "--provider", "ck"]).0 == .success)
        #expect(await run(["cloudkit", "ensure-zone", file, "--provider", "ck"]).0 == .success)
        _ = await run(["run", file, "--quiet"])
        let (changed, lines, _) = await run(["cloudkit", "changes", file, "--provider", "ck", "--json"])
        #expect(changed == .success)
        let objects = lines.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        #expect(objects.count == 3)
        let names = objects.compactMap { ($0["record"] as? [String: Any])?["recordName"] as? String }
        #expect(names.sorted() == ["alpha", "beta"])
        let token = try #require(objects.last?["syncToken"] as? String)

        let (_, nothing, _) = await run(["cloudkit", "changes", file, "--provider", "ck", "--json", "--since", token])
        #expect(nothing == "{\"syncToken\":\"\(token)\"}\n")

        #expect(await run(["cloudkit", "delete-zone", file, "--provider", "ck"]).0 == .usage)
        #expect(await run(["cloudkit", "delete-zone", file, "--provider", "ck", "--yes"]).0 == .success)
        let (expired, _, expiredErrors) = await run(
            ["cloudkit", "changes", file, "--provider", "ck", "--since", token])
        #expect(expired == .failure)
        #expect(expiredErrors.contains("CK_ZONE_NOT_FOUND"))

        let (wrong, _, wrongErrors) = await run(["cloudkit", "status", file, "--provider", "files"])
        #expect(wrong == .usage)
        #expect(wrongErrors.contains("provider 'files' is directory, not cloudKit"))
    }
}
