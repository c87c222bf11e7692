internal import CYAML

/// Parses YAML text into a ``YAMLNode`` tree with libyaml.
///
/// Only what a hand-written configuration file needs, and nothing a hostile one can abuse: exactly one document,
/// unique mapping keys, aliases expanded under a node budget, nesting under a depth limit. It knows nothing of
/// what the document means.
public struct YAMLParser: Sendable {
    /// Every node of the resulting tree counts, and an alias counts every node of what it expands to, so a
    /// "billion laughs" document fails quickly instead of being expanded.
    public var maximumNodes: Int
    /// Deepest nesting of sequences and mappings allowed.
    public var maximumDepth: Int

    /// A parser with these limits; the defaults suit any hand-written file, and callers reading untrusted files may
    /// lower them.
    public init(maximumNodes: Int = 1_000_000, maximumDepth: Int = 256) {
        self.maximumNodes = maximumNodes
        self.maximumDepth = maximumDepth
    }

    /// The document's root node, or nil when the text holds no document (empty, or only comments).
    public func parse(_ text: String) throws(YAMLError) -> YAMLNode? {
        try parse(Array(text.utf8))
    }

    /// The document's root node, or nil when the bytes hold no document.
    ///
    /// The bytes must be UTF-8.
    public func parse(_ bytes: [UInt8]) throws(YAMLError) -> YAMLNode? {
        // libyaml asserts on a null input pointer, which an empty array may have.
        guard !bytes.isEmpty else { return nil }
        let result = bytes.withUnsafeBufferPointer { input -> Result<YAMLNode?, YAMLError> in
            // libyaml keeps pointers into its own struct, so it must live at a fixed address: on the heap.
            let parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
            let event = UnsafeMutablePointer<yaml_event_t>.allocate(capacity: 1)
            defer {
                parser.deallocate()
                event.deallocate()
            }
            guard yaml_parser_initialize(parser) == 1 else {
                return .failure(
                    YAMLError(.syntax, "libyaml could not allocate a parser", at: YAMLMark(line: 1, column: 1)))
            }
            defer { yaml_parser_delete(parser) }
            yaml_parser_set_input_string(parser, input.baseAddress, input.count)
            yaml_parser_set_encoding(parser, YAML_UTF8_ENCODING)
            var builder = TreeBuilder(maximumNodes: maximumNodes, maximumDepth: maximumDepth)
            do {
                while true {
                    guard yaml_parser_parse(parser, event) == 1 else {
                        return .failure(Self.libyamlError(parser.pointee, input: input))
                    }
                    defer { yaml_event_delete(event) }
                    if try builder.consume(event.pointee) { break }
                }
                return .success(builder.root)
            } catch let error as YAMLError {
                return .failure(error)
            } catch {
                preconditionFailure("TreeBuilder throws only YAMLError")
            }
        }
        return try result.get()
    }

    private static func libyamlError(_ parser: yaml_parser_t, input: UnsafeBufferPointer<UInt8>) -> YAMLError {
        let problem = parser.problem.map { String(cString: $0) } ?? "unknown YAML error"
        if parser.error == YAML_READER_ERROR {
            // Reader errors carry a byte offset, not a mark.
            let mark = Self.mark(ofByteOffset: parser.problem_offset, in: input)
            return YAMLError(
                .encoding, "\(problem) at byte offset \(parser.problem_offset); the file must be UTF-8", at: mark)
        }
        let mark = YAMLMark(parser.problem_mark)
        var message = problem
        let context = parser.context.map { String(cString: $0) }
        if let context { message += " (\(context) at \(YAMLMark(parser.context_mark)))" }
        if Self.character(at: mark, in: input) == "\t" {
            message += "; YAML does not allow tabs for indentation, use spaces"
        }
        // libyaml names the construct it was in only in words: "while parsing a flow mapping" (or sequence).
        let inFlow = context.map { $0.contains("flow mapping") || $0.contains("flow sequence") } ?? false
        return YAMLError(.syntax, message, at: mark, inFlowCollection: inFlow)
    }

