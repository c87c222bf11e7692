import Synchronization

/// What a ``NetworkHTTPServer`` did since it started, for `/metrics`: connections open now, requests answered, and
/// requests it refused by their head alone (by status), and connections it closed at the head deadline.
///
/// Refusals libmicrohttpd makes before the face sees a request (a head past the connection's memory, a malformed
/// request line) are not counted here.
public final class HTTPListenerCounters: Sendable {
    let open = Atomic<Int>(0)
    let answered = Atomic<Int>(0)
    let headTimeouts = Atomic<Int>(0)
    private let refused = Mutex<[Int: Int]>([:])
    /// Moves with every count, so a rendering of them can be kept until it does.
    let changes = Atomic<UInt64>(0)

    public init() {}

    /// Connections open now.
    public var openConnections: Int { open.load(ordering: .relaxed) }
    /// Requests handed to the responder and answered.
    public var requestsAnswered: Int { answered.load(ordering: .relaxed) }
    /// Connections closed because their head did not arrive in time.
    public var headDeadlineCloses: Int { headTimeouts.load(ordering: .relaxed) }
    /// Requests refused on their head (limits, overload, the responder's screen), by the status they got.
    public var refusedByStatus: [Int: Int] { refused.withLock { $0 } }
    /// A number that changes whenever any count does.
    public var version: UInt64 { changes.load(ordering: .relaxed) }

    func refuse(status: Int) {
        refused.withLock { $0[status, default: 0] += 1 }
        changes.add(1, ordering: .relaxed)
    }

    func count(_ counter: borrowing Atomic<Int>, by amount: Int = 1) {
        counter.add(amount, ordering: .relaxed)
        changes.add(1, ordering: .relaxed)
    }
}
