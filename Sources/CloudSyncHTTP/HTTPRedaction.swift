import Foundation

/// Keeps credentials out of logs, errors and descriptions: the headers and query parameters that carry them are
/// replaced by `<redacted>` wherever a request is shown.
public enum HTTPRedaction {
    /// Header fields whose values are always hidden.
    public static let sensitiveHeaders: Set<String> = [
        "authorization", "proxy-authorization", "cookie", "set-cookie", "x-amz-security-token",
        "x-apple-cloudkit-web-auth-token",
    ]

    /// Query parameters whose values are always hidden (compared without case).
    public static let sensitiveQueryItems: Set<String> = [
        "access_token", "ckapitoken", "ckwebauthtoken", "x-amz-signature", "x-amz-credential",
        "x-amz-security-token", "key", "token", "refresh_token", "client_secret",
    ]

    /// The placeholder.
    public static let placeholder = "<redacted>"

    /// Whether `name` is a header whose value must not be shown.
    public static func isSensitiveHeader(_ name: String) -> Bool { sensitiveHeaders.contains(name.lowercased()) }

    /// `url` as text with the values of sensitive query parameters and any user info replaced.
    public static func redact(_ url: URL) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
            return placeholder
        }
        if components.password != nil { components.password = placeholder }
        if components.user != nil { components.user = placeholder }
        // The placeholder is not valid in a query, so the query is rebuilt as text rather than through components.
        let items = components.percentEncodedQueryItems
        components.percentEncodedQuery = nil
        guard let base = components.string else { return placeholder }
        guard let items else { return base }
        let query = items.map { item -> String in
            if sensitiveQueryItems.contains(item.name.lowercased()) { return "\(item.name)=\(placeholder)" }
            return item.value.map { "\(item.name)=\($0)" } ?? item.name
        }
        return base + "?" + query.joined(separator: "&")
    }

    /// The path and query of `url`, redacted, for a log line.
    public static func redactedPath(_ url: URL) -> String {
        let full = redact(url)
        guard let schemeEnd = full.range(of: "://") else { return full }
        let afterHost = full[schemeEnd.upperBound...].drop { $0 != "/" && $0 != "?" }
        let path = afterHost.hasPrefix("?") || afterHost.isEmpty ? "/" + afterHost : afterHost
        return String(path.split(separator: "#", maxSplits: 1).first ?? "/")
    }

    /// The credential texts `request` carries (header values, sensitive query values, user info), so they can be
    /// struck from anything the server sends back, such as an error body echoing a token.
    public static func secrets(of request: HTTPRequest) -> [String] {
        var found: [String] = []
        for field in request.headers where isSensitiveHeader(field.name) {
            found.append(field.value)
            // "Bearer abc" or "AWS4-HMAC-SHA256 Credential=..., Signature=...": each part may be echoed alone.
            found += field.value.split(whereSeparator: { " ,=;".contains($0) }).map(String.init)
                .filter { $0.count >= 8 }
        }
        if let components = URLComponents(url: request.url, resolvingAgainstBaseURL: false) {
            for item in components.queryItems ?? [] where sensitiveQueryItems.contains(item.name.lowercased()) {
                if let value = item.value { found.append(value) }
            }
            for item in components.percentEncodedQueryItems ?? []
            where sensitiveQueryItems.contains(item.name.lowercased()) {
                if let value = item.value { found.append(value) }
            }
            if let password = components.password { found.append(password) }
        }
        return found.filter { !$0.isEmpty }
    }

    /// `text` with every one of `secrets` replaced, longest first.
    public static func strike(_ secrets: [String], from text: String) -> String {
        secrets.filter { !$0.isEmpty }.sorted { $0.count > $1.count }.reduce(text) {
            $0.replacingOccurrences(of: $1, with: placeholder)
        }
    }

    /// A short, printable excerpt of a response body for an error message: control characters become spaces,
    /// runs of white space collapse, at most `limit` characters, and the request's credentials are struck.
    public static func excerpt(of body: Data, request: HTTPRequest, limit: Int = 200) -> String {
        let text = String(decoding: body.prefix(limit * 4), as: UTF8.self)
        let printable = String(
            String.UnicodeScalarView(
                text.unicodeScalars.map { scalar in
                    CharacterSet.controlCharacters.contains(scalar) || scalar == "\u{FFFD}" ? " " : scalar
                }))
        let collapsed = printable.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        let struck = strike(secrets(of: request), from: collapsed)
        return struck.count > limit ? String(struck.prefix(limit)) + "…" : struck
    }
}
