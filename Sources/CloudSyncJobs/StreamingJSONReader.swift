import CloudSync
import CloudSyncPipeline
import Foundation

/// Where a ``StreamingJSONReader`` gets its bytes: a block at a time, nil at the end.
protocol ByteBlockSource: AnyObject {
    func nextBlock() throws(CloudSyncError) -> [UInt8]?
}

/// A JSON tokenizer that reads from a ``ByteBlockSource`` block by block, so a document larger than memory can be
/// walked value by value (RFC 8259: strings are checked UTF-8, escapes and surrogate pairs decoded, control
/// characters refused).
///
/// Errors are `ERR_CONFIG` naming `what` and the byte offset, with the advice `advice`.
struct StreamingJSONReader {
    private let source: ByteBlockSource
    private let what: String
    private let advice: String
    private var block: [UInt8] = []
    private var index = 0
    /// Bytes of the blocks before the current one.
    private var consumed = 0
    private var scratch: [UInt8] = []

    init(_ source: ByteBlockSource, what: String, advice: String) {
        self.source = source
        self.what = what
        self.advice = advice
    }

    /// The offset of the next byte in the whole text.
    var offset: Int { consumed + index }

    /// The error for something wrong at the current offset.
    func damaged(_ problem: String) -> CloudSyncError {
        CloudSyncError(.config, "\(what): \(problem) at byte \(offset); \(advice)")
    }

    /// The next byte that is not white space, without taking it; nil at the end.
    mutating func peek() throws(CloudSyncError) -> UInt8? {
        while true {
            while index < block.count {
                switch block[index] {
                case 0x20, 0x0A, 0x0D, 0x09: index += 1
                default: return block[index]
                }
            }
            guard try refill() else { return nil }
        }
    }

    /// Takes `byte` (after white space), or fails naming what was `expected`.
    mutating func expect(_ byte: UInt8, _ expected: String) throws(CloudSyncError) {
        guard try peek() == byte else { throw damaged("expected \(expected)") }
        index += 1
    }

    /// Takes `byte` when it comes next (after white space).
    mutating func take(_ byte: UInt8) throws(CloudSyncError) -> Bool {
        guard try peek() == byte else { return false }
        index += 1
        return true
    }

    /// Reads a string.
    mutating func string() throws(CloudSyncError) -> String {
        try expect(UInt8(ascii: "\""), "a string")
        scratch.removeAll(keepingCapacity: true)
        // Any byte of 0x80 or more: only then can the text be invalid UTF-8 and need checking.
        var highBits: UInt8 = 0
        while true {
            if index == block.count { guard try refill() else { throw damaged("the text ends inside a string") } }
            // Copy the run of plain bytes in one step.
            let end = Self.plainRun(in: block, from: index, highBits: &highBits)
            scratch.append(contentsOf: block[index..<end])
            index = end
            guard index < block.count else { continue }
            let byte = block[index]
            index += 1
            if byte == UInt8(ascii: "\"") { break }
            guard byte == UInt8(ascii: "\\") else { throw damaged("a control character inside a string") }
            try escape()
        }
        // ASCII (escapes decode to valid UTF-8 of their own) needs no validation, which costs a generic call.
        if highBits & 0x80 == 0 { return String(decoding: scratch, as: UTF8.self) }
        guard let text = String(validating: scratch, as: UTF8.self) else {
            throw damaged("a string that is not UTF-8")
        }
        return text
    }

