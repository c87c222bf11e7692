import CloudSyncHTTP
import CloudSyncHTTPServer
import CloudSyncSodium
import Foundation

/// Random, unguessable text for the tokens and codes an emulator issues: `prefix` then URL-safe base64 of `bytes`
/// random bytes.
func randomToken(_ prefix: String, bytes: Int = 24) -> String {
    prefix + Base64URL.encode(SecureRandom.bytes(count: bytes))
}

/// The fields of a form body (`application/x-www-form-urlencoded`) or, for a JSON content type, of a JSON object of
/// strings; `+` reads as a space in a form, as HTML forms send it.
func formFields(of request: ReceivedRequest) -> [String: String] {
    if request.headers["Content-Type"]?.lowercased().hasPrefix("application/json") == true {
        let object = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any] ?? [:]
        return object.compactMapValues { $0 as? String }
    }
    var fields: [String: String] = [:]
    for (name, value) in HTTPForm.pairs(String(decoding: request.body, as: UTF8.self))
    where !name.isEmpty && fields[name] == nil {
        fields[name] = value
    }
    return fields
}

/// `url` (text) with `items` added to its query, values percent-encoded but for RFC 3986's unreserved characters.
func adding(_ items: [(String, String)], to url: String) -> String {
    let unreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
    let query = items.map { name, value in
        "\(name)=\(value.addingPercentEncoding(withAllowedCharacters: unreserved) ?? value)"
    }.joined(separator: "&")
    let (base, fragment) = url.split(separator: "#", maxSplits: 1).map(String.init).splitFirst()
    let separator = base.contains("?") ? (base.hasSuffix("?") || base.hasSuffix("&") ? "" : "&") : "?"
    return base + separator + query + (fragment.map { "#" + $0 } ?? "")
}

extension Array where Element == String {
    /// The first element and the second, if any.
    fileprivate func splitFirst() -> (String, String?) { (first ?? "", count > 1 ? self[1] : nil) }
}

/// A small HTML page, for the answers a person sees in a browser.
func htmlPage(_ status: Int, title: String, _ paragraphs: [String], headers: HTTPHeaders = [:]) -> HTTPResponse {
    var headers = headers
    headers["Content-Type"] = "text/html; charset=utf-8"
    let body = paragraphs.map { "<p>\($0)</p>" }.joined()
    return .text(
        status,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>\(escapeHTML(title))</title></head>"
            + "<body><h1>\(escapeHTML(title))</h1>\(body)</body></html>\n", headers: headers)
}

/// `text` safe inside HTML.
func escapeHTML(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
        .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
}

/// A redirect to `location`.
func redirect(to location: String) -> HTTPResponse {
    HTTPResponse(status: 302, headers: ["Location": location, "Cache-Control": "no-store"])
}

/// Lower-case hex of the SHA-256 of `text`.
func sha256Hex(_ text: String) -> String { Hex.encode(SHA256.hash(Array(text.utf8))) }
