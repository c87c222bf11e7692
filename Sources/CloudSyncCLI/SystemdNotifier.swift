import Foundation
import Glibc

/// Tells systemd how a `Type=notify` service is doing (`READY=1`, `RELOADING=1`, `STOPPING=1`).
///
/// As `sd_notify(3)` does, without libsystemd: one datagram to the socket `NOTIFY_SOCKET` names. Does nothing when it
/// names none.
struct SystemdNotifier: Sendable {
    private let socketPath: String?

    init(environment: [String: String]) {
        socketPath = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Sends `state` (newline-separated assignments); failures are ignored, as systemd's own helper allows.
    func send(_ state: String) {
        guard let socketPath else { return }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        // `@name` is a socket in the abstract namespace: its name starts with a zero byte.
        var path = Array(socketPath.utf8)
        if path.first == UInt8(ascii: "@") { path[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.count < capacity else { return }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in path.enumerated() { buffer[index] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count)
        let bytes = Array(state.utf8)
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                sendto(fd, bytes, bytes.count, Int32(MSG_NOSIGNAL), pointer, length)
            }
        }
    }
}