    /// Where the run of plain string bytes from `start` ends.
    ///
    /// The run goes up to the first quote, backslash or control character, or the block's end; its bytes are ORed
    /// into `highBits`.
    ///
    /// Eight bytes at a time while none of them is special (each test is exact for "some byte of the word is"), then
    /// byte by byte: values are mostly long runs, and this is most of an import's parsing.
    static func plainRun(in block: [UInt8], from start: Int, highBits: inout UInt8) -> Int {
        block.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return start }
            let ones: UInt64 = 0x0101_0101_0101_0101
            let tops: UInt64 = 0x8080_8080_8080_8080
            var end = start
            var wide: UInt64 = 0
            while end + 8 <= buffer.count {
                let word = UnsafeRawPointer(base + end).loadUnaligned(as: UInt64.self)
                let quotes = word ^ (ones &* 0x22)
                let backslashes = word ^ (ones &* 0x5C)
                // A byte is zero in `quotes` where the word has a quote; below 0x20 in `word` where it has a control
                // character.
                let special =
                    ((quotes &- ones) & ~quotes) | ((backslashes &- ones) & ~backslashes)
                    | ((word &- ones &* 0x20) & ~word)
                if special & tops != 0 { break }
                wide |= word
                end += 8
            }
            if wide & tops != 0 { highBits |= 0x80 }
            while end < buffer.count {
                let byte = buffer[end]
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 { break }
                highBits |= byte
                end += 1
            }
            return end
        }
    }

    /// Reads an integer (a number without fraction or exponent).
    mutating func integer() throws(CloudSyncError) -> Int {
        guard let first = try peek(), first == UInt8(ascii: "-") || (0x30...0x39).contains(first) else {
            throw damaged("expected a number")
        }
        var digits = ""
        while let byte = try nextRaw(), byte == UInt8(ascii: "-") || (0x30...0x39).contains(byte) {
            digits.append(Character(Unicode.Scalar(byte)))
            index += 1
        }
        guard let value = Int(digits) else { throw damaged("a number that is not a whole number") }
        return value
    }

    /// Skips one value of any kind, however deeply nested: containers are tracked in a list, not by recursion, so a
    /// file of a million `[` cannot exhaust the stack.
    mutating func skipValue() throws(CloudSyncError) {
        // What each open container waits for, innermost last.
        var closers: [UInt8] = []
        repeat {
            guard let byte = try peek() else { throw damaged("the text ends where a value should be") }
            switch byte {
            case UInt8(ascii: "\""):
                _ = try string()
            case UInt8(ascii: "{"):
                index += 1
                if try take(UInt8(ascii: "}")) { break }
                closers.append(UInt8(ascii: "}"))
                _ = try string()
                try expect(UInt8(ascii: ":"), "':'")
                continue
            case UInt8(ascii: "["):
                index += 1
                if try take(UInt8(ascii: "]")) { break }
                closers.append(UInt8(ascii: "]"))
                continue
            default:
                // A number or a literal: the bytes up to the next delimiter.
                var length = 0
                while let next = try nextRaw(), !Self.delimiters.contains(next) {
                    index += 1
                    length += 1
                }
                guard length > 0 else { throw damaged("unexpected character") }
            }
            // After a value: the next one in its container, or the containers it ends.
            while let closer = closers.last {
                if try take(UInt8(ascii: ",")) {
                    if closer == UInt8(ascii: "}") {
                        _ = try string()
                        try expect(UInt8(ascii: ":"), "':'")
                    }
                    break
                }
                try expect(closer, closer == UInt8(ascii: "}") ? "',' or '}'" : "',' or ']'")
                closers.removeLast()
            }
        } while !closers.isEmpty
    }

    /// Fails unless only white space is left.
    mutating func expectEnd() throws(CloudSyncError) {
        guard try peek() == nil else { throw damaged("more text after the end of the JSON value") }
    }

    /// The bytes up to the next newline (which is taken too); nil at the end.
    ///
    /// For formats that follow a JSON value with lines of their own.
    mutating func line() throws(CloudSyncError) -> [UInt8]? {
        var bytes: [UInt8] = []
        while true {
            if index == block.count {
                guard try refill() else { return bytes.isEmpty ? nil : bytes }
            }
            if let newline = block[index...].firstIndex(of: 0x0A) {
                bytes.append(contentsOf: block[index..<newline])
                index = newline + 1
                return bytes
            }
            bytes.append(contentsOf: block[index...])
            index = block.count
        }
    }

    private static let delimiters: Set<UInt8> = [0x20, 0x0A, 0x0D, 0x09, 0x2C, 0x5D, 0x7D, 0x3A]

    /// The next byte as it is (white space included), without taking it.
    private mutating func nextRaw() throws(CloudSyncError) -> UInt8? {
        if index == block.count { guard try refill() else { return nil } }
        return block[index]
    }

    private mutating func refill() throws(CloudSyncError) -> Bool {
        while let next = try source.nextBlock() {
            consumed += block.count
            block = next
            index = 0
            if !block.isEmpty { return true }
        }
        consumed += index
        block = []
        index = 0
        return false
    }

    /// Decodes the escape after a backslash into `scratch`.
    private mutating func escape() throws(CloudSyncError) {
        guard let byte = try nextRaw() else { throw damaged("the text ends inside an escape") }
        index += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scratch.append(byte)
        case UInt8(ascii: "b"): scratch.append(0x08)
        case UInt8(ascii: "f"): scratch.append(0x0C)
        case UInt8(ascii: "n"): scratch.append(0x0A)
        case UInt8(ascii: "r"): scratch.append(0x0D)
        case UInt8(ascii: "t"): scratch.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try hex4()
            if (0xD800...0xDBFF).contains(scalar) {
                guard try nextRaw() == UInt8(ascii: "\\") else { throw damaged("a lone surrogate escape") }
                index += 1
                guard try nextRaw() == UInt8(ascii: "u") else { throw damaged("a lone surrogate escape") }
                index += 1
                let low = try hex4()
                guard (0xDC00...0xDFFF).contains(low) else { throw damaged("a lone surrogate escape") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(scalar) {
                throw damaged("a lone surrogate escape")
            }
            guard let character = Unicode.Scalar(scalar) else { throw damaged("an invalid \\u escape") }
            scratch.append(contentsOf: UTF8.encode(character)!)
        default:
            throw damaged("an unknown escape")
        }
    }

    private mutating func hex4() throws(CloudSyncError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let byte = try nextRaw() else { throw damaged("the text ends inside a \\u escape") }
            index += 1
            let digit: UInt8
            switch byte {
            case 0x30...0x39: digit = byte - 0x30
            case 0x41...0x46: digit = byte - 0x41 + 10
            case 0x61...0x66: digit = byte - 0x61 + 10
            default: throw damaged("a \\u escape that is not four hex digits")
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }
}

/// The blocks of a file, 256 KB at a time.
final class FileByteBlocks: ByteBlockSource {
    private let descriptor: Int32
    private let path: String

    /// Opens `path`; nil when it cannot be opened (`errno` says why).
    init?(_ path: String) {
        descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        self.path = path
    }

    deinit { close(descriptor) }

    func nextBlock() throws(CloudSyncError) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: 256 * 1024)
        while true {
            let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw CloudSyncError(.config, "cannot read \(path): \(describe(errno: errno, path: path))")
            }
            guard count > 0 else { return nil }
            bytes.removeSubrange(count...)
            return bytes
        }
    }
}

/// Bytes already in memory, as one block.
final class MemoryByteBlocks: ByteBlockSource {
    private var bytes: [UInt8]?

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func nextBlock() throws(CloudSyncError) -> [UInt8]? {
        defer { bytes = nil }
        return bytes
    }
}
