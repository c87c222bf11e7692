import CloudSync
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

/// The Drive emulator's answers where a client does something Drive refuses.
@Suite struct DriveEmulatorTests {
    let host: DriveHost
    let token: String

    init() throws {
        host = try DriveHost()
        token = host.signIn().accessToken
    }

    func send(_ method: HTTPMethod, _ path: String, headers: HTTPHeaders = [:], body: Data = Data()) async throws
        -> (Int, String, String)
    {
        var request = HTTPRequest(method: method, url: URL(string: host.endpoint.absoluteString + path)!)
        request.headers = headers
        request.headers["Authorization"] = "Bearer \(token)"
        request.body = body
        let response = try await URLSessionTransport().send(request)
        let reason =
            ((try? JSONSerialization.jsonObject(with: response.body) as? [String: Any])?["error"] as? [String: Any])
            .flatMap { ($0["errors"] as? [[String: Any]])?.first?["reason"] as? String } ?? ""
        return (response.status, reason, String(decoding: response.body, as: UTF8.self))
    }

    /// The JSON object `body` holds.
    func object(_ body: String) throws -> NSDictionary {
        try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? NSDictionary, "\(body)")
    }

    @Test func aRequestWithoutATokenGetsGoogles401() async throws {
        let response = try await URLSessionTransport().send(
            HTTPRequest(method: .get, url: URL(string: host.endpoint.absoluteString + "/drive/v3/files")!))
        #expect(response.status == 401)
        #expect(String(decoding: response.body, as: UTF8.self).contains("\"UNAUTHENTICATED\""))
    }

    @Test func aboutNeedsFieldsAndListingRefusesABadQueryOrPageSize() async throws {
        #expect(try await send(.get, "/drive/v3/about").0 == 400)
        #expect(try await send(.get, "/drive/v3/files?pageSize=1001").1 == "invalid")
        #expect(try await send(.get, "/drive/v3/files?q=name%20~%20'x'").1 == "invalid")
        #expect(try await send(.get, "/drive/v3/files?pageToken=forged").1 == "invalid")
        #expect(try await send(.get, "/drive/v3/files?q=name+%3D+%27a+b%27+and+trashed+%3D+false").0 == 200)
    }

    @Test func trashedFilesAreListedUnlessTheQuerySaysOtherwise() async throws {
        let (_, _, created) = try await send(
            .post, "/drive/v3/files?fields=trashed", headers: ["Content-Type": "application/json"],
            body: Data(#"{"name":"gone","parents":["appDataFolder"],"trashed":true}"#.utf8))
        #expect(created.contains("\"trashed\":true"))
        #expect(try await send(.get, "/drive/v3/files?spaces=appDataFolder").2.contains("\"gone\""))
        #expect(
            !(try await send(.get, "/drive/v3/files?spaces=appDataFolder&q=trashed%20%3D%20false").2.contains("gone")))
        // The app data folder is its own space: a default listing (spaces=drive) does not show it.
        #expect(!(try await send(.get, "/drive/v3/files").2.contains("\"gone\"")))
    }

    @Test func resumableChunksButTheLastAreMultiplesOf256KiB() async throws {
        var start = HTTPRequest(
            method: .post,
            url: URL(string: host.endpoint.absoluteString + "/upload/drive/v3/files?uploadType=resumable&fields=size")!)
        start.headers = [
            "Authorization": "Bearer \(token)", "Content-Type": "application/json", "X-Upload-Content-Length": "300000",
        ]
        start.body = Data(#"{"name":"r","parents":["appDataFolder"]}"#.utf8)
        let session = try await URLSessionTransport().send(start)
        #expect(session.status == 200)
        let location = try #require(session.headers["Location"])
        let path = String(location.dropFirst(host.endpoint.absoluteString.count))
        let odd = try await send(
            .put, path, headers: ["Content-Range": "bytes 0-99999/300000"], body: Data(count: 100_000))
        #expect(odd.0 == 400)
        let first = try await send(
            .put, path, headers: ["Content-Range": "bytes 0-262143/300000"], body: Data(count: 262_144))
        #expect(first.0 == 308)
        let status = try await send(.put, path, headers: ["Content-Range": "bytes */300000"])
        #expect(status.0 == 308)
        let last = try await send(
            .put, path, headers: ["Content-Range": "bytes 262144-299999/300000"], body: Data(count: 37_856))
        #expect(last.0 == 200)
        // The last chunk answers with the fields the session's first request asked for.
        #expect(try object(last.2) == ["size": "300000"])
        host.files.expireUploadSessions()
        #expect(try await send(.put, path, headers: ["Content-Range": "bytes */300000"]).0 == 404)
    }

    @Test func aBatchRefusesMediaAndMoreThanAHundredCalls() async throws {
        func batch(_ parts: [String]) async throws -> (Int, String, String) {
            let body =
                parts.map {
                    "--b\r\nContent-Type: application/http\r\nContent-ID: <x+1>\r\n\r\n\($0) HTTP/1.1\r\n\r\n\r\n"
                }.joined() + "--b--\r\n"
            return try await send(
                .post, "/batch/drive/v3", headers: ["Content-Type": "multipart/mixed; boundary=b"],
                body: Data(body.utf8))
        }
        let media = try await batch(["GET /drive/v3/files/abc?alt=media"])
        #expect(media.0 == 200)
        #expect(media.2.contains("HTTP/1.1 400") && media.2.contains("Media requests cannot be used in a batch"))
        #expect(media.2.contains("Content-ID: <response-x+1>"))
        let tooMany = try await batch(Array(repeating: "DELETE /drive/v3/files/abc", count: 101))
        #expect(tooMany.0 == 400)
        let missing = try await batch(["DELETE /drive/v3/files/abc"])
        #expect(missing.2.contains("HTTP/1.1 404"))
    }
}
