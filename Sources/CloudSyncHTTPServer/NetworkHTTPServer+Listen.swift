import Glibc

/// The listening socket, bound before libmicrohttpd is given it.
extension NetworkHTTPServer {
    /// A listening socket bound to `address:port`, close-on-exec, and the port it got.
    static func listen(address: String, port: UInt16) throws(NetworkHTTPServerError) -> (Int32, UInt16) {
        var storage = sockaddr_storage()
        var length: socklen_t
        let family: Int32
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, address, &v4) == 1 {
            family = AF_INET
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            withUnsafeMutableBytes(of: &storage) { raw in
                let socket = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self)
                socket.pointee.sin_family = sa_family_t(AF_INET)
                socket.pointee.sin_port = port.bigEndian
                socket.pointee.sin_addr = v4
            }
        } else if inet_pton(AF_INET6, address, &v6) == 1 {
            family = AF_INET6
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            withUnsafeMutableBytes(of: &storage) { raw in
                let socket = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self)
                socket.pointee.sin6_family = sa_family_t(AF_INET6)
                socket.pointee.sin6_port = port.bigEndian
                socket.pointee.sin6_addr = v6
            }
        } else {
            throw NetworkHTTPServerError(
                message: "'\(address)' is not an IPv4 or IPv6 address (such as 127.0.0.1 or ::1)", code: EINVAL)
        }
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw NetworkHTTPServerError(message: "socket: \(describe(errno))", code: errno) }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) }
        }
        guard bound == 0, Glibc.listen(fd, 128) == 0 else {
            let code = errno
            close(fd)
            throw NetworkHTTPServerError(
                message: "bind \(authority(address, port: port)): \(describe(code))", code: code)
        }
        let named = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else {
            let code = errno
            close(fd)
            throw NetworkHTTPServerError(message: "getsockname: \(describe(code))", code: code)
        }
        // sin_port and sin6_port sit at the same offset, just after the family.
        let boundPort = withUnsafeBytes(of: &storage) { raw in
            UInt16(bigEndian: raw.load(fromByteOffset: MemoryLayout<sa_family_t>.size, as: UInt16.self))
        }
        return (fd, boundPort)
    }
}

private func describe(_ code: Int32) -> String { String(cString: strerror(code)) }
