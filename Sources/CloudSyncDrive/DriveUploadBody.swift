import CloudSync
import Foundation

/// What an upload sends: a value's bytes in memory, or a file read a chunk at a time.
enum DriveUploadBody: Sendable {
    case data(Data)
    /// A file of `size` bytes, read by offset as chunks go out.
    case file(FilePartReader, size: Int)

    var count: Int {
        switch self {
        case .data(let data): return data.count
        case .file(_, let size): return size
        }
    }

    /// The bytes of `range`; `ERR_CONFIG` when a file ended sooner.
    func bytes(_ range: Range<Int>) throws(CloudSyncError) -> Data {
        switch self {
        case .data(let data):
            return range == 0..<data.count ? data : data.subdata(in: range)
        case .file(let reader, _):
            return try reader.read(at: Int64(range.lowerBound), count: range.count)
        }
    }
}
