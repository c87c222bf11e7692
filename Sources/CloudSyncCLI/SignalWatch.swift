import Dispatch
import Glibc

/// Signals taken from their default action and handed to a handler for as long as a command lasts, then given back
/// to what they were: a program running the command in process (and every child it starts later) keeps its own
/// handling.
final class SignalWatch {
    private let watched: [(number: Int32, source: any DispatchSourceSignal, previous: sighandler_t?)]

    /// Starts sending `numbers` to `handler`, on a queue of Dispatch's, until ``restore()``.
    init(_ numbers: [Int32], _ handler: @escaping @Sendable (Int32) -> Void) {
        watched = numbers.map { number in
            let previous = signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { handler(number) }
            source.resume()
            return (number, source, previous)
        }
    }

    /// Gives every signal back its previous handling.
    func restore() {
        for (number, source, previous) in watched {
            source.cancel()
            signal(number, previous)
        }
    }
}
