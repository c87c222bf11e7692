import CloudSync
import CloudSyncTesting
import Foundation
import Testing

/// Drive's `fields` selector: what it parses, what it keeps of an answer, and what it refuses.
@Suite struct DriveFieldSelectorTests {
    let file: [String: Any] = [
        "kind": "drive#file", "id": "1", "name": "a", "mimeType": "text/plain", "size": "3",
        "appProperties": ["k": "v", "other": "w"],
    ]

    func kept(_ selector: String, _ value: Any) throws -> NSDictionary {
        try #require(try DriveFieldSelector(selector).apply(to: value) as? [String: Any]) as NSDictionary
    }

    @Test func pathsSubFieldsAndNestedSelectionsKeepOnlyWhatTheyName() throws {
        let list: [String: Any] = ["kind": "drive#fileList", "nextPageToken": "t", "files": [file, file]]
        #expect(try kept("id,name", file) == ["id": "1", "name": "a"] as NSDictionary)
        #expect(try kept("appProperties/k", file) == ["appProperties": ["k": "v"]] as NSDictionary)
        #expect(
            try kept("nextPageToken, files(id,appProperties/other)", list)
                == [
                    "nextPageToken": "t",
                    "files": [["id": "1", "appProperties": ["other": "w"]]] + [
                        ["id": "1", "appProperties": ["other": "w"]]
                    ],
                ] as NSDictionary)
        #expect(try kept("files/name", list) == ["files": [["name": "a"], ["name": "a"]]] as NSDictionary)
        #expect(try kept("*", list) == list as NSDictionary)
        #expect(try kept("files(*)", list) == ["files": [file, file]] as NSDictionary)
        // A field the answer lacks is left out, not invented.
        #expect(try kept("id,md5Checksum", file) == ["id": "1"] as NSDictionary)
    }

    @Test func overlappingSelectionsMerge() throws {
        #expect(try DriveFieldSelector("files(id),files(name)") == DriveFieldSelector("files(id,name)"))
        #expect(try DriveFieldSelector("files/id,files") == DriveFieldSelector("files"))
        #expect(try DriveFieldSelector("id,*") == .all)
    }

    @Test(arguments: ["", "id,", ",id", "files(id", "files(id))", "files()", "a//b", "id name", "*/id", "a*b", "f(*)x"])
    func malformedSelectorsAreRefused(_ text: String) {
        #expect(throws: DriveFieldSelector.Invalid.self) { try DriveFieldSelector(text) }
    }

    @Test func fieldsTheAnswerDoesNotHaveAreRefused() throws {
        let schema = DriveFieldSelector.Schema.object([
            "id": .value, "appProperties": .map, "files": .object(["id": .value]),
        ])
        try DriveFieldSelector("id,appProperties/anything,files(id),files/id,*").validate(against: schema)
        #expect {
            try DriveFieldSelector("files(id,name)").validate(against: schema)
        } throws: { error in
            (error as? DriveFieldSelector.Invalid)?.message == "Invalid field selection files/name"
        }
        #expect(throws: DriveFieldSelector.Invalid.self) { try DriveFieldSelector("nope").validate(against: schema) }
        #expect(throws: DriveFieldSelector.Invalid.self) { try DriveFieldSelector("id/x").validate(against: schema) }
    }

    /// Random selectors over random nested objects, against a model that walks the selector's paths one at a time.
    @Test(arguments: 1...40)
    func randomSelectionsAgreeWithAPathByPathModel(seed: Int) throws {
        var random = SeededRandom(seed: UInt64(seed))
        let names = ["a", "b", "c", "d"]
        func object(depth: Int) -> [String: Any] {
            var result: [String: Any] = [:]
            for name in names where Bool.random(using: &random) {
                if depth < 2, Bool.random(using: &random) {
                    result[name] =
                        Bool.random(using: &random)
                        ? object(depth: depth + 1) as Any : [object(depth: depth + 1), object(depth: depth + 1)]
                } else {
                    result[name] = Int.random(in: 0..<100, using: &random)
                }
            }
            return result
        }
        let value = object(depth: 0)
        // Paths of one to three names; written flat (`a/b`), or nested (`a(b)`) at random.
        let paths = (0..<Int.random(in: 1...4, using: &random)).map { _ in
            (0..<Int.random(in: 1...3, using: &random)).map { _ in names.randomElement(using: &random)! }
        }
        let text = paths.map { path in
            Bool.random(using: &random) || path.count == 1
                ? path.joined(separator: "/") : path[0] + "(" + path.dropFirst().joined(separator: "/") + ")"
        }.joined(separator: ",")
        let selected = try DriveFieldSelector(text).apply(to: value)
        #expect(
            (selected as? [String: Any]).map(NSDictionary.init) == NSDictionary(dictionary: model(value, paths)),
            "\(text)")
    }

    /// What keeping `paths` of `value` means, path by path: the union of what each path alone keeps.
    func model(_ value: [String: Any], _ paths: [[String]]) -> [String: Any] {
        var result: [String: Any] = [:]
        for path in paths { result = union(result, keep(value, path)) as? [String: Any] ?? result }
        return result
    }

    func keep(_ value: Any, _ path: [String]) -> Any {
        guard let name = path.first else { return value }
        if let list = value as? [Any] { return list.map { keep($0, path) } }
        guard let object = value as? [String: Any], let field = object[name] else {
            return value is [String: Any] ? [String: Any]() : value
        }
        return [name: keep(field, Array(path.dropFirst()))]
    }

    func union(_ left: Any, _ right: Any) -> Any {
        if let a = left as? [String: Any], let b = right as? [String: Any] {
            return a.merging(b) { union($0, $1) }
        }
        if let a = left as? [Any], let b = right as? [Any], a.count == b.count {
            return zip(a, b).map { union($0, $1) }
        }
        return left
    }
}
