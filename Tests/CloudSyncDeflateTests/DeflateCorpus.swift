import CloudSync

/// Inputs that exercise every form a block takes and every kind of match, made from a seed.
enum DeflateCorpus {
    static func inputs(seed: UInt64) -> [(name: String, bytes: [UInt8])] {
        var random = SeededRandom(seed: seed)
        func randomBytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255, using: &random) } }
        let hexDigits = Array("0123456789abcdef".utf8)
        let hex = (0..<200_000).map { _ in hexDigits.randomElement(using: &random)! }
        var records: [UInt8] = []
        for index in 0..<4_000 {
            let name = ["Zoë", "Ana", "Li", "Maximilian"].randomElement(using: &random)!
            let value = Int.random(in: 0..<100_000, using: &random)
            records += Array(
                #"{"key":"user\#(index).settings","name":"\#(name)","score":\#(value),"tags":["a","b"]}"#.utf8)
        }
        let block = randomBytes(20_000)
        var farCopies = block + randomBytes(12_767) + block  // a distance of exactly 32,767
        farCopies += randomBytes(1) + Array(farCopies.suffix(32_768))  // and of 32,768, the longest allowed
        var mixed: [UInt8] = []
        for _ in 0..<12 {
            mixed +=
                Bool.random(using: &random)
                ? randomBytes(Int.random(in: 1...30_000, using: &random))
                : Array(records.prefix(Int.random(in: 1...30_000, using: &random)))
        }
        return [
            ("empty", []),
            ("one byte", [42]),
            ("random", randomBytes(100_000)),
            ("hexadecimal", hex),
            ("json records", records),
            ("zeros", [UInt8](repeating: 0, count: 100_000)),
            ("period of three", Array(String(repeating: "abc", count: 40_000).utf8)),
            ("stored boundary below", randomBytes(65_535)),
            ("stored boundary", randomBytes(65_536)),
            ("stored boundary above", randomBytes(65_537)),
            ("far copies", farCopies),
            ("random and text", mixed),
            ("every byte", (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }),
        ]
    }
}
