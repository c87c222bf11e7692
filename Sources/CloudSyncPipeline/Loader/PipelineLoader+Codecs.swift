import CloudSync
import CloudSyncYAML
import Foundation

/// Reading `codecs`: each codec and where its keys come from.
extension PipelineReader {
    // MARK: Codecs

    func codecSpecs(_ node: YAMLNode?, directory: String) -> [CodecSpec] {
        guard let node else { return [] }
        guard let pairs = node.mapping else {
            diagnostics.error("`codecs` must map codec ids to codecs; found \(describe(node))", at: node.mark)
            return []
        }
        return pairs.compactMap { pair in
            guard let id = id(pair.key, what: "codec") else { return nil }
            if id == "none" {
                diagnostics.error("`none` is reserved (it means no codec); choose another codec id", at: pair.key.mark)
            }
            let context = "codec `\(id)`"
            guard let codec = mapping(pair.value, context, ["type", "keys", "allowPlaintext"]) else { return nil }
            if let type = codec.require("type"), let text = codec.scalarText(type, field: "type"),
                text.value != "xchacha20poly1305"
            {
                diagnostics.error("`type` in \(context) must be xchacha20poly1305; found \(text.quoted)", at: type.mark)
            }
            var keys: [CodecSpec.Key] = []
            var keyIDs: Set<String> = []
            if let list = codec.require("keys") {
                if let items = list.sequence {
                    if items.isEmpty { diagnostics.error("\(context) needs at least one key", at: list.mark) }
                    for item in items {
                        guard let key = keySpec(item, codec: id, directory: directory) else { continue }
                        if !keyIDs.insert(key.id).inserted {
                            diagnostics.error("key id `\(key.id)` appears twice in \(context)", at: item.mark)
                        } else {
                            keys.append(key)
                        }
                    }
                } else {
                    diagnostics.error(
                        "`keys` in \(context) must be a list of keys; found \(describe(list))", at: list.mark)
                }
            }
            return CodecSpec(
                id: id, keys: keys, allowPlaintext: codec.boolean("allowPlaintext") ?? false, mark: pair.key.mark)
        }
    }

    func keySpec(_ node: YAMLNode, codec: String, directory: String) -> CodecSpec.Key? {
        guard let key = mapping(node, "a key of codec `\(codec)`", ["id", "file", "env", "passphrase"]),
            let idNode = key.require("id"), let idText = key.scalarText(idNode, field: "id")
        else { return nil }
        let id = idText.value
        guard isIdentifier(id) else {
            diagnostics.error(
                "key id \(idText.quoted) may contain only ASCII letters, digits, '.', '_' and '-'", at: idNode.mark)
            return nil
        }
        let sources = ["file", "env", "passphrase"].filter { key[$0] != nil }
        guard sources.count == 1 else {
            diagnostics.error(
                "key `\(id)` needs exactly one of `file`, `env` or `passphrase`"
                    + (sources.isEmpty ? "" : "; found \(sources.joined(separator: " and "))"), at: node.mark)
            return nil
        }
        switch sources[0] {
        case "file":
            return key.path("file").map {
                .init(
                    id: id,
                    source: .file(Interpolated(value: resolvePath($0.value, against: directory), written: $0.written)),
                    mark: node.mark)
            }
        case "env":
            return key.string("env").map { .init(id: id, source: .environment($0.value), mark: node.mark) }
        default:
            guard let secret = mapping(key["passphrase"]!, "the passphrase of key `\(id)`", ["env", "file"]) else {
                return nil
            }
            if let variable = secret.string("env"), secret["file"] == nil {
                return .init(id: id, source: .passphraseEnvironment(variable.value), mark: node.mark)
            }
            if let file = secret.path("file"), secret["env"] == nil {
                return .init(
                    id: id,
                    source: .passphraseFile(
                        Interpolated(value: resolvePath(file.value, against: directory), written: file.written)),
                    mark: node.mark)
            }
            diagnostics.error(
                "the passphrase of key `\(id)` needs exactly one of `env` or `file`", at: secret.node.mark)
            return nil
        }
    }
}
