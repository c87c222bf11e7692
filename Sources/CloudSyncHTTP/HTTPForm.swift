import Foundation

/// Reading `application/x-www-form-urlencoded` text, as HTML forms, OAuth token requests and S3's `encoding-type=url`
/// send it: `+` is a space, then `%XX` are bytes.
public enum HTTPForm {
    /// One form-encoded component decoded; text that is not valid percent-encoding is kept as it is, `+` read as a space.
    public static func decode(_ text: some StringProtocol) -> String {
        let spaced = text.replacingOccurrences(of: "+", with: " ")
        return spaced.removingPercentEncoding ?? spaced
    }

    /// The `name=value` pairs of `text` in order, each decoded; a pair without `=` has an empty value.
    public static func pairs(_ text: some StringProtocol) -> [(name: String, value: String)] {
        text.split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (decode(parts[0]), parts.count > 1 ? decode(parts[1]) : "")
        }
    }
}
