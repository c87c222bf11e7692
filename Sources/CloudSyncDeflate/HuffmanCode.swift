/// Building prefix codes: the lengths that spend the fewest bits under a length limit, and the canonical codes those
/// lengths give (RFC 1951 §3.2.2).
enum HuffmanCode {
    /// Code lengths for symbols seen `frequencies` times, none longer than `limit`, minimising the bits spent.
    ///
    /// An unseen symbol gets 0. A single seen symbol gets length 1, so the code has one unused slot.
    static func lengths(_ frequencies: [UInt32], limit: Int) -> [UInt8] {
        var lengths = [UInt8](repeating: 0, count: frequencies.count)
        var symbols = frequencies.indices.filter { frequencies[$0] > 0 }
        guard symbols.count > 1 else {
            if let only = symbols.first { lengths[only] = 1 }
            return lengths
        }
        symbols.sort { frequencies[$0] < frequencies[$1] || (frequencies[$0] == frequencies[$1] && $0 < $1) }
        var depths = symbols.map { Int(frequencies[$0]) }
        minimumRedundancyDepths(&depths)
        // depths[0] belongs to the rarest symbol, so it is the deepest.
        var count = [Int](repeating: 0, count: max(depths[0], limit) + 1)
        for depth in depths { count[depth] += 1 }
        // Over the limit: move leaves up as JPEG's Annex K.3 does, keeping the code complete. Each pass takes two
        // leaves from the deepest level, makes their parent a leaf, and hangs one of them with a shallower leaf.
        var deepest = count.count - 1
        if deepest > limit {
            for level in stride(from: deepest, to: limit, by: -1) {
                while count[level] > 0 {
                    var shallower = level - 2
                    while count[shallower] == 0 { shallower -= 1 }
                    count[level] -= 2
                    count[level - 1] += 1
                    count[shallower + 1] += 2
                    count[shallower] -= 1
                }
            }
            deepest = limit
        }
        var next = 0
        for length in stride(from: deepest, through: 1, by: -1) {
            for _ in 0..<count[length] {
                lengths[symbols[next]] = UInt8(length)
                next += 1
            }
        }
        return lengths
    }

    /// Replaces ascending frequencies with their symbols' depths in an optimal code, in place and in linear time
    /// (Moffat and Katajainen's method: parents in the freed slots, then internal depths, then leaf depths).
    private static func minimumRedundancyDepths(_ a: inout [Int]) {
        let n = a.count
        a[0] += a[1]
        var root = 0
        var leaf = 2
        for next in 1..<(n - 1) {
            if leaf >= n || a[root] < a[leaf] {
                a[next] = a[root]
                a[root] = next
                root += 1
            } else {
                a[next] = a[leaf]
                leaf += 1
            }
            if leaf >= n || (root < next && a[root] < a[leaf]) {
                a[next] += a[root]
                a[root] = next
                root += 1
            } else {
                a[next] += a[leaf]
                leaf += 1
            }
        }
        a[n - 2] = 0
        if n >= 3 {
            for next in stride(from: n - 3, through: 0, by: -1) { a[next] = a[a[next]] + 1 }
        }
        var available = 1
        var used = 0
        var depth = 0
        root = n - 2
        var next = n - 1
        while available > 0 {
            while root >= 0 && a[root] == depth {
                used += 1
                root -= 1
            }
            while available > used {
                a[next] = depth
                next -= 1
                available -= 1
            }
            available = 2 * used
            depth += 1
            used = 0
        }
    }

    /// The canonical code of each symbol of `lengths`, bit-reversed, since DEFLATE sends a code's first bit in the
    /// lowest position.
    static func reversedCodes(_ lengths: [UInt8]) -> [UInt16] {
        var count = [Int](repeating: 0, count: 16)
        for length in lengths where length > 0 { count[Int(length)] += 1 }
        var next = [Int](repeating: 0, count: 16)
        var code = 0
        for bits in 1...15 {
            code = (code + count[bits - 1]) << 1
            next[bits] = code
        }
        var codes = [UInt16](repeating: 0, count: lengths.count)
        for (symbol, length) in lengths.enumerated() where length > 0 {
            codes[symbol] = reversed(next[Int(length)], bits: Int(length))
            next[Int(length)] += 1
        }
        return codes
    }

    private static func reversed(_ code: Int, bits: Int) -> UInt16 {
        var result = 0
        var code = code
        for _ in 0..<bits {
            result = result << 1 | code & 1
            code >>= 1
        }
        return UInt16(result)
    }
}
