import Foundation
import Testing

/// Every relative link of README.md and docs/*.md leads somewhere: the file exists, and an anchor (`#the-outbox`)
/// names a heading of the page it points into, by GitHub's rule for heading anchors.
@Suite struct DocumentationLinkTests {
    @Test func everyRelativeLinkOfTheDocumentationResolves() throws {
        let docs = repositoryRoot + "/docs"
        let pages =
            ["README.md"]
            + (try FileManager.default.contentsOfDirectory(atPath: docs)).filter { $0.hasSuffix(".md") }.sorted()
            .map { "docs/" + $0 }
        #expect(pages.count > 10)
        var checked = 0
        for page in pages {
            let text = try String(contentsOfFile: repositoryRoot + "/" + page, encoding: .utf8)
            let links = MarkdownLinks.relativeLinks(in: text)
            checked += links.count
            for link in links {
                #expect(
                    MarkdownLinks.problem(with: link, from: page, root: repositoryRoot) == nil,
                    "\(page):\(link.line): [\(link.target)] \(MarkdownLinks.problem(with: link, from: page, root: repositoryRoot) ?? "")"
                )
            }
        }
        #expect(checked > 50, "the checker found only \(checked) links: it has stopped seeing them")
    }

    /// The README is a newcomer's first page, kept short; everything else belongs on a page of docs/.
    @Test func theReadmeStaysShort() throws {
        let size = try FileManager.default.attributesOfItem(atPath: repositoryRoot + "/README.md")[.size] as? Int
        #expect((size ?? .max) < 25_000, "README.md is \(size ?? -1) bytes; move detail to a page of docs/")
    }

    @Test func aBrokenFileOrAnchorIsFound() throws {
        let text = """
            See [the jobs](docs/jobs.md), [a gone page](docs/nothing.md) and [a gone part](docs/jobs.md#no-such-part),
            [here](#contents) and [a missing heading](#not-here); `[code](docs/ignored.md)` and
            ```
            [a block](docs/ignored-too.md)
            ```
            [away](https://example.com/x.md).

            ## Contents
            """
        let links = MarkdownLinks.relativeLinks(in: text)
        #expect(
            links.map(\.target) == [
                "docs/jobs.md", "docs/nothing.md", "docs/jobs.md#no-such-part", "#contents", "#not-here",
            ])
        let problems = links.map {
            MarkdownLinks.problem(with: $0, from: "README.md", root: repositoryRoot, text: text)
        }
        #expect(problems.map { $0 == nil } == [true, false, false, true, false])
    }

    @Test func anchorsFollowGitHubsRule() {
        #expect(MarkdownLinks.anchor("The s3 provider (`CloudSyncS3`)") == "the-s3-provider-cloudsyncs3")
        #expect(
            MarkdownLinks.anchor("Networking: proxies and certificate authorities")
                == "networking-proxies-and-certificate-authorities")
        #expect(MarkdownLinks.anchor("Encrypted envelope format (version 1)") == "encrypted-envelope-format-version-1")
        #expect(MarkdownLinks.anchor("How `sync` decides") == "how-sync-decides")
        #expect(MarkdownLinks.anchors(in: "## Setup\n\n## Setup\n") == ["setup", "setup-1"])
    }
}

/// A small reader of Markdown links: enough of CommonMark for this repository's pages (inline links outside code).
enum MarkdownLinks {
    struct Link {
        var target: String
        var line: Int
    }

    /// The inline links of `text` whose target is not a URL with a scheme, outside code blocks and code spans.
    static func relativeLinks(in text: String) -> [Link] {
        var links: [Link] = []
        var inBlock = false
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if line.trimmingCharacters(in: .whitespaces).hasPrefix("```") {
                inBlock.toggle()
                continue
            }
            if inBlock { continue }
            // Code spans go first: what is between backticks is never a link.
            let prose = line.split(separator: "`", omittingEmptySubsequences: false).enumerated()
                .filter { $0.offset % 2 == 0 }.map(\.element).joined(separator: " ")
            var rest = Substring(prose)
            while let open = rest.range(of: "](") {
                let after = rest[open.upperBound...]
                guard let close = after.firstIndex(of: ")") else { break }
                let target = String(after[..<close]).split(separator: " ").first.map(String.init) ?? ""
                if !target.isEmpty, target.range(of: "^[a-z][a-z0-9+.-]*:", options: .regularExpression) == nil {
                    links.append(Link(target: target, line: index + 1))
                }
                rest = after[close...]
            }
        }
        return links
    }

    /// Why `link` in `page` (a path from `root`) leads nowhere, or nil when it resolves.
    ///
    /// `text`, when given, stands for the page's own text, for links within it.
    static func problem(with link: Link, from page: String, root: String, text: String? = nil) -> String? {
        let parts = link.target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
        let path = String(parts[0])
        let directory = (page as NSString).deletingLastPathComponent
        let target =
            path.isEmpty ? page : ((directory.isEmpty ? path : directory + "/" + path) as NSString).standardizingPath
        if target.hasPrefix("..") || target.hasPrefix("/") { return "leads out of the repository" }
        guard FileManager.default.fileExists(atPath: root + "/" + target) else { return "no file \(target)" }
        guard parts.count == 2 else { return nil }
        guard target.hasSuffix(".md") else { return "an anchor into \(target), which is not a page" }
        let body =
            path.isEmpty && text != nil ? text : try? String(contentsOfFile: root + "/" + target, encoding: .utf8)
        guard let body else { return "cannot read \(target)" }
        return anchors(in: body).contains(String(parts[1]))
            ? nil : "no heading of \(target) has the anchor #\(parts[1])"
    }

    /// The anchors GitHub gives the headings of `text`, in order; a repeated one gets `-1`, `-2`, ….
    static func anchors(in text: String) -> [String] {
        var seen: [String: Int] = [:]
        var result: [String] = []
        var inBlock = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { inBlock.toggle() }
            guard !inBlock, let match = line.range(of: "^#{1,6} ", options: .regularExpression) else { continue }
            let base = anchor(String(line[match.upperBound...]))
            let count = seen[base, default: 0]
            seen[base] = count + 1
            result.append(count == 0 ? base : "\(base)-\(count)")
        }
        return result
    }

    /// GitHub's anchor of one heading: lower case, punctuation dropped (`-` and `_` kept), spaces made `-`.
    static func anchor(_ heading: String) -> String {
        String(
            heading.lowercased().unicodeScalars.compactMap { scalar -> Character? in
                if scalar == " " { return "-" }
                if scalar == "-" || scalar == "_" || CharacterSet.alphanumerics.contains(scalar) {
                    return Character(scalar)
                }
                return nil
            })
    }
}
