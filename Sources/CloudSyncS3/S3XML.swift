import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// One element of an S3 XML document: its name (namespace prefix dropped), its text and its child elements.
struct XMLElement: Sendable, Equatable {
    var name: String
    var text = ""
    var children: [XMLElement] = []

    /// The first child named `name`.
    func child(_ name: String) -> XMLElement? { children.first { $0.name == name } }

    /// Every child named `name`, in document order.
    func children(_ name: String) -> [XMLElement] { children.filter { $0.name == name } }

    /// The text of the first child named `name`.
    func text(of name: String) -> String? { child(name)?.text }

    /// The root element of `data`, parsed with Foundation's `XMLParser`; nil when it is not well-formed XML.
    static func parse(_ data: Data) -> XMLElement? {
        let parser = XMLParser(data: data)
        let builder = TreeBuilder()
        parser.delegate = builder
        parser.shouldProcessNamespaces = false
        parser.shouldResolveExternalEntities = false
        guard parser.parse() else { return nil }
        return builder.root
    }

    /// `text` with the five XML special characters escaped, for element content.
    static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&apos;"
            // XML 1.0 cannot carry other control characters even escaped as text; a character reference can.
            case "\u{9}", "\u{A}", "\u{D}": escaped += "&#\(character.value);"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }
}

/// Builds the element tree as `XMLParser` reports it.
private final class TreeBuilder: NSObject, XMLParserDelegate {
    var stack: [XMLElement] = []
    var root: XMLElement?

    func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        let local = elementName.split(separator: ":").last.map(String.init) ?? elementName
        stack.append(XMLElement(name: local))
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        guard !stack.isEmpty else { return }
        stack[stack.count - 1].text += string
    }

    func parser(
        _ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?
    ) {
        guard let element = stack.popLast() else { return }
        if stack.isEmpty {
            root = element
        } else {
            stack[stack.count - 1].children.append(element)
        }
    }
}
