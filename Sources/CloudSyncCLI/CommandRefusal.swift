/// Why a command refused what it was given (an option's value, a file it reads, a path it would create), in words for
/// its error line.
struct CommandRefusal: Error {
    let message: String
    init(_ message: String) { self.message = message }
}
