import CloudSync
import CloudSyncLocal
import CloudSyncPipeline
import CloudSyncSodium
import Foundation

/// A saved plan on disk: JSON Lines, so a plan of a million keys is written and read a line at a time.
///
/// The first line is the `SavedPlanHeader`; then one line per key (``Line``), in the order the source listed them;
/// the last line is the ``Trailer``: how many keys take each action, and the SHA-256 of every byte before it, so a
/// plan cut short or edited is refused whole rather than applied in part. The file is created with mode 0600: it
/// names keys, and digests of values.
public enum SavedPlanFile {
    /// One key's line.
    public struct Line: Codable, Sendable, Equatable {
        public var key: String
        /// The destination name, when it differs from the key.
        public var target: String?
        public var action: String
        public var source: String?
        public var destination: String?
        public var value: String?
        /// A failing key's error code and message.
        public var code: String?
        public var message: String?

        /// The line of `plan`.
        public init(_ plan: PlannedCopy) {
            key = plan.key
            target = StoreKey(plan.target) == StoreKey(plan.key) ? nil : plan.target
            action = plan.action.rawValue
            source = plan.source
            destination = plan.destination
            value = plan.value
            code = plan.failure?.code.rawValue
            message = plan.failure?.message
        }

        /// The planned key this line records; nil for an action this version does not know.
        public var planned: PlannedCopy? {
            guard let action = PlannedCopy.Action(rawValue: action) else { return nil }
            return PlannedCopy(
                key: key, target: target ?? key, action: action, source: source, destination: destination,
                value: value,
                failure: code.map { CloudSyncError(ErrorCode(rawValue: $0), message ?? "", key: key) })
        }
    }

    /// The last line.
    public struct Trailer: Codable, Sendable, Equatable {
        /// Keys by action.
        public var counts: [String: Int]
        /// The SHA-256 of every byte before this line (hexadecimal).
        public var digest: String
    }

    /// The trailer's wrapping, so the last line is told from a key's line by its one field.
    struct End: Codable { var end: Trailer }

    /// Writes a plan: the header at once, keys as they are planned, the trailer on ``finish()``.
    public final class Writer {
        private let stream: OutputFileStream
        private var hasher = SHA256()
        private let encoder = JSONEncoder()
        /// Keys by action so far.
        public private(set) var counts: [String: Int] = [:]

        /// A plan at `path` starting with `header`; the file is replaced only when ``finish()`` commits it.
        public init(path: String, header: SavedPlanHeader) throws(CloudSyncError) {
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            stream = try OutputFileStream(path, mode: 0o600, what: "the plan")
            try line(header)
        }

        /// Adds `plans`, in order.
        public func add(_ plans: [PlannedCopy]) throws(CloudSyncError) {
            for plan in plans {
                counts[plan.action.rawValue, default: 0] += 1
                try line(Line(plan))
            }
        }

        /// Writes the trailer and commits the file.
        public func finish() throws(CloudSyncError) {
            let digest = Hex.encode(hasher.finalize())
            let end = End(end: Trailer(counts: counts, digest: digest))
            try stream.write(String(decoding: (try? encoder.encode(end)) ?? Data(), as: UTF8.self) + "\n")
            try stream.commit()
        }

        /// Leaves the file as it was (no plan is written).
        public func abandon() { stream.abandon() }

        private func line(_ value: some Encodable) throws(CloudSyncError) {
            var bytes = [UInt8]((try? encoder.encode(value)) ?? Data())
            bytes.append(0x0A)
            hasher.update(bytes)
            try stream.write(bytes)
        }
    }

    /// Reads a plan line by line.
    public final class Reader {
        /// The plan's header.
        public let header: SavedPlanHeader
        /// Its trailer, read and checked when the reader opened the file.
        public let trailer: Trailer
        private let path: String