    private static func character(at mark: YAMLMark, in input: UnsafeBufferPointer<UInt8>) -> Character? {
        var lineStart = 0
        for _ in 1..<max(mark.line, 1) {
            guard let newline = input[lineStart...].firstIndex(of: UInt8(ascii: "\n")) else { return nil }
            lineStart = newline + 1
        }
        let lineEnd = input[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? input.endIndex
        let line = String(decoding: input[lineStart..<lineEnd], as: UTF8.self)
        return line.dropFirst(mark.column - 1).first
    }

    private static func mark(ofByteOffset offset: Int, in input: UnsafeBufferPointer<UInt8>) -> YAMLMark {
        // libyaml reports the offending byte, which may sit inside a multi-byte sequence: point at its start.
        var start = min(offset, input.count)
        var candidate = start
        while candidate > 0, start - candidate < 3, input[candidate - 1] >= 0x80 {
            candidate -= 1
            if input[candidate] >= 0xC0 {
                start = candidate
                break
            }
        }
        let prefix = input.prefix(start)
        let lineStart = prefix.lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? 0
        let line = prefix.reduce(1) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 }
        // Count characters, not bytes: continuation bytes (10xxxxxx) do not start one.
        let column = 1 + input[lineStart..<prefix.endIndex].reduce(0) { $1 & 0xC0 == 0x80 ? $0 : $0 + 1 }
        return YAMLMark(line: line, column: column)
    }
}

extension YAMLMark {
    init(_ mark: yaml_mark_t) {
        self.init(line: Int(mark.line) + 1, column: Int(mark.column) + 1)
    }
}

/// Turns libyaml's events into nodes, one event at a time, without recursion.
private struct TreeBuilder {
    private struct Collection {
        let mark: YAMLMark
        let tag: String?
        let anchor: String?
        let isMapping: Bool
        let style: YAMLNode.CollectionStyle
        var items: [YAMLNode] = []
        var pairs: [YAMLNode.Pair] = []
        var pendingKey: YAMLNode?
        var pendingKeyWeight = 0
        /// First mark of each key, by identity, to name the first definition when a key repeats.
        ///
        /// By the identity's bytes: YAML compares keys by their characters, so `café` precomposed and decomposed are
        /// two keys, which a `String`-keyed dictionary would merge.
        var keyMarks: [[UInt8]: YAMLMark] = [:]
        /// Nodes in this collection's subtree, itself included.
        var weight = 1
    }

    let maximumNodes: Int
    let maximumDepth: Int
    private(set) var root: YAMLNode?
    private var stack: [Collection] = []
    private var anchors: [String: (node: YAMLNode, weight: Int)] = [:]
    private var nodeCount = 0
    private var documentCount = 0

    init(maximumNodes: Int, maximumDepth: Int) {
        self.maximumNodes = maximumNodes
        self.maximumDepth = maximumDepth
    }

    /// Handles one event; returns true at the end of the stream.
    mutating func consume(_ event: yaml_event_t) throws(YAMLError) -> Bool {
        let mark = YAMLMark(event.start_mark)
        switch event.type {
        case YAML_STREAM_END_EVENT:
            return true
        case YAML_DOCUMENT_START_EVENT:
            documentCount += 1
            guard documentCount == 1 else {
                throw YAMLError(
                    .multipleDocuments, "a second YAML document starts here; the file must hold exactly one",
                    at: mark)
            }
        case YAML_SCALAR_EVENT:
            let scalar = event.data.scalar
            let text = String(decoding: UnsafeBufferPointer(start: scalar.value, count: scalar.length), as: UTF8.self)
            let node = YAMLNode(
                .scalar(text, Self.style(scalar.style)), tag: Self.string(scalar.tag), mark: mark)
            try add(node, weight: 1, anchor: Self.string(scalar.anchor), at: mark)
        case YAML_ALIAS_EVENT:
            let name = Self.string(event.data.alias.anchor) ?? ""
            guard let anchored = anchors[name] else {
                throw YAMLError(
                    .undefinedAlias, "alias *\(name) names no anchor defined before it; define &\(name) first",
                    at: mark)
            }
            try add(anchored.node, weight: anchored.weight, anchor: nil, at: mark)
        case YAML_SEQUENCE_START_EVENT:
            let start = event.data.sequence_start
            try open(
                Collection(
                    mark: mark, tag: Self.string(start.tag), anchor: Self.string(start.anchor), isMapping: false,
                    style: start.style == YAML_FLOW_SEQUENCE_STYLE ? .flow : .block))
        case YAML_MAPPING_START_EVENT:
            let start = event.data.mapping_start
            try open(
                Collection(
                    mark: mark, tag: Self.string(start.tag), anchor: Self.string(start.anchor), isMapping: true,
                    style: start.style == YAML_FLOW_MAPPING_STYLE ? .flow : .block))
        case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
            let finished = stack.removeLast()
            let content: YAMLNode.Content =
                finished.isMapping
                ? .mapping(finished.pairs, finished.style) : .sequence(finished.items, finished.style)
            // The collection's own node was counted when it opened; only its weight travels up.
            try attach(
                YAMLNode(content, tag: finished.tag, mark: finished.mark), weight: finished.weight,
                anchor: finished.anchor)
        default:
            break
        }
        return false
    }

