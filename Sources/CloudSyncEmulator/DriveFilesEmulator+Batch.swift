import CloudSync
import CloudSyncHTTP
import CloudSyncHTTPServer
import CloudSyncSodium
import Foundation
import Synchronization

/// The batch endpoint: a multipart request of requests, answered part by part.
extension DriveFilesEmulator {
    // MARK: Batch

    func batch(_ request: ReceivedRequest) -> HTTPResponse {
        guard let parts = MIMEMultipart.parse(request.body, contentType: request.headers["Content-Type"]) else {
            return Self.error(400, "badContent", "A batch request is multipart/mixed with a boundary")
        }
        guard parts.count <= Self.batchLimit else {
            return Self.error(
                400, "batchSizeTooLarge",
                "A batch request may contain at most \(Self.batchLimit) calls; this one has "
                    + "\(parts.count)")
        }
        let boundary = "batch_" + randomToken("", bytes: 12).replacingOccurrences(of: "-", with: "x")
        var body = Data()
        for part in parts {
            let answer = answerBatchPart(part, outer: request)
            // `<item1>` is answered as `<response-item1>`, as Google does.
            let contentID = part.headers["Content-ID"].map { id in
                id.hasPrefix("<") && id.hasSuffix(">") ? "<response-" + id.dropFirst() : "response-" + id
            }
            body += Data("--\(boundary)\r\nContent-Type: application/http\r\n".utf8)
            if let contentID { body += Data("Content-ID: \(contentID)\r\n".utf8) }
            body += Data("\r\nHTTP/1.1 \(answer.status) \(Self.reason(answer.status))\r\n".utf8)
            for field in answer.headers where field.name.lowercased() != "content-length" {
                body += Data("\(field.name): \(field.value)\r\n".utf8)
            }
            body += Data("Content-Length: \(answer.body.count)\r\n\r\n".utf8) + answer.body + Data("\r\n".utf8)
        }
        body += Data("--\(boundary)--\r\n".utf8)
        return HTTPResponse(status: 200, headers: ["Content-Type": "multipart/mixed; boundary=\(boundary)"], body: body)
    }

    static func reason(_ status: Int) -> String {
        [
            200: "OK", 204: "No Content", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            409: "Conflict",
        ][status] ?? "Status"
    }

    func answerBatchPart(_ part: MIMEMultipart.Part, outer: ReceivedRequest) -> HTTPResponse {
        guard let inner = Self.parseInnerRequest(part.body) else {
            return Self.error(400, "badRequest", "A batch part is not an HTTP request")
        }
        var request = inner
        if request.headers["Authorization"] == nil, let outerAuthorization = outer.headers["Authorization"] {
            request.headers["Authorization"] = outerAuthorization
        }
        request.headers["Host"] = outer.headers["Host"]
        if request.path.hasPrefix("/upload/") || request.formQuery("alt") == "media" {
            return Self.error(400, "badRequest", "Media requests cannot be used in a batch request.")
        }
        let segments = request.path.split(separator: "/").map(String.init)
        guard segments.count >= 3, segments[0] == "drive", segments[1] == "v3" else {
            return Self.error(404, "notFound", "Not Found")
        }
        return authorized(request) { user in
            let path = Array(segments.dropFirst(2))
            if path.count == 2, path[0] == "files" {
                request.captures["id"] = path[1].removingPercentEncoding ?? path[1]
            }
            switch (request.method, path) {
            case ("GET", ["files"]): return answer(request, as: .fileList) { list(request, user: user) }
            case ("POST", ["files"]):
                return answer(request, as: .file) { create(request, user: user, uploadType: nil) }
            case ("GET", ["files", "generateIds"]):
                return answer(request, as: .generatedIDs) { generateIDs(request, user: user) }
            case ("GET", let path) where path.count == 2 && path[0] == "files":
                return answer(request, as: .file) { get(request, user: user) }
            case ("PATCH", let path) where path.count == 2 && path[0] == "files":
                return answer(request, as: .file) { update(request, user: user, uploadType: nil) }
            case ("DELETE", let path) where path.count == 2 && path[0] == "files":
                return delete(request, user: user)
            case ("GET", ["about"]): return answer(request, as: .about) { about(request, user: user) }
            case ("GET", ["changes", "startPageToken"]):
                return answer(request, as: .startPageToken) { startPageToken(request, user: user) }
            case ("GET", ["changes"]): return answer(request, as: .changeList) { changes(request, user: user) }
            default: return Self.error(404, "notFound", "Not Found")
            }
        }
    }

    /// `METHOD /path?query HTTP/1.1`, headers, a blank line and a body.
    static func parseInnerRequest(_ data: Data) -> ReceivedRequest? {
        guard let head = MIMEMultipart.splitHead(data) else { return nil }
        var lines = head.lines
        guard !lines.isEmpty else { return nil }
        let requestLine = lines.removeFirst().split(separator: " ")
        guard requestLine.count >= 2 else { return nil }
        var target = String(requestLine[1])
        if let url = URL(string: target), url.scheme != nil {
            target = url.path + (url.query.map { "?" + $0 } ?? "")
        }
        let pieces = target.split(separator: "?", maxSplits: 1).map(String.init)
        let query = pieces.count > 1 ? URLComponents(string: "?" + pieces[1])?.queryItems ?? [] : []
        var request = ReceivedRequest(
            method: String(requestLine[0]).uppercased(), path: pieces[0], queryItems: query,
            headers: MIMEMultipart.headers(lines), body: head.body)
        request.rawQuery = pieces.count > 1 ? pieces[1] : ""
        return request
    }
}
