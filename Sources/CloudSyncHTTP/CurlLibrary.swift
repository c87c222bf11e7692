internal import CCurl

/// The libcurl this process runs with: the one FoundationNetworking's URLSession, and so every HTTP request of the
/// REST providers, goes through.
package enum CurlLibrary {
    /// Its version, as the loaded library says (`curl_version_info()`): `7.88.1`.
    package static var version: String {
        cloudsync_curl_version_info()?.pointee.version.map { String(cString: $0) } ?? "unknown"
    }

    /// The TLS library it was built with and its version (`OpenSSL/3.0.19`); `none` when it has none.
    package static var tlsVersion: String {
        cloudsync_curl_version_info()?.pointee.ssl_version.map { String(cString: $0) } ?? "none"
    }
}
