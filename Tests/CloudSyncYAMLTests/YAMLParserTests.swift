import CloudSyncYAML
import Foundation
import Testing

private func parse(_ text: String, parser: YAMLParser = YAMLParser()) throws -> YAMLNode {
    try #require(try parser.parse(text))
}

/// The error `text` fails with, rendered as the CLI shows it.
private func renderedError(_ text: String, parser: YAMLParser = YAMLParser()) -> String? {
    do {
        _ = try parser.parse(text)
        return nil
    } catch {
        return error.rendered(file: "pipeline.yaml", source: text)
    }
}

@Suite struct YAMLTreeTests {
    @Test func mappingsKeepSourceOrderAndScalarsKeepStyleAndTag() throws {
        let root = try parse(
            """
            zeta: plain
            alpha: 'single'
            mid: "double"
            literal: |
              line one
              line two
            folded: >
              folded
              text
            tagged: !!str 42
            custom: !vault secret-ref
            """)
        let pairs = try #require(root.mapping)
        #expect(pairs.map { $0.key.scalar } == ["zeta", "alpha", "mid", "literal", "folded", "tagged", "custom"])
        #expect(root["zeta"]?.content == .scalar("plain", .plain))
        #expect(root["alpha"]?.content == .scalar("single", .singleQuoted))
        #expect(root["mid"]?.content == .scalar("double", .doubleQuoted))
        #expect(root["literal"]?.content == .scalar("line one\nline two\n", .literal))
        #expect(root["folded"]?.content == .scalar("folded text\n", .folded))
        #expect(root["tagged"]?.tag == "tag:yaml.org,2002:str")
        #expect(root["tagged"]?.scalar == "42")
        #expect(root["custom"]?.tag == "!vault")
        #expect(root["zeta"]?.tag == nil)
    }

    @Test func sequencesAndFlowStyles() throws {
        let root = try parse("block:\n  - a\n  - b\nflow: [1, 2, {x: y}]\n")
        guard case .sequence(let block, .block) = root["block"]?.content else {
            Issue.record("block is not a block sequence")
            return
        }
        #expect(block.map(\.scalar) == ["a", "b"])
        guard case .sequence(let flow, .flow) = root["flow"]?.content else {
            Issue.record("flow is not a flow sequence")
            return
        }
        #expect(flow.count == 3)
        #expect(flow[2]["x"]?.scalar == "y")
    }

    @Test func nullsPerTheCoreSchema() throws {
        let root = try parse("a:\nb: ~\nc: null\nd: 'null'\ne: ''\n")
        #expect(root["a"]?.isNull == true)
        #expect(root["b"]?.isNull == true)
        #expect(root["c"]?.isNull == true)
        #expect(root["d"]?.isNull == false)
        #expect(root["e"]?.isNull == false)
    }

    @Test func everyNodeCarriesItsLineAndColumn() throws {
        let root = try parse(
            """
            # a comment
            providers:
              primary: { type: sqlite, path: "data/é.db" }
              list:
                - first
                -   second
            """)
        #expect(root.mark == YAMLMark(line: 2, column: 1))
        let providers = try #require(root["providers"])
        #expect(providers.mapping?.first?.key.mark == YAMLMark(line: 3, column: 3))
        #expect(providers["primary"]?.mark == YAMLMark(line: 3, column: 12))
        #expect(providers["primary"]?["path"]?.mark == YAMLMark(line: 3, column: 34))
        let list = try #require(providers["list"]?.sequence)
        #expect(list.map(\.mark) == [YAMLMark(line: 5, column: 7), YAMLMark(line: 6, column: 9)])
    }

    @Test func marksOnDeeplyNestedNodes() throws {
        // 60 levels of mappings, each indented two more spaces, ending in a scalar.
        let depth = 60
        var text = ""
        for level in 0..<depth {
            text += String(repeating: " ", count: level * 2) + "k\(level):\n"
        }
        text += String(repeating: " ", count: depth * 2) + "leaf: [x, y]\n"
        var node = try parse(text)
        for level in 0..<depth {
            let pair = try #require(node.mapping?.first)
            #expect(pair.key.scalar == "k\(level)")
            #expect(pair.key.mark == YAMLMark(line: level + 1, column: level * 2 + 1))
            node = pair.value
        }
        let leaf = try #require(node["leaf"]?.sequence)
        #expect(leaf[1].mark == YAMLMark(line: depth + 1, column: depth * 2 + 11))
    }

    @Test func columnsCountCharactersNotBytes() throws {
        let root = try parse("ключ: значение\n")
        #expect(root["ключ"]?.mark == YAMLMark(line: 1, column: 7))
    }

    @Test func anchorsAndAliasesResolveToTheAnchoredNode() throws {
        let root = try parse(
            """
            defaults: &defaults { timeoutMs: 1500, retries: 3 }
            primary: *defaults
            name: &n settings
            again: *n
            """)
        #expect(root["primary"]?.content == root["defaults"]?.content)
        #expect(root["primary"]?["retries"]?.scalar == "3")
        #expect(root["again"]?.scalar == "settings")
        // A node reached through an alias keeps the mark of the anchored node, where its content is written.
        #expect(root["primary"]?.mark == YAMLMark(line: 1, column: 11))
    }

    @Test func emptyOrCommentOnlyTextHoldsNoDocument() throws {
        #expect(try YAMLParser().parse("") == nil)
        #expect(try YAMLParser().parse("# nothing here\n\n") == nil)
        #expect(try YAMLParser().parse("---\n...\n")?.isNull == true)
    }

    @Test func oneExplicitDocumentIsFine() throws {
        let root = try parse("---\nversion: 1\n...\n")
        #expect(root["version"]?.scalar == "1")
    }

