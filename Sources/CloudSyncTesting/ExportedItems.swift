import Foundation

/// The items of a plaintext export file, version 2 (`"items": [{"key", "value"}]`) or 1 (`"items": {key: value}`),
/// read without the runner's code, as a person's script would read them; nil when the file is not one.
///
/// Keyed by `String`, so canonically equivalent keys merge: use it for files whose keys are plain.
public func exportedItems(at path: String) -> [String: String]? {
    guard let data = FileManager.default.contents(atPath: path),
        let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    else { return nil }
    if let list = object["items"] as? [[String: String]] {
        var items: [String: String] = [:]
        for pair in list {
            guard let key = pair["key"], let value = pair["value"] else { return nil }
            items[key] = value
        }
        return items
    }
    return object["items"] as? [String: String]
}
