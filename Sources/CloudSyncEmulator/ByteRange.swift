import Foundation

/// One range of a `Range: bytes=…` header (RFC 9110 section 14.1.2): `a-b`, `a-` or `-n` (the last n bytes).
struct ByteRange: Equatable, Sendable {
    /// The first byte's offset; nil for a suffix range.
    var first: Int?
    /// The last byte's offset (`a-b`), or the suffix's length (`-n`); nil for `a-`.
    var last: Int?

    /// Parses `bytes=a-b`, `bytes=a-` or `bytes=-n`; nil for another unit, several ranges, or a malformed one (`b`
    /// before `a`), which a server ignores.
    init?(_ header: String) {
        let text = header.trimmingCharacters(in: .whitespaces)
        guard text.lowercased().hasPrefix("bytes=") else { return nil }
        let spec = text.dropFirst(6).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return nil }
        let (head, tail) = (spec[..<dash], spec[spec.index(after: dash)...])
        let digits = { (part: Substring) in !part.isEmpty && part.allSatisfy(\.isASCII) && part.allSatisfy(\.isNumber) }
        switch (head.isEmpty, tail.isEmpty) {
        case (true, true): return nil
        case (true, false):
            guard digits(tail), let length = Int(tail) else { return nil }
            (first, last) = (nil, length)
        case (false, true):
            guard digits(head), let start = Int(head) else { return nil }
            (first, last) = (start, nil)
        case (false, false):
            guard digits(head), digits(tail), let start = Int(head), let end = Int(tail), start <= end else {
                return nil
            }
            (first, last) = (start, end)
        }
    }

    /// The offsets this range covers in content of `total` bytes (the end clamped to the content's); nil when it
    /// covers none (unsatisfiable: it starts at or past the end, or asks for the last 0 bytes, or the content is
    /// empty).
    func resolved(total: Int) -> ClosedRange<Int>? {
        guard let first else {
            guard let length = last, length > 0, total > 0 else { return nil }
            return max(0, total - length)...(total - 1)
        }
        guard first < total else { return nil }
        return first...min(last ?? (total - 1), total - 1)
    }
}
