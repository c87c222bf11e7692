/// Values that say which generation of a writer's loop wrote them and whether they arrived whole, for crash tests.
///
/// A value is `generation N of KEY:` followed by a body whose length depends on N and the key, and ends with `|end`;
/// a torn or mixed file fails ``generation(of:key:)``.
public enum GenerationValue {
    /// The value generation `generation` writes to `key` (between 1 and about 8 KB long).
    public static func make(key: String, generation: Int) -> String {
        let length = (generation * 997 + key.utf8.count * 131) % 8000
        let filler = Character(Unicode.Scalar(UInt8(ascii: "a") + UInt8(generation % 26)))
        return "generation \(generation) of \(key):" + String(repeating: filler, count: length) + "|end"
    }

    /// The generation that wrote `value` to `key`, or nil when `value` is not exactly what some generation wrote.
    public static func generation(of value: String, key: String) -> Int? {
        guard value.hasPrefix("generation "), let space = value.dropFirst(11).firstIndex(of: " "),
            let generation = Int(value[value.index(value.startIndex, offsetBy: 11)..<space])
        else { return nil }
        return make(key: key, generation: generation) == value ? generation : nil
    }
}
