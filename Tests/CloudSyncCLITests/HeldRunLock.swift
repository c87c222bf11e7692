import Foundation

/// `nice`, to start the many child processes of the stress tests at a lower priority than the test process, so they
/// do not starve the tests running beside them.
let niced = "/usr/bin/nice"

/// A pipeline's run lock held by the test process, as a running `cloudsync run` holds it: `flock` on `run.lock`,
/// with this process's id written in the file; closing the descriptor (or the test process ending) drops it.
final class HeldRunLock {
    private var descriptor: Int32

    /// Takes the lock in the state directory `state`, creating the directory.
    init(state: String) throws {
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        descriptor = open(state + "/run.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0, flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: state + "/run.lock"])
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(descriptor, 0)
        _ = pid.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
    }

    /// Drops the lock.
    func release() {
        if descriptor >= 0 { close(descriptor) }
        descriptor = -1
    }

    deinit { release() }
}
