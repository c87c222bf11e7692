/// A position in a YAML source: 1-based line and 1-based column, counted in characters.
public struct YAMLMark: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The line, counting from 1.
    public let line: Int
    /// The column, counting characters from 1.
    public let column: Int

    /// The position at `line` and `column`, both 1-based.
    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }

    /// Whether `lhs` comes before `rhs` in the source: by line, then by column.
    public static func < (lhs: YAMLMark, rhs: YAMLMark) -> Bool {
        (lhs.line, lhs.column) < (rhs.line, rhs.column)
    }

    /// `line:column`.
    public var description: String { "\(line):\(column)" }
}

/// One node of a YAML document: a scalar, a sequence or a mapping, with the tag written on it and where it starts.
///
/// Aliases are already replaced by the node their anchor names, so a tree never mentions anchors.
public struct YAMLNode: Sendable, Equatable {
    /// How a scalar was written; `"1"` and `1` are the same text but not the same intent.
    public enum ScalarStyle: String, Sendable {
        case plain, singleQuoted, doubleQuoted, literal, folded
    }

    /// Whether a sequence or mapping was written in block (indented) or flow (`[...]`, `{...}`) style.
    public enum CollectionStyle: String, Sendable {
        case block, flow
    }

    /// One entry of a mapping.
    public struct Pair: Sendable, Equatable {
        /// The entry's key: a scalar in pipeline files, though YAML allows any node.
        public let key: YAMLNode
        /// The entry's value.
        public let value: YAMLNode

        /// An entry mapping `key` to `value`.
        public init(key: YAMLNode, value: YAMLNode) {
            self.key = key
            self.value = value
        }
    }

    /// What a node holds.
    public enum Content: Sendable, Equatable {
        case scalar(String, ScalarStyle)
        case sequence([YAMLNode], CollectionStyle)
        /// Entries in source order; keys are unique.
        case mapping([Pair], CollectionStyle)
    }

    /// What the node holds: a scalar's text, a sequence's items or a mapping's entries, with how each was written.
    public let content: Content
    /// The tag written in the source, in full form (`!!str` reads as `tag:yaml.org,2002:str`); nil when none was.
    public let tag: String?
    /// Where the node starts.
    ///
    /// A node reached through an alias keeps the mark of the anchored node, since that is
    /// where its content is written.
    public let mark: YAMLMark

    /// A node holding `content`, tagged `tag` (in full form) and starting at `mark`.
    public init(_ content: Content, tag: String? = nil, mark: YAMLMark) {
        self.content = content
        self.tag = tag
        self.mark = mark
    }

    /// The scalar's text, or nil when the node is not a scalar.
    public var scalar: String? {
        if case .scalar(let text, _) = content { return text }
        return nil
    }

    /// The sequence's items, or nil when the node is not a sequence.
    public var sequence: [YAMLNode]? {
        if case .sequence(let items, _) = content { return items }
        return nil
    }

    /// The mapping's entries in source order, or nil when the node is not a mapping.
    public var mapping: [Pair]? {
        if case .mapping(let pairs, _) = content { return pairs }
        return nil
    }

    /// Whether the node is an untagged plain scalar spelling null (`~`, `null`, or nothing at all), per the
    /// YAML 1.2 core schema.
    public var isNull: Bool {
        guard tag == nil || tag == "tag:yaml.org,2002:null", case .scalar(let text, .plain) = content else {
            return false
        }
        return ["", "~", "null", "Null", "NULL"].contains(text)
    }

    /// The value of the mapping entry whose key is the scalar `key`; nil when absent or when this is not a mapping.
    public subscript(key: String) -> YAMLNode? {
        mapping?.first { $0.key.scalar == key }?.value
    }
}
