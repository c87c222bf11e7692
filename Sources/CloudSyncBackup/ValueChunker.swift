import CloudSync
import CloudSyncSodium

/// Cuts a large value into content-defined chunks (FastCDC's normalized chunking over a gear hash), so an edit in
/// the middle of a value changes the chunks around it and no others, and the rest deduplicate like any blob.
///
/// The gear table comes from the repository's id key, so where a repository cuts says nothing about its values to
/// whoever does not hold the key (the same reason restic keys its chunker's polynomial).
struct ValueChunker: Sendable {
    /// No chunk is shorter, but a value's last.
    let minimum: Int
    /// Chunks average about this (a power of two).
    let average: Int
    /// No chunk is longer.
    let maximum: Int
    /// Values longer than this are chunked; shorter ones are one blob.
    var threshold: Int { average }
    private let gear: [UInt64]
    /// Cut points need more zero bits before `average` (fewer small chunks) and fewer after (fewer large ones); the
    /// bits are the hash's highest, which every one of the last 64 bytes moves (the lowest hold only the last few).
    private let strictMask: UInt64
    private let looseMask: UInt64

    /// A chunker keyed by `key` for chunks of at most `largest` bytes (a pack's room): 512 KiB, 1 MiB and 8 MiB,
    /// scaled down together where a pack holds less.
    init(key: SecretBytes, largest: Int) {
        maximum = max(64, min(8 << 20, largest))
        var average = 1 << 20
        while average * 2 > maximum { average /= 2 }
        self.average = max(16, average)
        minimum = max(1, min(512 << 10, self.average / 2))
        let bits = self.average.trailingZeroBitCount
        strictMask = ~(UInt64.max >> UInt64(bits + 1))
        looseMask = ~(UInt64.max >> UInt64(max(1, bits - 1)))
        gear = (0..<256).map { index in
            let digest = (try? BLAKE2b.hash(Array("gear \(index)".utf8), byteCount: 16, key: key)) ?? []
            return digest.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
        }
    }

    /// Where `bytes` is cut: the end of each chunk, the last being `bytes.count`.
    func cuts(_ bytes: UnsafeRawBufferPointer) -> [Int] {
        var ends: [Int] = []
        var start = 0
        while start < bytes.count {
            start = nextCut(bytes, from: start)
            ends.append(start)
        }
        return ends
    }

    /// The length of the first chunk of `window`, which holds the value's next `min(remaining, maximum)` bytes: cuts
    /// depend on no more than that, so a file is cut the same way window by window as whole.
    func firstCut(_ window: UnsafeRawBufferPointer) -> Int { nextCut(window, from: 0) }

    /// The end of the chunk that starts at `start`.
    private func nextCut(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int {
        let remaining = bytes.count - start
        guard remaining > minimum else { return bytes.count }
        let end = start + min(remaining, maximum)
        let normal = start + min(remaining, average)
        var hash: UInt64 = 0
        var position = start + minimum
        while position < normal {
            hash = (hash << 1) &+ gear[Int(bytes[position])]
            if hash & strictMask == 0 { return position + 1 }
            position += 1
        }
        while position < end {
            hash = (hash << 1) &+ gear[Int(bytes[position])]
            if hash & looseMask == 0 { return position + 1 }
            position += 1
        }
        return end
    }
}
