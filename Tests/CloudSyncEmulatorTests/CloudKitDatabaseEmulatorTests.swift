import CloudSync
import CloudSyncAuth
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

/// The CloudKit emulator's private database, spoken to as raw JSON over loopback.
@Suite struct CloudKitDatabaseEmulatorTests {
    let container = "iCloud.com.example.cloudsync"

    func post(
        _ host: EmulatorServer, _ token: String, _ operation: String, _ body: [String: Any]
    ) async throws -> (HTTPResponse, [String: Any]) {
        let url = appendingQuery(
            host.server.url("/database/1/\(container)/development/private/\(operation)"),
            [("ckAPIToken", CloudKitWebAuthEmulator.defaultAPIToken), ("ckWebAuthToken", token)])
        let answer = try await URLSessionTransport().send(
            HTTPRequest(method: .post, url: url, body: try JSONSerialization.data(withJSONObject: body)))
        return (answer, (try? JSONSerialization.jsonObject(with: answer.body)) as? [String: Any] ?? [:])
    }

    func createZone(_ host: EmulatorServer, _ token: String) async throws {
        let (answer, _) = try await post(
            host, token, "zones/modify",
            ["operations": [["operationType": "create", "zone": ["zoneID": ["zoneName": "Z"]]]]])
        #expect(answer.status == 200)
    }

    @Test func moreThan200OperationsAreRefusedAndAtomicBatchesFailWhole() async throws {
        let cloudKit = CloudKitEmulator()
        let host = try EmulatorServer(services: [cloudKit])
        defer { host.server.stop() }
        let token = cloudKit.webAuth.issueToken(container: container, environment: "development")
        try await createZone(host, token)
        func operation(_ name: String, _ type: String = "create") -> [String: Any] {
            [
                "operationType": type,
                "record": ["recordName": name, "recordType": "T", "fields": ["value": ["value": name]]],
            ]
        }
        let tooMany = (0..<201).map { operation("r\($0)") }
        let (refused, error) = try await post(
            host, token, "records/modify", ["zoneID": ["zoneName": "Z"], "operations": tooMany])
        #expect(refused.status == 400)
        #expect(error["serverErrorCode"] as? String == "BAD_REQUEST")
        #expect(error["uuid"] is String)
        #expect(refused.headers[CloudKitWebAuthEmulator.tokenHeader] != nil)

        let (atomic, body) = try await post(
            host, token, "records/modify",
            [
                "zoneID": ["zoneName": "Z"], "atomic": true,
                "operations": [operation("ok"), operation("missing", "update")],
            ])
        #expect(atomic.status == 200)
        let results = body["records"] as? [[String: Any]] ?? []
        #expect(results.map { $0["serverErrorCode"] as? String } == ["ATOMIC_ERROR", "NOT_FOUND"])
        #expect(cloudKit.database.recordNames(container: container, environment: "development", zone: "Z").isEmpty)

        let (missingZone, zoneError) = try await post(
            host, token, "records/lookup", ["zoneID": ["zoneName": "Nope"], "records": [["recordName": "a"]]])
        #expect(missingZone.status == 404)
        #expect(zoneError["serverErrorCode"] as? String == "ZONE_NOT_FOUND")
    }

    @Test func recordsAndZonesSurviveARestartThroughTheDataDirectory() async throws {
        let directory = try TemporaryDirectory()
        let first = CloudKitEmulator()
        var host = try EmulatorServer(services: [first], dataDirectory: directory.path)
        let token = first.webAuth.issueToken(container: container, environment: "development")
        try await createZone(host, token)
        let (saved, _) = try await post(
            host, token, "records/modify",
            [
                "zoneID": ["zoneName": "Z"],
                "operations": [
                    [
                        "operationType": "forceReplace",
                        "record": ["recordName": "kept", "recordType": "T", "fields": ["value": ["value": "1"]]],
                    ]
                ],
            ])
        #expect(saved.status == 200)
        try host.stop()

        let second = CloudKitEmulator()
        host = try EmulatorServer(services: [second], dataDirectory: directory.path)
        defer { host.server.stop() }
        #expect(second.database.recordNames(container: container, environment: "development", zone: "Z") == ["kept"])
        let (changes, body) = try await post(
            host, token, "changes/zone", ["zones": [["zoneID": ["zoneName": "Z"], "resultsLimit": 1]]])
        #expect(changes.status == 200)
        let zone = (body["zones"] as? [[String: Any]])?.first
        #expect((zone?["records"] as? [[String: Any]])?.first?["recordName"] as? String == "kept")
        #expect(zone?["syncToken"] is String)
    }
}
