/// How many keys to handle at a time when one piece of work reads from, writes to or removes at several providers,
/// so that every provider gets whole batches and the work costs the fewest requests its providers allow.
public enum BatchSizing {
    /// Past this, a common multiple of batch limits is too large a page to hold (200 and 999 have 199,800); the
    /// largest limit is used instead, every batch of the larger provider still whole.
    public static let largestCommonPage = 10_000

    /// The smallest multiple of every one of `limits` that is at least `floor`.
    ///
    /// That is the least common multiple of the limits rounded up to a multiple at or above `floor`, or, when the
    /// least common multiple is over ``largestCommonPage``, the smallest multiple of the largest limit at or above
    /// `floor`; `floor` alone when `limits` is empty.
    public static func commonPage(of limits: [Int], floor: Int = 1) -> Int {
        let limits = limits.map { max(1, $0) }
        guard let largest = limits.max() else { return max(1, floor) }
        let common = limits.reduce(1) { page, limit in
            page > largestCommonPage ? page : leastCommonMultiple(page, limit)
        }
        let unit = common <= largestCommonPage ? common : largest
        return max(unit, (floor + unit - 1) / unit * unit)
    }

    private static func leastCommonMultiple(_ a: Int, _ b: Int) -> Int {
        var (x, y) = (a, b)
        while y != 0 { (x, y) = (y, x % y) }
        return a / x * b
    }
}