    private mutating func open(_ collection: Collection) throws(YAMLError) {
        guard stack.count < maximumDepth else {
            throw YAMLError(
                .tooDeep, "collections nest deeper than \(maximumDepth) levels", at: collection.mark)
        }
        try count(1, at: collection.mark)
        stack.append(collection)
    }

    /// Adds a complete scalar or expanded alias; `mark` is where its event is written.
    private mutating func add(_ node: YAMLNode, weight: Int, anchor: String?, at mark: YAMLMark) throws(YAMLError) {
        try count(weight, at: mark)
        try attach(node, weight: weight, anchor: anchor)
    }

    private mutating func count(_ nodes: Int, at mark: YAMLMark) throws(YAMLError) {
        nodeCount += nodes
        guard nodeCount <= maximumNodes else {
            throw YAMLError(
                .tooManyNodes,
                "the document expands to more than \(maximumNodes) nodes (aliases count every node they repeat)",
                at: mark)
        }
    }

    /// Places a finished node in its parent, or makes it the root.
    private mutating func attach(_ node: YAMLNode, weight: Int, anchor: String?) throws(YAMLError) {
        if let anchor { anchors[anchor] = (node, weight) }
        guard !stack.isEmpty else {
            root = node
            return
        }
        stack[stack.count - 1].weight += weight
        guard stack[stack.count - 1].isMapping else {
            stack[stack.count - 1].items.append(node)
            return
        }
        guard let key = stack[stack.count - 1].pendingKey else {
            let identity = Array(Self.identity(of: node).utf8)
            if let first = stack[stack.count - 1].keyMarks[identity] {
                throw YAMLError(
                    .duplicateKey,
                    "duplicate key \(Self.quoted(node)) in this mapping; it is first defined at \(first)",
                    at: node.mark)
            }
            stack[stack.count - 1].keyMarks[identity] = node.mark
            stack[stack.count - 1].pendingKey = node
            return
        }
        stack[stack.count - 1].pairs.append(YAMLNode.Pair(key: key, value: node))
        stack[stack.count - 1].pendingKey = nil
    }

    /// A string that is equal for two keys exactly when they are the same key.
    ///
    /// Scalars compare by text, whatever
    /// their quoting, so `"a"` and `a` collide; lengths are spelled out so nested keys cannot alias each other.
    private static func identity(of node: YAMLNode) -> String {
        switch node.content {
        case .scalar(let text, _):
            return "s\(text.utf8.count):\(text)"
        case .sequence(let items, _):
            return "[\(items.count):" + items.map(identity).joined() + "]"
        case .mapping(let pairs, _):
            return "{\(pairs.count):" + pairs.map { identity(of: $0.key) + identity(of: $0.value) }.joined() + "}"
        }
    }

    private static func quoted(_ key: YAMLNode) -> String {
        guard let text = key.scalar else { return "(a \(key.sequence != nil ? "sequence" : "mapping"))" }
        return "\"\(text)\""
    }

    private static func string(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String? {
        pointer.map { String(cString: $0) }
    }

    private static func style(_ style: yaml_scalar_style_t) -> YAMLNode.ScalarStyle {
        switch style {
        case YAML_SINGLE_QUOTED_SCALAR_STYLE: return .singleQuoted
        case YAML_DOUBLE_QUOTED_SCALAR_STYLE: return .doubleQuoted
        case YAML_LITERAL_SCALAR_STYLE: return .literal
        case YAML_FOLDED_SCALAR_STYLE: return .folded
        default: return .plain
        }
    }
}
