import CloudSync
import Foundation

/// The part of Drive's search language (`q`) clients of the app data folder use.
///
/// Terms: `name` with `=`, `!=` or `contains` (a prefix, as Drive matches names); `mimeType` with `=` or `!=`;
/// `trashed` with `=` or `!=` and `true`/`false`; `'id' in parents`; `modifiedTime` and `createdTime` with `=`, `!=`,
/// `<`, `<=`, `>`, `>=` and an RFC 3339 time (UTC when it has no offset); `appProperties has { key='k' and
/// value='v' }` and the same of `properties`. Strings are single-quoted, `\'` and `\\` escaping a quote and a
/// backslash. Terms combine with `not`, `and` and `or` (binding in that order, tightest first) and parentheses.
/// Keywords are case-insensitive. An empty query matches every file.
package struct DriveQuery: Sendable {
    /// A query's tree.
    package indirect enum Expression: Equatable, Sendable {
        case name(String, String)  // operator, value
        case mimeType(String, String)  // operator, value
        case trashed(Bool)
        case inParents(String)
        case time(field: String, operator: String, milliseconds: Int64)
        case has(field: String, key: String, value: String)
        case not(Expression)
        case and(Expression, Expression)
        case or(Expression, Expression)
        /// Every file: the empty query.
        case everything
    }

    /// A query Drive refuses (400 `invalid`).
    package struct ParseError: Error {}

    /// The query's tree.
    package let expression: Expression

    /// Parses `text`; throws ``ParseError`` for anything outside the language above.
    package init(_ text: String) throws(ParseError) {
        var parser = Parser(tokens: try Self.tokenize(text))
        if parser.tokens.isEmpty {
            expression = .everything
            return
        }
        expression = try parser.disjunction()
        guard parser.position == parser.tokens.count else { throw ParseError() }
    }

    /// Whether `file` matches; `appDataFolderID` is the id the app data folder answers to besides its alias.
    package func matches(_ file: DriveFilesEmulator.File, appDataFolderID: String) -> Bool {
        Self.evaluate(expression, file, appDataFolderID: appDataFolderID)
    }

    private static func evaluate(_ expression: Expression, _ file: DriveFilesEmulator.File, appDataFolderID: String)
        -> Bool
    {
        switch expression {
        case .everything: return true
        // Names compare as bytes, as Drive's do.
        case .name("=", let value): return StoreKey.bytesEqual(file.name, value)
        case .name("!=", let value): return !StoreKey.bytesEqual(file.name, value)
        case .name(_, let value): return file.name.utf8.starts(with: value.utf8)
        case .mimeType(let op, let value): return (file.mimeType == value) == (op == "=")
        case .trashed(let trashed): return file.trashed == trashed
        case .inParents(let parent):
            return file.parents.contains(parent == appDataFolderID ? DriveFilesEmulator.appDataFolderAlias : parent)
        case .time(let field, let op, let milliseconds):
            let time = field == "modifiedTime" ? file.modifiedMs : file.createdMs
            switch op {
            case "<": return time < milliseconds
            case "<=": return time <= milliseconds
            case ">": return time > milliseconds
            case ">=": return time >= milliseconds
            case "!=": return time != milliseconds
            default: return time == milliseconds
            }
        case .has(let field, let key, let value):
            let map = field == "appProperties" ? file.appProperties : file.properties
            return map?[key] == value
        case .not(let inner): return !evaluate(inner, file, appDataFolderID: appDataFolderID)
        case .and(let left, let right):
            return evaluate(left, file, appDataFolderID: appDataFolderID)
                && evaluate(right, file, appDataFolderID: appDataFolderID)
        case .or(let left, let right):
            return evaluate(left, file, appDataFolderID: appDataFolderID)
                || evaluate(right, file, appDataFolderID: appDataFolderID)
        }
    }

    /// A word (a field, keyword or `true`), a quoted string (unescaped), or punctuation (`(`, `)`, `{`, `}`, `=`,
    /// `!=`, `<`, `<=`, `>`, `>=`).
    package enum Token: Equatable, Sendable {
        case word(String)
        case string(String)
        case symbol(String)
    }

    /// Recursive descent over the tokens: `or` of `and`s of (`not`) terms or parenthesised queries.
    private struct Parser {
        let tokens: [Token]
        var position = 0

        var next: Token? { position < tokens.count ? tokens[position] : nil }

        mutating func take() throws(ParseError) -> Token {
            guard let token = next else { throw ParseError() }
            position += 1
            return token
        }

        /// Takes the next token when it is the keyword `word` (any case).
        mutating func takeKeyword(_ word: String) -> Bool {
            guard case .word(let text) = next, text.lowercased() == word else { return false }
            position += 1
            return true
        }

        mutating func expect(_ token: Token) throws(ParseError) {
            guard try take() == token else { throw ParseError() }
        }

        mutating func disjunction() throws(ParseError) -> Expression {
            var expression = try conjunction()
            while takeKeyword("or") { expression = .or(expression, try conjunction()) }
            return expression
        }

        mutating func conjunction() throws(ParseError) -> Expression {
            var expression = try negation()
            while takeKeyword("and") { expression = .and(expression, try negation()) }
            return expression
        }

        mutating func negation() throws(ParseError) -> Expression {
            if takeKeyword("not") { return .not(try negation()) }
            if next == .symbol("(") {
                position += 1
                let inner = try disjunction()
                try expect(.symbol(")"))
                return inner
            }
            return try term()
        }

        mutating func term() throws(ParseError) -> Expression {
            let subject = try take()
            if case .string(let value) = subject {
                guard takeKeyword("in"), takeKeyword("parents") else { throw ParseError() }
                return .inParents(value)
            }
            guard case .word(let field) = subject else { throw ParseError() }
            switch field {
            case "name":
                let op = try comparison(["=", "!=", "contains"])
                return .name(op, try string())
            case "mimeType":
                let op = try comparison(["=", "!="])
                return .mimeType(op, try string())
            case "trashed":
                let op = try comparison(["=", "!="])
                guard case .word(let text) = try take(), ["true", "false"].contains(text.lowercased()) else {
                    throw ParseError()
                }
                return .trashed((text.lowercased() == "true") == (op == "="))
            case "modifiedTime", "createdTime":
                let op = try comparison(["=", "!=", "<", "<=", ">", ">="])
                guard let milliseconds = DriveQuery.milliseconds(rfc3339: try string()) else { throw ParseError() }
                return .time(field: field, operator: op, milliseconds: milliseconds)
            case "appProperties", "properties":
                guard takeKeyword("has") else { throw ParseError() }
                try expect(.symbol("{"))
                guard takeKeyword("key") else { throw ParseError() }
                try expect(.symbol("="))
                let key = try string()
                guard takeKeyword("and"), takeKeyword("value") else { throw ParseError() }
                try expect(.symbol("="))
                let value = try string()
                try expect(.symbol("}"))
                return .has(field: field, key: key, value: value)
            default: throw ParseError()
            }
        }

        /// The next token as one of `operators` (`contains` a word, the others symbols).
        mutating func comparison(_ operators: [String]) throws(ParseError) -> String {
            switch try take() {
            case .symbol(let op) where operators.contains(op): return op
            case .word(let word) where operators.contains(word.lowercased()): return word.lowercased()
            default: throw ParseError()
            }
        }

        mutating func string() throws(ParseError) -> String {
            guard case .string(let value) = try take() else { throw ParseError() }
            return value
        }
    }

    /// `2026-12-01T03:14:13.123Z`, `…+02:00`, without fractions, or without an offset (UTC), in milliseconds since
    /// 1970; nil for anything else.
    static func milliseconds(rfc3339 text: String) -> Int64? {
        var text = text
        let hasOffset =
            text.hasSuffix("Z") || text.hasSuffix("z")
            || text.range(of: #"[+-]\d\d:\d\d$"#, options: .regularExpression) != nil
        if !hasOffset { text += "Z" }
        guard text.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"#, options: .regularExpression) != nil else {
            return nil
        }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return Int64((date.timeIntervalSince1970 * 1000).rounded()) }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text).map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) }
    }

    /// Splits `text` into tokens; throws for an unterminated string or a stray character.
    package static func tokenize(_ text: String) throws(ParseError) -> [Token] {
        var tokens: [Token] = []
        let characters = Array(text)
        var index = 0
        while index < characters.count {
            let character = characters[index]
            if character.isWhitespace {
                index += 1
            } else if character == "'" {
                var value = ""
                index += 1
                while true {
                    guard index < characters.count else { throw ParseError() }
                    let inside = characters[index]
                    index += 1
                    if inside == "'" { break }
                    if inside == "\\" {
                        guard index < characters.count else { throw ParseError() }
                        value.append(characters[index])
                        index += 1
                    } else {
                        value.append(inside)
                    }
                }
                tokens.append(.string(value))
            } else if "(){}=".contains(character) {
                tokens.append(.symbol(String(character)))
                index += 1
            } else if "!<>".contains(character) {
                let paired = index + 1 < characters.count && characters[index + 1] == "="
                guard paired || character != "!" else { throw ParseError() }
                tokens.append(.symbol(paired ? String(character) + "=" : String(character)))
                index += paired ? 2 : 1
            } else if character.isLetter || character.isNumber || character == "_" {
                var word = ""
                while index < characters.count,
                    characters[index].isLetter || characters[index].isNumber || characters[index] == "_"
                {
                    word.append(characters[index])
                    index += 1
                }
                tokens.append(.word(word))
            } else {
                throw ParseError()
            }
        }
        return tokens
    }
}
