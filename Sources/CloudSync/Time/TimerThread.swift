import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The system clock's timers: one thread sleeping until the earliest due time in a heap.
///
/// Every provider call the store makes arms a deadline and nearly every one is cancelled a moment later, so arming
/// and cancelling must cost next to nothing: both only take a lock, and neither wakes the thread unless the new timer
/// is due before the one it sleeps towards. A cancelled timer stays in the heap until it comes up (or until cancelled
/// ones are the majority, when the heap is rebuilt without them), so the thread wakes at most once for each.
///
/// Actions run on this thread, one at a time, and must be short: they resume a task or hand work elsewhere.
final class TimerThread: @unchecked Sendable {
    static let shared = TimerThread()

    /// One armed timer; a nil action marks it cancelled or fired.
    final class Entry: @unchecked Sendable {
        let due: UInt64
        fileprivate var action: (@Sendable () -> Void)?
        fileprivate init(due: UInt64, action: @escaping @Sendable () -> Void) {
            self.due = due
            self.action = action
        }
    }

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let wake = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// A min-heap on `due`.
    private var heap: [Entry] = []
    private var cancelledInHeap = 0
    /// The due time the thread sleeps towards (`UInt64.max` while it waits for a first timer).
    private var sleepingUntil = UInt64.max
    private var started = false

    /// A timer thread of its own; the system clock shares ``shared``.
    ///
    /// The thread starts with the first timer and lives as long as the process.
    init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(wake, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    /// Now on the monotonic clock, in nanoseconds.
    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    /// Runs `action` once `delay` has passed, unless the returned entry is cancelled first.
    func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> Entry {
        let entry = Entry(due: Self.due(after: delay), action: action)
        pthread_mutex_lock(mutex)
        if !started {
            started = true
            let thread = Thread { [self] in run() }
            thread.name = "cloudsync.timers"
            thread.start()
        }
        push(entry)
        if entry.due < sleepingUntil { pthread_cond_signal(wake) }
        pthread_mutex_unlock(mutex)
        return entry
    }

    /// Stops `entry` from firing; harmless once it has fired.
    func cancel(_ entry: Entry) {
        pthread_mutex_lock(mutex)
        if entry.action != nil {
            entry.action = nil
            cancelledInHeap += 1
            if cancelledInHeap > 1024, cancelledInHeap > heap.count / 2 { dropCancelled() }
        }
        pthread_mutex_unlock(mutex)
    }

    /// The number of timers in the heap, cancelled ones included, for tests.
    var pendingCount: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return heap.count
    }

    private static func due(after delay: Duration) -> UInt64 {
        let (seconds, attoseconds) = delay.components
        guard seconds >= 0, attoseconds >= 0 else { return now() }
        guard seconds < Int64(UInt64.max / 2_000_000_000) else { return UInt64.max - 1 }
        return now() + UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }

    private func run() {
        pthread_mutex_lock(mutex)
        while true {
            while let top = heap.first, top.action == nil {
                popTop()
                cancelledInHeap -= 1
            }
            guard let top = heap.first else {
                sleepingUntil = UInt64.max
                pthread_cond_wait(wake, mutex)
                continue
            }
            if top.due <= Self.now() {
                popTop()
                let action = top.action
                top.action = nil
                pthread_mutex_unlock(mutex)
                action?()
                pthread_mutex_lock(mutex)
                continue
            }
            sleepingUntil = top.due
            var until = timespec(
                tv_sec: Int(top.due / 1_000_000_000), tv_nsec: Int(top.due % 1_000_000_000))
            pthread_cond_timedwait(wake, mutex, &until)
        }
    }

    // MARK: The heap (call with the mutex held)

    private func push(_ entry: Entry) {
        heap.append(entry)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].due < heap[parent].due else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private func popTop() {
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        siftDown(from: 0)
    }

    private func siftDown(from start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count, heap[left].due < heap[smallest].due { smallest = left }
            if right < heap.count, heap[right].due < heap[smallest].due { smallest = right }
            if smallest == parent { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }

    private func dropCancelled() {
        heap.removeAll { $0.action == nil }
        cancelledInHeap = 0
        for index in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(from: index) }
    }
}
