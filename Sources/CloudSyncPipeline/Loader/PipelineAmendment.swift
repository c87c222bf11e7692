import CloudSyncYAML

/// What a command adds to a pipeline file as it loads it (`cloudsync restore`, `cloudsync forget`).
///
/// Providers of its own beside the file's, and the one job it runs in place of the file's jobs. Everything else
/// (state, codecs, reports, the run lock) stays the file's.
public struct PipelineAmendment: Sendable {
    /// A field's value: text (written quoted, so it is never read as a number or a boolean), a literal (`true`,
    /// `7`), a list of texts, or a mapping of fields (`keep:`).
    public indirect enum Value: Sendable {
        case text(String)
        case literal(String)
        case list([String])
        case mapping([(String, Value)])
    }

    /// Providers added to the file's, each an id and its fields.
    public var providers: [(id: String, fields: [(String, Value)])]
    /// The job run instead of the file's, as its fields (`type`, `name`, …).
    public var job: [(String, Value)]

    /// An amendment adding `providers` and running `job` alone.
    public init(providers: [(id: String, fields: [(String, Value)])] = [], job: [(String, Value)]) {
        self.providers = providers
        self.job = job
    }

    /// Every text the amendment writes into the file (fields' values, list items, nested mappings' values), for a
    /// command to refuse one a pipeline file would read as something else (`${` starts a variable).
    public var texts: [String] {
        func texts(of value: Value) -> [String] {
            switch value {
            case .text(let text), .literal(let text): [text]
            case .list(let items): items
            case .mapping(let fields): fields.flatMap { texts(of: $0.1) }
            }
        }
        return (providers.flatMap(\.fields) + job).flatMap { texts(of: $0.1) }
    }

    /// `root` (a pipeline file's top mapping) with the providers added and the jobs replaced; the added nodes carry
    /// the marks of the sections they join, so an error in one points there.
    func applied(to root: YAMLNode) -> YAMLNode {
        guard case .mapping(let pairs, let style) = root.content else { return root }
        var amended = pairs
        let jobsMark = pairs.first { $0.key.scalar == "jobs" }?.value.mark ?? root.mark
        let job = Self.mapping(self.job, at: jobsMark)
        if let index = amended.firstIndex(where: { $0.key.scalar == "jobs" }) {
            amended[index] = YAMLNode.Pair(
                key: amended[index].key, value: YAMLNode(.sequence([job], .block), mark: jobsMark))
        } else {
            amended.append(
                YAMLNode.Pair(
                    key: Self.scalar("jobs", at: jobsMark), value: YAMLNode(.sequence([job], .block), mark: jobsMark)))
        }
        if let index = amended.firstIndex(where: { $0.key.scalar == "providers" }),
            case .mapping(var declared, let providersStyle) = amended[index].value.content
        {
            let mark = amended[index].value.mark
            for provider in providers {
                declared.append(
                    YAMLNode.Pair(
                        key: Self.scalar(provider.id, at: mark), value: Self.mapping(provider.fields, at: mark)))
            }
            amended[index] = YAMLNode.Pair(
                key: amended[index].key, value: YAMLNode(.mapping(declared, providersStyle), mark: mark))
        }
        return YAMLNode(.mapping(amended, style), tag: root.tag, mark: root.mark)
    }

    private static func mapping(_ fields: [(String, Value)], at mark: YAMLMark) -> YAMLNode {
        YAMLNode(
            .mapping(fields.map { YAMLNode.Pair(key: scalar($0.0, at: mark), value: node($0.1, at: mark)) }, .flow),
            mark: mark)
    }

    private static func node(_ value: Value, at mark: YAMLMark) -> YAMLNode {
        switch value {
        case .text(let text): YAMLNode(.scalar(text, .doubleQuoted), mark: mark)
        case .literal(let text): YAMLNode(.scalar(text, .plain), mark: mark)
        case .list(let texts): YAMLNode(.sequence(texts.map { node(.text($0), at: mark) }, .flow), mark: mark)
        case .mapping(let fields): mapping(fields, at: mark)
        }
    }

    private static func scalar(_ text: String, at mark: YAMLMark) -> YAMLNode {
        YAMLNode(.scalar(text, .plain), mark: mark)
    }
}
