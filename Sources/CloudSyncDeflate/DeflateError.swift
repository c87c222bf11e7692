/// Why a DEFLATE stream could not be read: what was wrong, and the byte of the input where it was found.
public struct DeflateError: Error, Equatable, CustomStringConvertible {
    public let message: String
    public let offset: Int

    public var description: String { "\(message) (at byte \(offset))" }
}
