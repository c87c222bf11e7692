import CloudSync
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

/// The Drive emulator answers as Drive would where a client that reads Drive differently from us would notice:
/// partial responses, ranged downloads, the app data folder's id, checksums, generated ids and the search language.
@Suite struct DriveEmulatorFidelityTests {
    let host: DriveHost
    let account: (user: String, refreshToken: String, accessToken: String)

    init() throws {
        host = try DriveHost()
        account = host.signIn()
    }

    struct Answer {
        var status: Int
        var headers: HTTPHeaders
        var body: Data

        var text: String { String(decoding: body, as: UTF8.self) }
        var object: NSDictionary { (try? JSONSerialization.jsonObject(with: body) as? NSDictionary) ?? [:] }
        var keys: Set<String> { Set(object.allKeys.compactMap { $0 as? String }) }
        var reason: String? {
            ((object["error"] as? NSDictionary)?["errors"] as? [NSDictionary])?.first?["reason"] as? String
        }
    }

    func send(_ method: HTTPMethod, _ path: String, headers: HTTPHeaders = [:], json: String? = nil) async throws
        -> Answer
    {
        var request = HTTPRequest(method: method, url: URL(string: host.endpoint.absoluteString + path)!)
        request.headers = headers
        request.headers["Authorization"] = "Bearer \(account.accessToken)"
        if let json {
            request.headers["Content-Type"] = "application/json"
            request.body = Data(json.utf8)
        }
        let response = try await URLSessionTransport().send(request)
        return Answer(status: response.status, headers: response.headers, body: response.body)
    }

    /// Creates a file in the app data folder with `content` (multipart); returns its id.
    func upload(_ name: String, _ content: String, appProperties: [String: String] = [:]) async throws -> String {
        let metadata = try JSONSerialization.data(
            withJSONObject: ["name": name, "parents": ["appDataFolder"], "appProperties": appProperties])
        var request = HTTPRequest(
            method: .post,
            url: URL(string: host.endpoint.absoluteString + "/upload/drive/v3/files?uploadType=multipart&fields=id")!)
        request.headers = [
            "Authorization": "Bearer \(account.accessToken)", "Content-Type": "multipart/related; boundary=b",
        ]
        request.body = Data(
            ("--b\r\nContent-Type: application/json\r\n\r\n\(String(decoding: metadata, as: UTF8.self))\r\n"
                + "--b\r\nContent-Type: application/octet-stream\r\n\r\n\(content)\r\n--b--\r\n").utf8)
        let response = try await URLSessionTransport().send(request)
        #expect(response.status == 200)
        let object = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        return try #require(object?["id"] as? String)
    }

    // MARK: fields

    @Test func withoutFieldsAnswersCarryOnlyDrivesDefaultFields() async throws {
        let id = try await upload("one", "1")
        _ = try await upload("two", "2")
        #expect(try await send(.get, "/drive/v3/files/\(id)").keys == ["kind", "id", "name", "mimeType"])
        let created = try await send(.post, "/drive/v3/files", json: #"{"name":"x","parents":["appDataFolder"]}"#)
        #expect(created.keys == ["kind", "id", "name", "mimeType"])

        let page = try await send(.get, "/drive/v3/files?spaces=appDataFolder&pageSize=1")
        #expect(page.keys == ["kind", "incompleteSearch", "nextPageToken", "files"])
        let files = try #require(page.object["files"] as? [NSDictionary])
        #expect(files.map { Set($0.allKeys.compactMap { $0 as? String }) } == [["kind", "id", "name", "mimeType"]])
        // No nextPageToken on the last page.
        #expect(
            try await send(.get, "/drive/v3/files?spaces=appDataFolder").keys == ["kind", "incompleteSearch", "files"])

        let start = try await send(.get, "/drive/v3/changes/startPageToken")
        #expect(start.keys == ["kind", "startPageToken"])
        let token = try #require(start.object["startPageToken"] as? String)
        _ = try await upload("three", "3")
        let changes = try await send(.get, "/drive/v3/changes?spaces=appDataFolder&pageToken=\(token)")
        #expect(changes.keys == ["kind", "newStartPageToken", "changes"])
        let change = try #require((changes.object["changes"] as? [NSDictionary])?.first)
        #expect(
            Set(change.allKeys.compactMap { $0 as? String }) == [
                "kind", "changeType", "time", "removed", "fileId", "file",
            ])
        #expect((change["file"] as? NSDictionary)?.count == 4)

