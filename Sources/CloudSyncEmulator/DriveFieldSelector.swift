import Foundation

/// Google's partial-response selector, the `fields` parameter: which parts of a JSON answer to keep.
///
/// The syntax: paths separated by commas (`kind,id`), `a/b` for a sub-field, `a(b,c)` for several sub-fields of `a`
/// (of each element when `a` is a list), `*` for every field at its level; parentheses nest. Lists are transparent:
/// `files(id)` selects `id` of every element of `files`.
package struct DriveFieldSelector: Equatable, Sendable {
    /// Everything below this point is kept.
    package var everything: Bool
    /// The fields kept, each with what of it is kept; empty when ``everything``.
    package var children: [String: DriveFieldSelector]

    /// The selector that keeps everything (`*`).
    package static let all = DriveFieldSelector(everything: true, children: [:])

    /// A selector that keeps nothing yet.
    static let nothing = DriveFieldSelector(everything: false, children: [:])

    /// A selector of `everything`, or of `children`.
    package init(everything: Bool, children: [String: DriveFieldSelector]) {
        self.everything = everything
        self.children = everything ? [:] : children
    }

    /// Why a selector is refused: a syntax error, or a field the answer's resource does not have.
    package struct Invalid: Error, Equatable {
        /// What is wrong, as Drive's error message says it.
        package var message: String
    }

    /// Parses `text`; throws ``Invalid`` for an empty item, an unbalanced parenthesis or a stray character.
    package init(_ text: String) throws(Invalid) {
        var parser = Parser(characters: Array(text.unicodeScalars), text: text)
        let parsed = try parser.list(nested: false)
        guard parser.position == parser.characters.count else { throw parser.invalid() }
        self = parsed
    }

    /// This selector and `other` together: what either keeps.
    package func merged(with other: DriveFieldSelector) -> DriveFieldSelector {
        if everything || other.everything { return .all }
        return DriveFieldSelector(
            everything: false, children: children.merging(other.children) { $0.merged(with: $1) })
    }

    /// `value` (a JSON value as `JSONSerialization` reads it) cut to what this selector keeps.
    package func apply(to value: Any) -> Any {
        if everything { return value }
        if let list = value as? [Any] { return list.map { apply(to: $0) } }
        guard let object = value as? [String: Any] else { return value }
        var kept: [String: Any] = [:]
        for (name, selector) in children {
            if let field = object[name] { kept[name] = selector.apply(to: field) }
        }
        return kept
    }

    /// The shape of a JSON answer, for refusing a selector that names a field it does not have.
    package indirect enum Schema: Sendable {
        /// A value without named parts (a string, number, boolean or list of them).
        case value
        /// A string-to-string map whose keys are the app's own (`appProperties`): any key may be selected.
        case map
        /// An object (or a list of them) with these fields.
        case object([String: Schema])
    }

    /// Throws ``Invalid`` when this selector names a field `schema` does not have.
    package func validate(against schema: Schema, path: String = "") throws(Invalid) {
        if everything { return }
        switch schema {
        case .map: return
        case .value:
            guard children.isEmpty else {
                throw Invalid(message: "Invalid field selection \(path)/\(children.keys.sorted()[0])")
            }
        case .object(let fields):
            for (name, selector) in children.sorted(by: { $0.key < $1.key }) {
                let named = path.isEmpty ? name : path + "/" + name
                guard let field = fields[name] else { throw Invalid(message: "Invalid field selection \(named)") }
                try selector.validate(against: field, path: named)
            }
        }
    }

    /// A recursive-descent reader of the selector's text.
    private struct Parser {
        let characters: [Unicode.Scalar]
        let text: String
        var position = 0

        func invalid() -> Invalid { Invalid(message: "Invalid field selection \(text)") }

        mutating func skipSpaces() {
            while position < characters.count, characters[position] == " " { position += 1 }
        }

        /// `item (',' item)*`, up to the end (or, `nested`, up to a `)` it leaves unread).
        mutating func list(nested: Bool) throws(Invalid) -> DriveFieldSelector {
            var result = DriveFieldSelector.nothing
            while true {
                result = result.merged(with: try item())
                skipSpaces()
                guard position < characters.count else {
                    if nested { throw invalid() }
                    return result
                }
                switch characters[position] {
                case ",": position += 1
                case ")" where nested: return result
                default: throw invalid()
                }
            }
        }

        /// `name ('/' name)* ['(' list ')']`, as the selector of the whole answer it names.
        mutating func item() throws(Invalid) -> DriveFieldSelector {
            skipSpaces()
            var path: [String] = []
            while true {
                let name = self.name()
                guard !name.isEmpty, name == "*" || !name.contains("*") else { throw invalid() }
                path.append(name)
                guard position < characters.count, characters[position] == "/" else { break }
                guard name != "*" else { throw invalid() }
                position += 1
            }
            skipSpaces()
            var selected = DriveFieldSelector.all
            if position < characters.count, characters[position] == "(" {
                guard path.last != "*" else { throw invalid() }
                position += 1
                selected = try list(nested: true)
                position += 1  // the `)` the list stopped at
            }
            for name in path.reversed() {
                selected = name == "*" ? .all : DriveFieldSelector(everything: false, children: [name: selected])
            }
            return selected
        }

        /// Letters, digits, `_`, `-`, `.` and `*`; empty when none.
        mutating func name() -> String {
            var name = ""
            while position < characters.count {
                let character = characters[position]
                let allowed =
                    character.properties.isAlphabetic || ("0"..."9").contains(character)
                    || "_-.*".unicodeScalars.contains(character)
                guard allowed else { break }
                name.unicodeScalars.append(character)
                position += 1
            }
            return name
        }
    }
}
