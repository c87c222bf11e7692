import CloudSync
import CloudSyncHTTP
import Foundation
import Testing

@testable import CloudSyncHTTPServer

/// The loopback server's request parser without a socket (``readRequests(from:pieceSize:limits:)``): hostile sizes
/// refused with their status and never trusted in arithmetic, and seeded streams of valid requests, cut at every
/// kind of boundary, read back exactly.
@Suite struct HTTPRequestParserTests {
    static let limits = HTTPRequestLimits(headBytes: 16 * 1024, bodyBytes: 64 * 1024)

    static func refusal(_ text: String, pieceSize: Int = 4096) -> HTTPRequestRefusal? {
        readRequests(from: Array(text.utf8), pieceSize: pieceSize, limits: limits).refusal
    }

    @Test func leadingZerosInAChunkSizeAreOnlyZerosAndAnOverlongLineIsRefused() {
        let zeros = String(repeating: "0", count: 40)
        let text = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\(zeros)3\r\nabc\r\n\(zeros)\r\n\r\n"
        let (requests, refusal) = readRequests(from: Array(text.utf8), limits: Self.limits)
        #expect(refusal == nil)
        #expect(requests.first.map { Array($0.body) } == Array("abc".utf8))
        let long =
            "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + String(repeating: "0", count: 2000) + "1\r\na"
        #expect(Self.refusal(long)?.status == 400)
    }

    @Test(arguments: [
        // The issue's request, and its neighbours: sizes that overflow an Int once 2 is added, or do not fit one.
        ("7fffffffffffffff", 413), ("7ffffffffffffffe", 413), ("ffffffffffffffffff", 413), ("10001", 413),
        ("-1", 400), ("+5", 400), ("", 400), ("zz", 400),
    ])
    func hostileChunkSizesAreRefusedNotTrusted(_ size: String, _ status: Int) {
        let text = "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\(size)\r\nabc"
        #expect(Self.refusal(text)?.status == status, "\(size)")
    }

    @Test(arguments: [
        ("Content-Length: 1610612736\r\n", 413), ("Content-Length: 99999999999999999999999999\r\n", 413),
        ("Content-Length: 65537\r\n", 413), ("Content-Length: -1\r\n", 400), ("Content-Length: +3\r\n", 400),
        ("Content-Length: 3\r\nContent-Length: 4\r\n", 400),
        ("Content-Length: 3\r\nTransfer-Encoding: chunked\r\n", 400),
        ("Transfer-Encoding: gzip\r\n", 501), ("Transfer-Encoding: gzip, chunked\r\n", 501),
        ("X-Pad: \(String(repeating: "a", count: 17000))\r\n", 431),
    ])
    func headsThatSayTooMuchOrContradictThemselvesAreRefused(_ fields: String, _ status: Int) {
        let text = "POST /x HTTP/1.1\r\nHost: x\r\n\(fields)\r\nabc"
        #expect(Self.refusal(text)?.status == status, "\(fields.prefix(60))")
    }

    @Test func aHeadThatNeverEndsIsRefusedAtTheLimitWhateverThePieces() {
        let text = "GET / HTTP/1.1\r\nX-Pad: " + String(repeating: "a", count: 200_000)
        for piece in [7, 4096, 65536] {
            #expect(Self.refusal(text, pieceSize: piece)?.status == 431, "pieces of \(piece)")
        }
        #expect(Self.refusal(String(text.prefix(20_000)), pieceSize: 1)?.status == 431, "a byte at a time")
    }

    @Test func chunksThatAddUpPastTheLimitAreRefusedAtTheChunkThatCrossesIt() {
        var text = "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        for _ in 0..<3 { text += "8000\r\n" + String(repeating: "a", count: 0x8000) + "\r\n" }
        text += "0\r\n\r\n"
        #expect(Self.refusal(text)?.status == 413)
    }

    @Test func trailersPastTheHeadLimitAreRefused() {
        let trailer = "X-T: " + String(repeating: "t", count: 1000) + "\r\n"
        let text =
            "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n"
            + String(repeating: trailer, count: 40) + "\r\n"
        #expect(Self.refusal(text)?.status == 431)
    }

    /// A request as the model knows it, and the bytes a client could send for it.
    struct Sent {
        var method: String
        var target: String
        var headers: [(String, String)]
        var body: [UInt8]
        var chunks: [Int]?

        func bytes() -> [UInt8] {
            var head = "\(method) \(target) HTTP/1.1\r\nHost: x\r\n"
            for (name, value) in headers { head += "\(name): \(value)\r\n" }
            if let chunks {
                head += "Transfer-Encoding: chunked\r\n\r\n"
                var bytes = Array(head.utf8)
                var offset = 0
                for size in chunks {
                    bytes += Array((String(size, radix: 16) + (size % 3 == 0 ? ";ext=1" : "") + "\r\n").utf8)
                    bytes += body[offset..<offset + size] + [13, 10]
                    offset += size
                }
                bytes += Array("0\r\n\r\n".utf8)
                return bytes
            }
            head += "Content-Length: \(body.count)\r\n\r\n"
            return Array(head.utf8) + body
        }
    }

    @Test(arguments: 1...12)
    func seededStreamsOfValidRequestsAreReadBackExactly(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        func number(_ bound: Int) -> Int { Int.random(in: 0..<bound, using: &random) }
        var sent: [Sent] = []
        for _ in 0..<(1 + number(8)) {
            let size = [0, 1, 2, 100, 4095, 4096, 4097, 65536][number(8)]
            let body = (0..<size).map { _ in UInt8(number(256)) }
            var chunks: [Int]?
            if number(2) == 0 {
                var left = size
                var cut: [Int] = []
                while left > 0 {
                    let piece = min(left, 1 + number(5000))
                    cut.append(piece)
                    left -= piece
                }
                chunks = cut
            }
            let path =
                "/" + (0..<(1 + number(4))).map { _ in ["a", "b%20c", "d.e", "%2F"][number(4)] }.joined(separator: "/")
            let query = number(2) == 0 ? "" : "?k=\(number(100))&v=x%26y"
            sent.append(
                Sent(
                    method: ["GET", "PUT", "POST", "DELETE"][number(4)], target: path + query,
                    headers: [("X-N", "\(number(1000))"), ("X-Empty", "")], body: body, chunks: chunks))
        }
        let stream = sent.flatMap { $0.bytes() }
        for piece in [1, 3, 1000, 65536] where piece > 1 || stream.count < 300_000 {
            let (requests, refusal) = readRequests(from: stream, pieceSize: piece, limits: Self.limits)
            #expect(refusal == nil, "seed \(seed), pieces of \(piece): \(String(describing: refusal))")
            #expect(requests.count == sent.count, "seed \(seed), pieces of \(piece)")
            for (read, model) in zip(requests, sent) {
                #expect(read.method == model.method)
                #expect(read.target == model.target)
                #expect(read.path == String(model.target.prefix { $0 != "?" }))
                #expect(Array(read.body) == model.body, "seed \(seed): a body of \(model.body.count) bytes")
                #expect(read.headers["X-N"] == model.headers[0].1)
            }
        }
    }
}
