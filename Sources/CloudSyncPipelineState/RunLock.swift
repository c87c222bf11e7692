import CloudSync
import CloudSyncPipeline
import Foundation

/// One command changing a pipeline's state at a time: an advisory lock (`flock`) on `run.lock` in the state
/// directory, held through an open descriptor for as long as the command runs.
///
/// The kernel drops the lock when the descriptor closes, however the process ends (a crash, SIGKILL), so a lock is
/// never stale and nothing is ever taken over: whether the file exists, is empty or names some process says nothing
/// about whether it is held. The holder writes its process id into the file for the "already running" message only.
/// The file is never removed: a run removing it while another had it open would let a third create a new file and
/// lock that one too.
package final class RunLock: HeldRunLock {
    package enum Outcome {
        case acquired(RunLock)
        /// Another process holds the lock; its id when it has written it yet.
        case heldBy(Int32?)
    }

    let path: String
    private let descriptor: Protected<Int32>

    private init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = Protected(descriptor)
    }

    /// Takes the lock in `directory` without waiting, or says who holds it.
    package static func acquire(in directory: String) throws -> Outcome {
        let path = directory + "/run.lock"
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw CloudSyncError(.config, "cannot open the lock \(path): \(String(cString: strerror(errno)))")
        }
        let held: Outcome?
        do {
            held = try heldElsewhere(descriptor, path: path, mode: LOCK_EX)
        } catch {
            close(descriptor)
            throw error
        }
        if let held {
            close(descriptor)
            return held
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(descriptor, 0)
        _ = pid.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        return .acquired(RunLock(path: path, descriptor: descriptor))
    }

    /// Empties the file and closes the descriptor, which drops the lock; later calls do nothing.
    package func release() {
        descriptor.withLock { descriptor in
            guard descriptor >= 0 else { return }
            _ = ftruncate(descriptor, 0)
            close(descriptor)
            descriptor = -1
        }
    }

    /// Whether a process holds the lock in `directory`, and which when it has written its id.
    package static func holder(in directory: String) -> Outcome? {
        let path = directory + "/run.lock"
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        return (try? heldElsewhere(descriptor, path: path, mode: LOCK_SH)) ?? nil
    }

    /// Takes `mode` (`LOCK_EX` or `LOCK_SH`) on `descriptor` without waiting; nil when it was taken, else who holds
    /// the lock.
    ///
    /// A lock held with no process id written is retried for about a second: its holder is about to write its id, or
    /// has released it while a child process it was forking still shares the descriptor until that child execs.
    private static func heldElsewhere(_ descriptor: Int32, path: String, mode: Int32) throws -> Outcome? {
        var attempts = 0
        while flock(descriptor, mode | LOCK_NB) != 0 {
            let code = errno
            guard code == EWOULDBLOCK else {
                throw CloudSyncError(
                    .config,
                    "cannot lock \(path): \(String(cString: strerror(code))); the state directory must be on a file "
                        + "system that supports flock")
            }
            let holder = recordedHolder(path)
            attempts += 1
            if holder != nil || attempts >= 50 { return .heldBy(holder) }
        }
        return nil
    }

    /// The process id the holder wrote; it writes it just after taking the lock, so an empty file is read again
    /// for a moment before giving up on it.
    private static func recordedHolder(_ path: String) -> Int32? {
        for attempt in 0..<20 {
            let text = (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(
                in: .whitespacesAndNewlines)
            if let pid = text.flatMap({ Int32($0) }), pid > 0 { return pid }
            if attempt < 19 { usleep(1000) }
        }
        return nil
    }
}
