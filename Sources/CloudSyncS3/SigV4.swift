import CloudSyncHTTP
import CloudSyncSodium
import Foundation

/// An AWS access key: the id names it, the secret signs with it, and a session token comes with temporary keys.
///
/// Its description names the key id only; the secret and the token never appear in text.
public struct S3Credentials: Sendable, Equatable, CustomStringConvertible {
    /// The access key id (`AKIA...`), which is not secret.
    public var accessKeyID: String
    /// The secret access key.
    public var secretAccessKey: String
    /// The session token of temporary credentials; nil for long-term keys.
    public var sessionToken: String?

    /// Credentials of `accessKeyID`, signing with `secretAccessKey`, with `sessionToken` for temporary ones.
    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }

    /// `access key <id>`; never the secret or the token.
    public var description: String { "access key \(accessKeyID)" }
}

/// AWS Signature Version 4 for header authentication, as a pure function: a request, credentials and a time in, the
/// headers to add out.
///
/// The canonical request follows the S3 rules: the URL's path is used exactly as it is encoded (S3 neither
/// normalises it nor encodes it twice, so build it with ``S3URIEncoding/path(_:)``), the query's names and values
/// are decoded and encoded again with RFC 3986's unreserved set and sorted, every header given is signed (`host`
/// from the URL) except those proxies and clients add or change, and `x-amz-content-sha256` is sent on every request
/// when `contentHashHeader` is set, as S3 requires.
package enum SigV4 {
    /// The hex SHA-256 of nothing, the payload hash of a request without a body.
    package static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    /// The payload hash that leaves the body unsigned.
    package static let unsignedPayload = "UNSIGNED-PAYLOAD"
    /// The algorithm's name in the string to sign and the `Authorization` header.
    package static let algorithm = "AWS4-HMAC-SHA256"

    /// Header names never signed, because clients and proxies add, drop or change them on the way.
    package static let unsignedHeaderNames: Set<String> = [
        "authorization", "connection", "content-length", "expect", "keep-alive", "proxy-authorization", "te",
        "trailer", "transfer-encoding", "upgrade", "user-agent",
    ]

    /// What signing produced: the headers to add, and the intermediate texts a test or a puzzled person compares.
    package struct Signature: Sendable, Equatable {
        /// The headers to add to the request: `x-amz-date`, `x-amz-content-sha256` (when asked),
        /// `x-amz-security-token` (with a session token) and `Authorization`.
        package var headers: HTTPHeaders
        /// The canonical request that was signed.
        package var canonicalRequest: String
        /// The string to sign.
        package var stringToSign: String
        /// The signed header names, `;`-separated.
        package var signedHeaders: String
        /// The signature, in lower-case hex.
        package var signature: String
    }

    /// Signs a request.
    ///
    /// - Parameters:
    ///   - method: the HTTP method.
    ///   - url: the full URL, path percent-encoded exactly as it will be sent.
    ///   - headers: the headers the request will carry (besides those this adds); all are signed except
    ///     ``unsignedHeaderNames``.
    ///   - payloadHash: the hex SHA-256 of the body (``emptyPayloadHash`` for none) or ``unsignedPayload``.
    ///   - credentials: the key to sign with.
    ///   - region: the region of the scope (`us-east-1`, `auto`).
    ///   - service: the service of the scope.
    ///   - timeMilliseconds: the signing time in milliseconds since 1970; it goes into `x-amz-date`.
    ///   - contentHashHeader: whether to send the payload hash as `x-amz-content-sha256` (S3 requires it).
    package static func sign(
        method: String, url: URL, headers: HTTPHeaders, payloadHash: String, credentials: S3Credentials,
        region: String, service: String = "s3", timeMilliseconds: Int64, contentHashHeader: Bool = true
    ) -> Signature {
        let (date, day) = timestamps(milliseconds: timeMilliseconds)
        var added = HTTPHeaders()
        added.add("x-amz-date", date)
        if contentHashHeader { added.add("x-amz-content-sha256", payloadHash) }
        if let token = credentials.sessionToken { added.add("x-amz-security-token", token) }

        var canonical: [String: [String]] = [:]
        for field in headers where !unsignedHeaderNames.contains(field.name.lowercased()) {
            canonical[field.name.lowercased(), default: []].append(trimmed(field.value))
        }
        for field in added { canonical[field.name.lowercased()] = [field.value] }
        if canonical["host"] == nil { canonical["host"] = [host(of: url)] }
        let names = canonical.keys.sorted()
        let signedHeaders = names.joined(separator: ";")
        let headerLines = names.map { "\($0):\(canonical[$0]!.joined(separator: ","))\n" }.joined()

        let canonicalRequest = [
            method.uppercased(), canonicalURI(url), canonicalQuery(url), headerLines, signedHeaders, payloadHash,
        ].joined(separator: "\n")
        let scope = "\(day)/\(region)/\(service)/aws4_request"
        let stringToSign = [algorithm, date, scope, Hex.encode(SHA256.hash(Array(canonicalRequest.utf8)))]
            .joined(separator: "\n")
        let key = signingKey(secret: credentials.secretAccessKey, day: day, region: region, service: service)
        let signature = Hex.encode(HMACSHA256.authenticate(Array(stringToSign.utf8), key: key))
        added.add(
            "Authorization",
            "\(algorithm) Credential=\(credentials.accessKeyID)/\(scope), SignedHeaders=\(signedHeaders), "
                + "Signature=\(signature)")
        return Signature(
            headers: added, canonicalRequest: canonicalRequest, stringToSign: stringToSign,
            signedHeaders: signedHeaders, signature: signature)
    }

    /// The signing key of a day, region and service: `HMAC("AWS4" + secret, day)`, then the region, the service and
    /// `aws4_request`, each keyed by the previous step.
    package static func signingKey(secret: String, day: String, region: String, service: String) -> SecretBytes {
        var key = SecretBytes(utf8: "AWS4" + secret)
        for part in [day, region, service, "aws4_request"] {
            var next = HMACSHA256.authenticate(Array(part.utf8), key: key)
            key = SecretBytes(zeroing: &next)
        }
        return key
    }

    /// `x-amz-date` (`20130524T000000Z`) and the scope's day (`20130524`) of a time in milliseconds since 1970.
    package static func timestamps(milliseconds: Int64) -> (date: String, day: String) {
        let seconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        // Howard Hinnant's civil-from-days.
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthPrime = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthPrime + 2) / 5 + 1
        let month = monthPrime < 10 ? monthPrime + 3 : monthPrime - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let dayText = "\(year)\(two(month))\(two(day))"
        let time = two(secondOfDay / 3600) + two(secondOfDay / 60 % 60) + two(secondOfDay % 60)
        return ("\(dayText)T\(time)Z", dayText)
    }

    /// The `host` value of `url`: the host in lower case, with the port unless it is the scheme's default.
    package static func host(of url: URL) -> String {
        let host = (url.host ?? "").lowercased()
        guard let port = url.port else { return host }
        let scheme = url.scheme?.lowercased()
        if (scheme == "http" && port == 80) || (scheme == "https" && port == 443) { return host }
        return "\(host):\(port)"
    }

    /// The path as the request sends it, already encoded once; `/` when empty.
    static func canonicalURI(_ url: URL) -> String {
        let components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        let path = components?.percentEncodedPath ?? ""
        return path.isEmpty ? "/" : path
    }

    /// The query's names and values, decoded and encoded again with the unreserved set, sorted by name then value;
    /// a name without a value is written `name=`.
    static func canonicalQuery(_ url: URL) -> String {
        guard let query = URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedQuery,
            !query.isEmpty
        else { return "" }
        let pairs = query.split(separator: "&", omittingEmptySubsequences: true).map { pair -> (String, String) in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0]).removingPercentEncoding ?? String(parts[0])
            let value = parts.count > 1 ? (String(parts[1]).removingPercentEncoding ?? String(parts[1])) : ""
            return (S3URIEncoding.encode(name), S3URIEncoding.encode(value))
        }
        return pairs.sorted { $0.0 == $1.0 ? $0.1 < $1.1 : $0.0 < $1.0 }.map { "\($0.0)=\($0.1)" }
            .joined(separator: "&")
    }

    /// A header value with leading and trailing space removed and inner runs of spaces collapsed to one.
    static func trimmed(_ value: String) -> String {
        value.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ")
    }
}

/// URI encoding the S3 way: every byte outside RFC 3986's unreserved set (`A-Z a-z 0-9 - . _ ~`) becomes `%XX` in
/// upper-case hex, once.
package enum S3URIEncoding {
    /// `text`'s UTF-8 bytes encoded, `/` included.
    package static func encode(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                output.append(byte)
            default:
                output += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// An object key or path encoded segment by segment, the `/` separators kept as they are (so `a//b/` stays three
    /// separators), each segment encoded once; a segment that is exactly `.` or `..` has its dots encoded, so no
    /// client or proxy on the way removes it as a dot segment.
    package static func path(_ key: String) -> String {
        key.split(separator: "/", omittingEmptySubsequences: false).map { segment -> String in
            segment == "." || segment == ".." ? String(repeating: "%2E", count: segment.count) : encode(String(segment))
        }.joined(separator: "/")
    }
}