        let about = try await send(.get, "/drive/v3/about")
        #expect(about.status == 400)
        #expect(about.reason == "required")
        #expect(about.text.contains("'fields' parameter"))
    }

    @Test func fieldsSelectExactlyWhatTheyName() async throws {
        let id = try await upload("one", "1", appProperties: ["k": "v", "other": "w"])
        let got = try await send(.get, "/drive/v3/files/\(id)?fields=id,size,appProperties/k")
        #expect(got.object == ["id": id, "size": "1", "appProperties": ["k": "v"]])
        let listed = try await send(.get, "/drive/v3/files?spaces=appDataFolder&fields=files(id,name)")
        #expect(listed.object == ["files": [["id": id, "name": "one"]]])
        let everything = try await send(.get, "/drive/v3/files/\(id)?fields=*")
        #expect(everything.keys.isSuperset(of: ["parents", "modifiedTime", "md5Checksum", "version", "trashed"]))
        let about = try await send(.get, "/drive/v3/about?fields=user/permissionId")
        #expect(about.object == ["user": ["permissionId": DriveFilesEmulator.permissionID(of: account.user)]])
        let patched = try await send(.patch, "/drive/v3/files/\(id)?fields=name,version", json: #"{"name":"uno"}"#)
        #expect(patched.object == ["name": "uno", "version": "2"])

        // A batch part answers with the fields its own request line asks for.
        var batch = HTTPRequest(method: .post, url: URL(string: host.endpoint.absoluteString + "/batch/drive/v3")!)
        batch.headers = [
            "Authorization": "Bearer \(account.accessToken)", "Content-Type": "multipart/mixed; boundary=b",
        ]
        let part = "--b\r\nContent-Type: application/http\r\n\r\n"
        batch.body = Data(
            (part + "GET /drive/v3/files/\(id)?fields=name HTTP/1.1\r\n\r\n\r\n" + part
                + "GET /drive/v3/files/\(id) HTTP/1.1\r\n\r\n\r\n--b--\r\n").utf8)
        let parts = String(decoding: try await URLSessionTransport().send(batch).body, as: UTF8.self)
        #expect(parts.contains(#"{"name":"uno"}"#))
        #expect(
            parts.contains(#"{"id":"\#(id)","kind":"drive#file","mimeType":"application/octet-stream","name":"uno"}"#))
    }

    @Test(arguments: ["nope", "files(id", "files(id))", "files(nope)", "id,", "name/first"])
    func anInvalidSelectorIsRefusedBeforeAnythingIsDone(fields: String) async throws {
        let escaped = fields.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? fields
        let listed = try await send(.get, "/drive/v3/files?fields=\(escaped)")
        #expect(listed.status == 400)
        #expect(listed.reason == "invalidParameter")
        let created = try await send(
            .post, "/drive/v3/files?fields=\(escaped)", json: #"{"name":"x","parents":["appDataFolder"]}"#)
        #expect(created.reason == "invalidParameter")
        #expect(host.files.files(of: account.user).isEmpty)
    }

    // MARK: Range

    @Test func aRangedDownloadAnswersOnlyThoseBytes() async throws {
        let id = try await upload("digits", "0123456789")
        func download(_ range: String?) async throws -> Answer {
            try await send(.get, "/drive/v3/files/\(id)?alt=media", headers: range.map { ["Range": $0] } ?? [:])
        }
        let whole = try await download(nil)
        #expect(whole.status == 200)
        #expect(whole.text == "0123456789")
        for (range, part, contentRange) in [
            ("bytes=2-4", "234", "bytes 2-4/10"), ("bytes=7-", "789", "bytes 7-9/10"),
            ("bytes=-3", "789", "bytes 7-9/10"), ("bytes=8-100", "89", "bytes 8-9/10"),
            ("bytes=-20", "0123456789", "bytes 0-9/10"),
        ] {
            let answer = try await download(range)
            #expect(answer.status == 206, "\(range)")
            #expect(answer.text == part, "\(range)")
            #expect(answer.headers["Content-Range"] == contentRange, "\(range)")
        }
        for range in ["bytes=10-", "bytes=10-12", "bytes=-0"] {
            let answer = try await download(range)
            #expect(answer.status == 416, "\(range)")
            #expect(answer.headers["Content-Range"] == "bytes */10", "\(range)")
        }
        // A header of another form is ignored: the whole content.
        #expect(try await download("bytes=4-2").status == 200)
        #expect(try await download("items=0-1").status == 200)
    }

    // MARK: The app data folder

    @Test func parentsCarryTheFoldersIdAndAFileCannotLeaveIt() async throws {
        let folder = DriveFilesEmulator.appDataFolderID(of: account.user)
        #expect(folder != "appDataFolder")
        #expect(folder == DriveFilesEmulator.appDataFolderID(of: account.user))
        #expect(folder != DriveFilesEmulator.appDataFolderID(of: "someone-else@example.com"))
        let id = try await upload("kept", "k")
        #expect(try await send(.get, "/drive/v3/files/\(id)?fields=parents").object == ["parents": [folder]])
        // The id works where the alias does: in parents on create, and in q.
        let byID = try await send(
            .post, "/drive/v3/files?fields=spaces", json: #"{"name":"b","parents":["\#(folder)"]}"#)
        #expect(byID.object == ["spaces": ["appDataFolder"]])
        let q = "'\(folder)' in parents".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let listed = try await send(.get, "/drive/v3/files?spaces=appDataFolder&q=\(q)&fields=files(name)")
        #expect(listed.object == ["files": [["name": "b"], ["name": "kept"]]])

        for move in ["removeParents=appDataFolder", "addParents=root", "removeParents=\(folder)&addParents=root"] {
            let answer = try await send(.patch, "/drive/v3/files/\(id)?\(move)", json: "{}")
            #expect(answer.status == 403, "\(move)")
            #expect(answer.reason == "cannotChangeSpace", "\(move)")
        }
        let parentsInBody = try await send(.patch, "/drive/v3/files/\(id)", json: #"{"parents":["root"]}"#)
        #expect(parentsInBody.reason == "fieldNotWritable")
        // Naming the folder it is in already moves nothing.
        #expect(try await send(.patch, "/drive/v3/files/\(id)?addParents=appDataFolder", json: "{}").status == 200)
        #expect(host.files.files(of: account.user).allSatisfy { $0.parents == ["appDataFolder"] })
        // Nor may a file of the drive space move into it.
        let other = try await send(.post, "/drive/v3/files?fields=id", json: #"{"name":"c"}"#)
        let otherID = try #require(other.object["id"] as? String)
        #expect(try await send(.patch, "/drive/v3/files/\(otherID)?addParents=\(folder)", json: "{}").status == 403)
    }

    // MARK: Checksums

    @Test func filesCarryMD5SHA1AndSHA256InLowercaseHex() async throws {
        let id = try await upload("hello", "hello")
        let sums = try await send(.get, "/drive/v3/files/\(id)?fields=md5Checksum,sha1Checksum,sha256Checksum")
        #expect(
            sums.object == [
                "md5Checksum": "5d41402abc4b2a76b9719d911017c592",
                "sha1Checksum": "aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d",
                "sha256Checksum": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
            ])
        // A Google Docs type (a folder) has no content to sum.
        let folder = try await send(
            .post, "/drive/v3/files?fields=id,md5Checksum",
            json: #"{"name":"f","mimeType":"application/vnd.google-apps.folder"}"#)
        #expect(folder.keys == ["id"])
    }

    // MARK: generateIds

    @Test func aCreateMayUseAnIdGenerateIdsGaveOutOnce() async throws {
        let generated = try await send(.get, "/drive/v3/files/generateIds?count=3&space=appDataFolder")
        #expect(generated.status == 200)
        #expect(generated.object["kind"] as? String == "drive#generatedIds")
        #expect(generated.object["space"] as? String == "appDataFolder")
        let ids = try #require(generated.object["ids"] as? [String])
        #expect(ids.count == 3 && Set(ids).count == 3)
        #expect((try await send(.get, "/drive/v3/files/generateIds").object["ids"] as? [String])?.count == 10)
        for count in ["0", "1001", "x"] {
            #expect(try await send(.get, "/drive/v3/files/generateIds?count=\(count)").reason == "invalid")
        }

        let body = #"{"id":"\#(ids[0])","name":"g","parents":["appDataFolder"]}"#
        let created = try await send(.post, "/drive/v3/files?fields=id,name", json: body)
        #expect(created.object == ["id": ids[0], "name": "g"])
        // A retry of the same create finds the id used: no second file.
        let again = try await send(.post, "/drive/v3/files", json: body)
        #expect(again.status == 409)
        #expect(again.reason == "duplicate")
        #expect(host.files.files(of: account.user).map(\.id) == [ids[0]])
        // So does one in a batch.
        var batch = HTTPRequest(method: .post, url: URL(string: host.endpoint.absoluteString + "/batch/drive/v3")!)
        batch.headers = [
            "Authorization": "Bearer \(account.accessToken)", "Content-Type": "multipart/mixed; boundary=b",
        ]
        batch.body = Data(
            ("--b\r\nContent-Type: application/http\r\n\r\nPOST /drive/v3/files HTTP/1.1\r\n"
                + "Content-Type: application/json\r\n\r\n\(body)\r\n--b--\r\n").utf8)
        let parts = String(decoding: try await URLSessionTransport().send(batch).body, as: UTF8.self)
        #expect(parts.contains("HTTP/1.1 409 Conflict") && parts.contains(#""reason":"duplicate""#), "\(parts)")
        // An id nobody generated, or one generated for another space, is refused.
        let forged = try await send(.post, "/drive/v3/files", json: #"{"id":"1forged","parents":["appDataFolder"]}"#)
        #expect(forged.status == 400)
        let driveIDs = try await send(.get, "/drive/v3/files/generateIds?count=1&space=drive")
        let driveID = try #require((driveIDs.object["ids"] as? [String])?.first)
        let elsewhere = try await send(
            .post, "/drive/v3/files", json: #"{"id":"\#(driveID)","parents":["appDataFolder"]}"#)
        #expect(elsewhere.status == 400)
        // A resumable upload may carry one too.
        var start = HTTPRequest(
            method: .post,
            url: URL(string: host.endpoint.absoluteString + "/upload/drive/v3/files?uploadType=resumable&fields=id")!)
        start.headers = ["Authorization": "Bearer \(account.accessToken)", "Content-Type": "application/json"]
        start.body = Data(#"{"id":"\#(ids[1])","name":"r","parents":["appDataFolder"]}"#.utf8)
        let session = try await URLSessionTransport().send(start)
        let location = try #require(session.headers["Location"])
        let path = String(location.dropFirst(host.endpoint.absoluteString.count))
        let last = try await send(.put, path, headers: ["Content-Range": "bytes 0-2/3"], json: "abc")
        #expect(last.object == ["id": ids[1]])
    }

    // MARK: q

    @Test func queriesCombineWithOrNotAndParenthesesAndCompareTimesAndProperties() async throws {
        _ = try await upload("a", "1", appProperties: ["colour": "red"])
        host.clock.advance(by: .seconds(60))
        _ = try await upload("b", "2", appProperties: ["colour": "blue"])
        host.clock.advance(by: .seconds(60))
        _ = try await upload("c", "3")
        func names(_ q: String) async throws -> [String] {
            let escaped = q.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let answer = try await send(
                .get, "/drive/v3/files?spaces=appDataFolder&orderBy=name&fields=files(name)&q=\(escaped)")
            #expect(answer.status == 200, "\(q): \(answer.text)")
            return (answer.object["files"] as? [NSDictionary] ?? []).compactMap { $0["name"] as? String }
        }
        #expect(try await names("name = 'a' or name = 'c'") == ["a", "c"])
        #expect(try await names("(name = 'a' or name = 'b') and not name = 'a'") == ["b"])
        #expect(try await names("name = 'a' or name = 'b' and trashed = true") == ["a"])
        #expect(try await names("modifiedTime > '2026-01-01T00:00:30Z'") == ["b", "c"])
        #expect(try await names("modifiedTime <= '2026-01-01T00:01:00Z' and trashed = false") == ["a", "b"])
        #expect(try await names("appProperties has { key='colour' and value='blue' }") == ["b"])
        #expect(try await names("not appProperties has { key='colour' and value='red' }") == ["b", "c"])
        let malformed = try await send(.get, "/drive/v3/files?q=(name%20%3D%20'a'")
        #expect(malformed.status == 400)
        #expect(malformed.reason == "invalid")
    }
}
