import Foundation
import Testing

/// Keeps `String`'s equality away from keys in the sources: a collection whose name says it holds keys is keyed by
/// `StoreKey` (or byte arrays), never `Set<String>` or `[String: …]`, because `String` merges canonically equivalent
/// spellings that every provider keeps apart.
///
/// A line that collects something else under a key-like name (provider ids, codec key ids) says so with
/// `// provider ids, not store keys`, or names it `…IDs`.
@Suite struct KeyCollectionLintTests {
    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources").path

    /// `var keys = Set<String>()`, `byKey: [String: X]`, `Set(keys)`, `Set(items.map(\.key))`.
    static let patterns = [
        #"\b\w*[kK]eys?\w*\s*(:|=)\s*(Set<String>|\[String:)"#, #"Set\((\w+\.)?keys\)"#, #"Set\([^)]*\\\.key\)"#,
    ].map { try! NSRegularExpression(pattern: $0) }

    @Test func noCollectionOfKeysIsKeyedByString() throws {
        var offending: [String] = []
        let files = FileManager.default.enumerator(atPath: Self.sources)?.compactMap { $0 as? String } ?? []
        for file in files where file.hasSuffix(".swift") {
            let text = try String(contentsOfFile: Self.sources + "/" + file, encoding: .utf8)
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let line = String(line)
                if line.contains("not store keys") || line.contains("IDs") || line.contains("Ids") { continue }
                let range = NSRange(line.startIndex..., in: line)
                if Self.patterns.contains(where: { $0.firstMatch(in: line, range: range) != nil }) {
                    offending.append("Sources/\(file):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        #expect(files.count > 100, "found \(files.count) source files under \(Self.sources)")
        #expect(
            offending.isEmpty, "key collections keyed by String (use StoreKey):\n\(offending.joined(separator: "\n"))")
    }
}
