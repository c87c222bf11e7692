import CloudSyncHTTPServer
import CloudSyncYAML
import Foundation

/// Reads an `HTTPFaultPlan` from a YAML or JSON file (JSON is YAML too, so one reader takes both), reporting every
/// mistake as `file:line:col: error: message` with the source line, as pipeline files do.
///
/// ```yaml
/// rules:
///   - route: GET /drive/v3/files/{id}
///     calls: [3, 4]
///     status: 503
///   - status: 429
///     retryAfterSeconds: 2
/// ```
public enum FaultPlanFile {
    /// The plan in the file at `path`.
    public static func load(path: String) throws(EmulatorError) -> HTTPFaultPlan {
        let source: String
        do {
            source = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw EmulatorError("cannot read the fault plan \(path): \(error.localizedDescription)")
        }
        return try parse(source, file: path)
    }

    /// The plan in `source`, read from `file` (named in errors).
    public static func parse(_ source: String, file: String) throws(EmulatorError) -> HTTPFaultPlan {
        let root: YAMLNode
        do throws(YAMLError) {
            guard let parsed = try YAMLParser().parse(source) else {
                throw YAMLError(.syntax, "the fault plan is empty; it needs `rules:`", at: YAMLMark(line: 1, column: 1))
            }
            root = parsed
        } catch {
            throw EmulatorError(error.rendered(file: file, source: source))
        }
        do {
            let data = try JSONSerialization.data(withJSONObject: jsonValue(root), options: [.fragmentsAllowed])
            return try JSONDecoder().decode(HTTPFaultPlan.self, from: data)
        } catch let error as DecodingError {
            let mark = node(at: codingPath(of: error), in: root)?.mark ?? root.mark
            throw EmulatorError(YAMLError.render(describe(error), at: mark, file: file, source: source))
        } catch {
            throw EmulatorError("\(file): cannot read the fault plan: \(error)")
        }
    }

    /// The node as Foundation JSON: plain scalars typed by the YAML 1.2 core schema (null, booleans, numbers),
    /// everything else text.
    private static func jsonValue(_ node: YAMLNode) -> Any {
        switch node.content {
        case .scalar(let text, let style):
            guard style == .plain, node.tag == nil else { return text }
            if node.isNull { return NSNull() }
            if ["true", "True", "TRUE"].contains(text) { return true }
            if ["false", "False", "FALSE"].contains(text) { return false }
            if let number = Int64(text) { return NSNumber(value: number) }
            if let number = UInt64(text) { return NSNumber(value: number) }
            if text.contains(where: \.isNumber), let number = Double(text) { return NSNumber(value: number) }
            return text
        case .sequence(let items, _):
            return items.map(jsonValue)
        case .mapping(let pairs, _):
            var object: [String: Any] = [:]
            for pair in pairs { object[pair.key.scalar ?? ""] = jsonValue(pair.value) }
            return object
        }
    }

    private static func codingPath(of error: DecodingError) -> [any CodingKey] {
        switch error {
        case .keyNotFound(_, let context), .dataCorrupted(let context), .typeMismatch(_, let context),
            .valueNotFound(_, let context):
            return context.codingPath
        @unknown default:
            return []
        }
    }

    /// The node `path` leads to, or the deepest one it reaches; a mapping key's own node for the last key, so a
    /// misspelt field is pointed at by name.
    private static func node(at path: [any CodingKey], in root: YAMLNode) -> YAMLNode? {
        var current = root
        for (index, key) in path.enumerated() {
            if let position = key.intValue, let items = current.sequence, items.indices.contains(position) {
                current = items[position]
            } else if let pair = current.mapping?.first(where: { $0.key.scalar == key.stringValue }) {
                current = index == path.count - 1 && isScalar(pair.value) ? pair.key : pair.value
            } else {
                return current
            }
        }
        return current
    }

    private static func isScalar(_ node: YAMLNode) -> Bool { node.scalar != nil }
}
