internal import CSSL
import Glibc

/// The server side of TLS over one accepted socket: plaintext in and out for ``SocketConnection``, ciphertext on the
/// socket.
///
/// OpenSSL works on two memory buffers here, never on the socket: the stream moves ciphertext between them and the
/// socket itself, with `recv` and `send(MSG_NOSIGNAL)` as the plain connection does, so a peer that vanishes is an
/// error and not SIGPIPE, and the socket's timeouts and ``LoopbackHTTPServer/stop()``'s shutdown end a wait as they
/// do without TLS. Used by its connection's thread only.
final class TLSStream {
    private let fd: Int32
    private let session: OpaquePointer
    /// Ciphertext received from the peer, for OpenSSL to read.
    private let incoming: OpaquePointer
    /// Ciphertext OpenSSL wrote, for the peer.
    private let outgoing: OpaquePointer
    private var cipherText = [UInt8](repeating: 0, count: 32 * 1024)

    /// A session on `fd` for `identity`, before its handshake; nil when OpenSSL cannot allocate one.
    init?(fd: Int32, identity: TLSIdentity) {
        guard let session = SSL_new(identity.context) else { return nil }
        guard let incoming = BIO_new(BIO_s_mem()), let outgoing = BIO_new(BIO_s_mem()) else {
            SSL_free(session)
            return nil
        }
        // The session owns both buffers from here, and frees them with itself.
        SSL_set_bio(session, incoming, outgoing)
        SSL_set_accept_state(session)
        self.fd = fd
        self.session = session
        self.incoming = incoming
        self.outgoing = outgoing
    }

    deinit { SSL_free(session) }

    /// Runs the handshake to its end; false when it failed: the client refused the certificate (it sends an alert),
    /// spoke something else than TLS, went silent past the idle timeout, or closed.
    func handshake() -> Bool {
        while true {
            ERR_clear_error()
            let result = SSL_do_handshake(session)
            let error = SSL_get_error(session, result)
            // Even a failure may leave an alert to send.
            guard flush(), result != 1 else { return result == 1 }
            guard error == SSL_ERROR_WANT_READ, receiveCipherText() else {
                ERR_clear_error()
                return false
            }
        }
    }

    /// Reads plaintext into `buffer`, blocking until some has arrived; the count, or 0 at the end of the stream
    /// (`close_notify`, the socket closed or shut down) or on any error.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        while true {
            ERR_clear_error()
            let count = SSL_read(session, buffer.baseAddress, Int32(clamping: buffer.count))
            let error = SSL_get_error(session, count)
            // Reading may answer the peer (a key update) or send what TLS 1.3 sends after the handshake.
            _ = flush()
            if count > 0 { return Int(count) }
            guard error == SSL_ERROR_WANT_READ, receiveCipherText() else {
                ERR_clear_error()
                return 0
            }
        }
    }

    /// Encrypts and sends every byte; false when the peer is gone or the session failed.
    func write(_ bytes: [UInt8]) -> Bool {
        var written = 0
        while written < bytes.count {
            ERR_clear_error()
            let count = bytes.withUnsafeBytes { raw in
                // A record at a time at most, so the outgoing buffer stays small however big the body.
                SSL_write(session, raw.baseAddress! + written, Int32(min(bytes.count - written, 16 * 1024)))
            }
            guard count > 0, flush() else {
                ERR_clear_error()
                return false
            }
            written += Int(count)
        }
        return true
    }

    /// Tells the peer the stream ends (`close_notify`), so it can tell an answer's end from a cut connection; best
    /// effort, as the peer may be gone.
    func close() {
        ERR_clear_error()
        _ = SSL_shutdown(session)
        _ = flush()
        ERR_clear_error()
    }

    /// Moves what arrived on the socket into ``incoming``; false at the end of the stream or on an error.
    private func receiveCipherText() -> Bool {
        while true {
            let count = cipherText.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return false }
            return cipherText.withUnsafeBytes { BIO_write(incoming, $0.baseAddress!, Int32(count)) } == Int32(count)
        }
    }

    /// Sends everything in ``outgoing``; false when the socket refused it.
    private func flush() -> Bool {
        while BIO_ctrl_pending(outgoing) > 0 {
            let count = cipherText.withUnsafeMutableBytes {
                BIO_read(outgoing, $0.baseAddress!, Int32(clamping: $0.count))
            }
            guard count > 0, sendAll(fd, cipherText[..<Int(count)]) else { return false }
        }
        return true
    }
}
