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
        _ host: EmulatorServer, _ token: String, _ operation: String, _ body: [String: Any],
        headers: HTTPHeaders = [:]
    ) async throws -> (HTTPResponse, [String: Any]) {
        let url = appendingQuery(
            host.server.url("/database/1/\(container)/development/private/\(operation)"),
            [("ckAPIToken", CloudKitWebAuthEmulator.defaultAPIToken), ("ckWebAuthToken", token)])
        let answer = try await URLSessionTransport().send(
            HTTPRequest(
                method: .post, url: url, headers: headers, body: try JSONSerialization.data(withJSONObject: body)))
        return (answer, (try? JSONSerialization.jsonObject(with: answer.body)) as? [String: Any] ?? [:])
    }

    /// `method` on an asset URL the emulator handed out, with `body`; the answer and its JSON object, if any.
    func send(_ method: HTTPMethod, _ url: String, _ body: Data = Data()) async throws -> (HTTPResponse, [String: Any])
    {
        let answer = try await URLSessionTransport().send(
            HTTPRequest(method: method, url: try #require(URL(string: url)), body: body))
        return (answer, (try? JSONSerialization.jsonObject(with: answer.body)) as? [String: Any] ?? [:])
    }

    /// The `singleFile` dictionary of `bytes` posted to an upload URL asked for `record`'s field `file` in zone `Z`.
    func upload(_ host: EmulatorServer, _ token: String, _ record: String, _ bytes: Data) async throws -> [String: Any]
    {
        let (answer, body) = try await post(
            host, token, "assets/upload",
            [
                "zoneID": ["zoneName": "Z"],
                "tokens": [["recordName": record, "recordType": "Doc", "fieldName": "file"]],
            ])
        #expect(answer.status == 200)
        let url = try #require((body["tokens"] as? [[String: Any]])?.first?["url"] as? String)
        let (uploaded, file) = try await send(.post, url, bytes)
        #expect(uploaded.status == 200)
        return try #require(file["singleFile"] as? [String: Any])
    }

    /// A `forceReplace` of `record` (type `Doc`) whose field `file` is the ASSET `asset`.
    func saveDocument(_ record: String, _ asset: [String: Any]) -> [String: Any] {
        [
            "zoneID": ["zoneName": "Z"],
            "operations": [
                [
                    "operationType": "forceReplace",
                    "record": [
                        "recordName": record, "recordType": "Doc",
                        "fields": ["file": ["type": "ASSET", "value": asset]],
                    ],
                ]
            ],
        ]
    }

    @Test func anAssetIsUploadedClaimedByARecordAndDownloadedFromItsAnswer() async throws {
        let cloudKit = CloudKitEmulator()
        cloudKit.database.configure { $0.maxAssetBytes = 1000 }
        let host = try EmulatorServer(services: [cloudKit])
        defer { host.server.stop() }
        let token = cloudKit.webAuth.issueToken(container: container, environment: "development")
        try await createZone(host, token)

        // The URLs are absolute, on the scheme and host the request came in on.
        let tokens = (0..<3).map { ["recordName": "r\($0)", "recordType": "Doc", "fieldName": "file"] }
        let (urls, answered) = try await post(
            host, token, "assets/upload", ["zoneID": ["zoneName": "Z"], "tokens": tokens],
            headers: ["X-Forwarded-Proto": "https"])
        #expect(urls.status == 200)
        let given = answered["tokens"] as? [[String: Any]] ?? []
        #expect(given.map { $0["recordName"] as? String } == ["r0", "r1", "r2"])
        #expect(given.map { $0["fieldName"] as? String } == ["file", "file", "file"])
        let prefix = "https://127.0.0.1:\(host.server.port)/ckassets/upload/"
        #expect(given.allSatisfy { ($0["url"] as? String)?.hasPrefix(prefix) == true }, "\(given)")
        let tooMany = (0..<201).map { ["recordName": "r\($0)", "recordType": "Doc", "fieldName": "file"] }
        let (refused, error) = try await post(
            host, token, "assets/upload", ["zoneID": ["zoneName": "Z"], "tokens": tooMany])
        #expect(refused.status == 400)
        #expect(error["serverErrorCode"] as? String == "BAD_REQUEST")

        let bytes = Data((0..<1000).map { UInt8($0 % 251) })
        let file = try await upload(host, token, "doc", bytes)
        #expect(Set(file.keys) == ["wrappingKey", "fileChecksum", "receipt", "referenceChecksum", "size"])
        #expect((file["size"] as? NSNumber)?.intValue == 1000)

        // Over the limit: refused, naming it.
        let (_, body) = try await post(
            host, token, "assets/upload",
            ["zoneID": ["zoneName": "Z"], "tokens": [["recordName": "big", "recordType": "Doc", "fieldName": "file"]]])
        let bigURL = try #require((body["tokens"] as? [[String: Any]])?.first?["url"] as? String)
        let (tooLarge, tooLargeError) = try await send(.post, bigURL, Data(count: 1001))
        #expect(tooLarge.status == 413)
        #expect((tooLargeError["reason"] as? String)?.contains("too large") == true)

        let (saved, records) = try await post(host, token, "records/modify", saveDocument("doc", file))
        #expect(saved.status == 200)
        let field = ((records["records"] as? [[String: Any]])?.first?["fields"] as? [String: Any])?["file"]
        let asset = try #require(field as? [String: Any])
        #expect(asset["type"] as? String == "ASSETID")
        let value = try #require(asset["value"] as? [String: Any])
        #expect(value["fileChecksum"] as? String == file["fileChecksum"] as? String)
        #expect((value["size"] as? NSNumber)?.intValue == 1000)
        #expect(value["receipt"] == nil)
        let downloadURL = try #require(value["downloadURL"] as? String)
        let (downloaded, _) = try await send(.get, downloadURL)
        #expect(downloaded.status == 200)
        #expect(downloaded.body == bytes)

        // A receipt this emulator never issued is that record's BAD_REQUEST.
        var forged = file
        forged["receipt"] = "made-up"
        let (_, forgedAnswer) = try await post(host, token, "records/modify", saveDocument("doc", forged))
        #expect((forgedAnswer["records"] as? [[String: Any]])?.first?["serverErrorCode"] as? String == "BAD_REQUEST")

        // Deleting the record frees the asset.
        _ = try await post(
            host, token, "records/modify",
            [
                "zoneID": ["zoneName": "Z"],
                "operations": [["operationType": "forceDelete", "record": ["recordName": "doc"]]],
            ])
        #expect(cloudKit.database.storedAssets.count == 0)
        #expect(try await send(.get, downloadURL).0.status == 404)
    }

    @Test func assetsSurviveARestartAsFilesInTheDataDirectory() async throws {
        let directory = try TemporaryDirectory()
        let first = CloudKitEmulator()
        var host = try EmulatorServer(services: [first], dataDirectory: directory.path)
        let token = first.webAuth.issueToken(container: container, environment: "development")
        try await createZone(host, token)
        let bytes = Data("an asset kept on disk".utf8)
        let file = try await upload(host, token, "doc", bytes)
        _ = try await post(host, token, "records/modify", saveDocument("doc", file))
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path + "/cloudkit-assets")
        #expect(files.count == 1)
        try host.stop()

        let second = CloudKitEmulator()
        host = try EmulatorServer(services: [second], dataDirectory: directory.path)
        defer { host.server.stop() }
        let (_, found) = try await post(
            host, token, "records/lookup", ["zoneID": ["zoneName": "Z"], "records": [["recordName": "doc"]]])
        let field = ((found["records"] as? [[String: Any]])?.first?["fields"] as? [String: Any])?["file"]
        let url = try #require(((field as? [String: Any])?["value"] as? [String: Any])?["downloadURL"] as? String)
        #expect(url.hasPrefix("http://127.0.0.1:\(host.server.port)/"))
        #expect(try await send(.get, url).0.body == bytes)
    }

    @Test func theCommandLineChoosesTheReadings() async throws {
        let options = try #require(
            try EmulatorCommand.parse([
                "--cloudkit", "--cloudkit-reading", "missingZone=perRecord",
                "--cloudkit-reading=expiredToken=zoneNotFound",
            ]))
        #expect(options.cloudKit.missingZone == .perRecord)
        #expect(options.cloudKit.expiredToken == .zoneNotFound)
        #expect(options.cloudKit.defaultZoneRecords == .accepted)
        let host = try EmulatorCommand.start(options)
        defer { host.server.stop() }
        let cloudKit = try #require(host.services.first as? CloudKitEmulator)
        let token = cloudKit.webAuth.issueToken(container: container, environment: "development")
        let (answer, body) = try await post(
            host, token, "records/lookup", ["zoneID": ["zoneName": "Nope"], "records": [["recordName": "a"]]])
        #expect(answer.status == 200)
        #expect((body["records"] as? [[String: Any]])?.first?["serverErrorCode"] as? String == "ZONE_NOT_FOUND")

        for (argument, message) in [
            (
                "missingZone=sometimes",
                "--cloudkit-reading missingZone is one of wholeRequest, perRecord; found 'sometimes'"
            ),
            ("colour=blue", "--cloudkit-reading takes NAME=VALUE, NAME one of missingZone, expiredToken"),
        ] {
            #expect {
                _ = try EmulatorCommand.parse(["--cloudkit-reading", argument])
            } throws: { error in
                (error as? EmulatorUsageError)?.message.hasPrefix(message) == true
            }
        }
    }

    @Test func anAssetNoRecordClaimsIsFreedAfter15Minutes() async throws {
        let clock = ManualClock()
        let cloudKit = CloudKitEmulator(clock: clock)
        let host = try EmulatorServer(services: [cloudKit])
        defer { host.server.stop() }
        let token = cloudKit.webAuth.issueToken(container: container, environment: "development")
        try await createZone(host, token)
        _ = try await upload(host, token, "doc", Data("never claimed".utf8))
        #expect(cloudKit.database.storedAssets.count == 1)
        clock.advance(by: .seconds(15 * 60))
        _ = try await upload(host, token, "other", Data("fresh".utf8))
        #expect(cloudKit.database.storedAssets.count == 2)
        clock.advance(by: .seconds(1))
        _ = try await upload(host, token, "third", Data("fresh too".utf8))
        #expect(cloudKit.database.storedAssets.count == 2)
    }

    @Test(arguments: CloudKitDatabaseEmulator.DefaultZoneAnswer.allCases)
    func recordsInTheDefaultZoneAreKeptUnlessRefused(answer: CloudKitDatabaseEmulator.DefaultZoneAnswer) async throws {
        let cloudKit = CloudKitEmulator()
        cloudKit.database.configure { $0.defaultZoneRecords = answer }
        let host = try EmulatorServer(services: [cloudKit])
        defer { host.server.stop() }
        let token = cloudKit.webAuth.issueToken(container: container, environment: "development")
        let write: [String: Any] = [
            "operations": [
                [
                    "operationType": "forceReplace",
                    "record": ["recordName": "d", "recordType": "T", "fields": ["value": ["value": "1"]]],
                ]
            ]
        ]
        let (saved, body) = try await post(host, token, "records/modify", write)
        let (read, found) = try await post(host, token, "records/lookup", ["records": [["recordName": "d"]]])
        switch answer {
        case .accepted:
            #expect(saved.status == 200 && read.status == 200)
            #expect((body["records"] as? [[String: Any]])?.first?["serverErrorCode"] == nil)
            let record = (found["records"] as? [[String: Any]])?.first
            #expect((record?["zoneID"] as? [String: Any])?["zoneName"] as? String == "_defaultZone")
            #expect(
                cloudKit.database.recordNames(container: container, environment: "development", zone: "_defaultZone")
                    == ["d"])
            // No change history in the default zone.
            let (_, changes) = try await post(
                host, token, "changes/zone", ["zones": [["zoneID": ["zoneName": "_defaultZone"]]]])
            #expect((changes["zones"] as? [[String: Any]])?.first?["serverErrorCode"] as? String == "BAD_REQUEST")
        case .refused:
            #expect(saved.status == 400 && read.status == 400)
            #expect(body["serverErrorCode"] as? String == "BAD_REQUEST")
        }
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
