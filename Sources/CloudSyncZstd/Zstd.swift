import CZstd

/// libzstd's face: a buffer compressed whole into one zstd frame, and frames decompressed up to a bound.
public enum Zstd {
    /// The level objects are compressed at unless told otherwise: zstd's own default.
    public static let defaultLevel: Int32 = 3

    /// The levels `compress` takes: zstd's negative ("fast") levels up to its strongest.
    public static var levels: ClosedRange<Int32> { ZSTD_minCLevel()...ZSTD_maxCLevel() }

    /// libzstd's version, such as `1.5.4`.
    public static var version: String { String(cString: ZSTD_versionString()) }

    /// `bytes` as one zstd frame at `level` (clamped to ``levels``), with the content size in its header.
    public static func compress(_ bytes: UnsafeRawBufferPointer, level: Int32 = defaultLevel) -> [UInt8] {
        let level = min(max(level, levels.lowerBound), levels.upperBound)
        let bound = ZSTD_compressBound(bytes.count)
        var frame = [UInt8](repeating: 0, count: bound)
        let written = frame.withUnsafeMutableBytes { output in
            ZSTD_compress(output.baseAddress, bound, bytes.baseAddress, bytes.count, level)
        }
        // A destination of compressBound's size cannot be too small, and the context is zstd's own.
        precondition(ZSTD_isError(written) == 0, "zstd could not compress: \(errorName(written))")
        frame.removeSubrange(written...)
        return frame
    }

    /// `bytes` as one zstd frame at `level`.
    public static func compress(_ bytes: [UInt8], level: Int32 = defaultLevel) -> [UInt8] {
        bytes.withUnsafeBytes { compress($0, level: level) }
    }

    /// What the zstd frames in `bytes` hold; refused when they are not whole zstd frames or hold more than
    /// `maxOutputBytes`, before more than that is allocated.
    public static func decompress(_ bytes: UnsafeRawBufferPointer, maxOutputBytes: Int) throws(ZstdError) -> [UInt8] {
        let declared = ZSTD_getFrameContentSize(bytes.baseAddress, bytes.count)
        if declared == Zstd.contentSizeError { throw .notZstd }
        if declared != Zstd.contentSizeUnknown, declared > UInt64(maxOutputBytes) {
            throw .tooLarge(limit: maxOutputBytes)
        }
        return try ZstdStream.decompress(bytes, maxOutputBytes: maxOutputBytes, expected: declared)
    }

    /// What the zstd frames in `bytes` hold, at most `maxOutputBytes`.
    public static func decompress(_ bytes: [UInt8], maxOutputBytes: Int) throws(ZstdError) -> [UInt8] {
        try bytes.withUnsafeBytes { buffer in
            Result { () throws(ZstdError) in try decompress(buffer, maxOutputBytes: maxOutputBytes) }
        }.get()
    }

    static func errorName(_ code: Int) -> String { String(cString: ZSTD_getErrorName(code)) }

    /// `ZSTD_CONTENTSIZE_UNKNOWN` and `ZSTD_CONTENTSIZE_ERROR`, macros Swift does not import.
    static let contentSizeUnknown = UInt64.max
    static let contentSizeError = UInt64.max - 1
}

/// Why zstd data was refused.
public enum ZstdError: Error, Equatable, CustomStringConvertible {
    /// The bytes do not start with a zstd frame.
    case notZstd
    /// A frame is damaged or cut short; zstd's words for it.
    case damaged(String)
    /// The frames hold more than the bound given.
    case tooLarge(limit: Int)

    public var description: String {
        switch self {
        case .notZstd: "not zstd data"
        case .damaged(let reason): "damaged zstd data (\(reason))"
        case .tooLarge(let limit): "zstd data that holds more than \(limit) bytes"
        }
    }
}
