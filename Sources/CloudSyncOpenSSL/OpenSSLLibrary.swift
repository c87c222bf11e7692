internal import CCrypto

/// The OpenSSL libcrypto this process runs with.
package enum OpenSSLLibrary {
    /// Its version, as the loaded library says (`OpenSSL_version(OPENSSL_VERSION_STRING)`): `3.0.19`.
    package static var version: String {
        OpenSSL_version(OPENSSL_VERSION_STRING).map { String(cString: $0) } ?? "unknown"
    }
}