    @Test func aMegabyteDocumentParses() throws {
        var text = "items:\n"
        var index = 0
        while text.utf8.count < 1_048_576 {
            text += "  - { key: \"settings.item.\(index)\", value: 'some value number \(index)', size: \(index * 7) }\n"
            index += 1
        }
        let clock = ContinuousClock()
        let start = clock.now
        let root = try parse(text)
        let elapsed = clock.now - start
        #expect(root["items"]?.sequence?.count == index)
        #expect(root["items"]?.sequence?.last?["size"]?.scalar == "\((index - 1) * 7)")
        // Generous bound for a debug build on a loaded two-core machine; real timing lives in `make bench`.
        #expect(elapsed < .seconds(30))
    }
}

@Suite struct YAMLErrorTests {
    @Test func duplicateKey() {
        #expect(
            renderedError("name: a\nstate: b\nname: c\n") == """
                pipeline.yaml:3:1: error: duplicate key "name" in this mapping; it is first defined at 1:1
                name: c
                ^
                """)
    }

    @Test func duplicateKeyIgnoresQuotingAndWorksInFlowMappings() {
        #expect(
            renderedError("{a: 1, 'a': 2}") == """
                pipeline.yaml:1:8: error: duplicate key "a" in this mapping; it is first defined at 1:2
                {a: 1, 'a': 2}
                       ^
                """)
    }

    @Test func sameKeyInDifferentMappingsIsFine() throws {
        let root = try parse("a: {type: x}\nb: {type: y}\n")
        #expect(root["b"]?["type"]?.scalar == "y")
    }

    @Test func duplicateComplexKey() {
        #expect(
            renderedError("? [a, b]\n: 1\n? [a, b]\n: 2\n") == """
                pipeline.yaml:3:3: error: duplicate key (a sequence) in this mapping; it is first defined at 1:3
                ? [a, b]
                  ^
                """)
    }

    @Test func secondDocument() {
        #expect(
            renderedError("a: 1\n---\nb: 2\n") == """
                pipeline.yaml:2:1: error: a second YAML document starts here; the file must hold exactly one
                ---
                ^
                """)
    }

    @Test func undefinedAlias() {
        #expect(
            renderedError("store:\n  providers: *fleet\n") == """
                pipeline.yaml:2:14: error: alias *fleet names no anchor defined before it; define &fleet first
                  providers: *fleet
                             ^
                """)
    }

    @Test func libyamlSyntaxErrorWithContext() {
        #expect(
            renderedError("jobs: [sync, migrate\nname: x\n") == """
                pipeline.yaml:2:5: error: did not find expected ',' or ']' (while parsing a flow sequence at 1:7)
                name: x
                    ^
                """)
    }

    @Test func libyamlSyntaxErrorWithoutContext() {
        #expect(
            renderedError("name: a: b\n") == """
                pipeline.yaml:1:8: error: mapping values are not allowed in this context
                name: a: b
                       ^
                """)
    }

    @Test func tabIndentationGetsAHint() {
        #expect(
            renderedError("store:\n\twriteMode: mirror\n") == """
                pipeline.yaml:2:1: error: found character that cannot start any token (while scanning for the next token at 2:1); YAML does not allow tabs for indentation, use spaces
                \twriteMode: mirror
                ^
                """)
    }

    @Test func invalidUTF8() {
        var bytes = Array("name: ok\nbad: ".utf8)
        bytes += [0xC3, 0x28]
        bytes += Array("\n".utf8)
        #expect(
            throws: YAMLError(
                .encoding, "invalid trailing UTF-8 octet at byte offset 15; the file must be UTF-8",
                at: YAMLMark(line: 2, column: 6))
        ) {
            try YAMLParser().parse(bytes)
        }
    }

    @Test func billionLaughsIsRefusedNotExpanded() {
        var text = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
        for level in 1...9 {
            let refs = Array(repeating: "*a\(level - 1)", count: 10).joined(separator: ", ")
            text += "a\(level): &a\(level) [\(refs)]\n"
        }
        let clock = ContinuousClock()
        let start = clock.now
        let error = #expect(throws: YAMLError.self) { try YAMLParser().parse(text) }
        #expect(error?.kind == .tooManyNodes)
        #expect(
            error?.message == "the document expands to more than 1000000 nodes (aliases count every node they repeat)")
        #expect(clock.now - start < .seconds(10))
    }

    @Test func nodeBudgetCountsAliasExpansions() throws {
        let text = "base: &b [1, 2, 3, 4]\ncopy1: *b\ncopy2: *b\n"
        // 1 root + 3 keys + (1 sequence + 4 items) * 3 = 19 nodes.
        #expect(try YAMLParser(maximumNodes: 19).parse(text) != nil)
        #expect(
            renderedError(text, parser: YAMLParser(maximumNodes: 18)) == """
                pipeline.yaml:3:8: error: the document expands to more than 18 nodes (aliases count every node they repeat)
                copy2: *b
                       ^
                """)
    }

    @Test func nestingBeyondTheDepthLimit() {
        let text = String(repeating: "[", count: 300) + String(repeating: "]", count: 300)
        let error = #expect(throws: YAMLError.self) { try YAMLParser().parse(text) }
        #expect(
            error == YAMLError(.tooDeep, "collections nest deeper than 256 levels", at: YAMLMark(line: 1, column: 257)))
    }

    @Test func plainDescriptionHasLineAndColumn() {
        let error = YAMLError(.duplicateKey, "duplicate key \"a\"", at: YAMLMark(line: 4, column: 2))
        #expect(error.description == "4:2: duplicate key \"a\"")
    }
}