        /// Opens the plan at `path`, reads it whole once to check its digest and format, and keeps its header and
        /// trailer; refused (`ERR_CONFIG`, naming the file and line) when it is not a whole plan of this format.
        public init(path: String) throws(CloudSyncError) {
            self.path = path
            var hasher = SHA256()
            var header: SavedPlanHeader?
            var trailer: Trailer?
            var number = 0
            let decoder = JSONDecoder()
            try Self.forEachLine(of: path) { line throws(CloudSyncError) in
                number += 1
                if trailer != nil { throw Self.refusal(path, "it goes on after its last line (line \(number))") }
                if number == 1 {
                    header = try Self.decode(SavedPlanHeader.self, line, with: decoder, path: path, line: number)
                    guard header?.format == SavedPlanHeader.format else {
                        throw Self.refusal(path, "its first line is not a cloudsync plan's header")
                    }
                    guard header?.version == SavedPlanHeader.version else {
                        throw Self.refusal(
                            path,
                            "it is a plan of format \(header?.version ?? 0), and this cloudsync reads format "
                                + "\(SavedPlanHeader.version); make the plan again with this cloudsync")
                    }
                } else if line.starts(with: Self.trailerStart) {
                    guard let end = try? decoder.decode(End.self, from: Data(line)) else {
                        throw Self.refusal(
                            path,
                            "its last line (\(number)) is incomplete, so it was cut short; make the "
                                + "plan again")
                    }
                    trailer = end.end
                    return
                }
                hasher.update(line)
                hasher.update([0x0A])
            }
            guard let header else { throw Self.refusal(path, "it is empty") }
            guard let trailer else {
                throw Self.refusal(path, "it has no last line, so it was cut short; make the plan again")
            }
            guard Hex.encode(hasher.finalize()) == trailer.digest else {
                throw Self.refusal(
                    path,
                    "its digest does not match its contents, so it was changed or damaged since "
                        + "it was made; make the plan again")
            }
            self.header = header
            self.trailer = trailer
        }

        /// Calls `body` with the planned keys, `batchSize` at a time, in the plan's order.
        public func forEachBatch(
            of batchSize: Int, _ body: ([PlannedCopy]) async throws(CloudSyncError) -> Void
        ) async throws(CloudSyncError) {
            var batch: [PlannedCopy] = []
            let lines = try LineReader(path)
            // The header is no key, and neither is the trailer, which the reader found last.
            _ = lines.next()
            var number = 1
            let decoder = JSONDecoder()
            while let line = lines.next() {
                number += 1
                if line.starts(with: Self.trailerStart) { break }
                let parsed = try Self.decode(Line.self, line, with: decoder, path: path, line: number)
                guard let planned = parsed.planned else {
                    throw Self.refusal(
                        path, "line \(number) has the action \(parsed.action), which this cloudsync does not know")
                }
                batch.append(planned)
                if batch.count == batchSize {
                    try await body(batch)
                    batch.removeAll(keepingCapacity: true)
                }
            }
            if !batch.isEmpty { try await body(batch) }
        }

        /// How the trailer's line starts, and no key's line does.
        private static let trailerStart = Array(#"{"end":"#.utf8)

        /// Line `number` of the plan at `path` as a `T`, decoded by `decoder` (one per pass over the file, not per
        /// line).
        private static func decode<T: Decodable>(
            _ type: T.Type, _ line: [UInt8], with decoder: JSONDecoder, path: String, line number: Int
        ) throws(CloudSyncError) -> T {
            do {
                return try decoder.decode(type, from: Data(line))
            } catch {
                throw refusal(path, "line \(number) is not what a plan holds there")
            }
        }

        static func refusal(_ path: String, _ why: String) -> CloudSyncError {
            CloudSyncError(.config, "\(path) is not a plan cloudsync can apply: \(why)")
        }

        /// Calls `body` with each line of the file at `path`, without its newline.
        static func forEachLine(of path: String, _ body: ([UInt8]) throws(CloudSyncError) -> Void)
            throws(CloudSyncError)
        {
            let lines = try LineReader(path)
            while let line = lines.next() { try body(line) }
        }
    }

    /// Calls `body` with each line of the plan at `path`, as text without its newline.
    public static func forEachLine(of path: String, _ body: (String) -> Void) throws(CloudSyncError) {
        try Reader.forEachLine(of: path) { body(String(decoding: $0, as: UTF8.self)) }
    }

    /// The lines of a file, one at a time, through stdio's buffer.
    final class LineReader {
        private let file: UnsafeMutablePointer<FILE>
        private var buffer: UnsafeMutablePointer<CChar>?
        private var capacity = 0

        init(_ path: String) throws(CloudSyncError) {
            guard let file = fopen(path, "r") else {
                throw CloudSyncError(.config, "the plan \(path) could not be read: \(String(cString: strerror(errno)))")
            }
            self.file = file
        }

        deinit {
            fclose(file)
            free(buffer)
        }

        /// The next line without its newline; nil at the end.
        func next() -> [UInt8]? {
            let length = getline(&buffer, &capacity, file)
            guard length >= 0, let buffer else { return nil }
            var count = length
            if count > 0, buffer[count - 1] == 0x0A { count -= 1 }
            return buffer.withMemoryRebound(to: UInt8.self, capacity: max(count, 1)) {
                Array(UnsafeBufferPointer(start: $0, count: count))
            }
        }
    }
}
