internal import CSodium

/// The libsodium this process runs with.
package enum SodiumLibrary {
    /// Its version, as the loaded library says (`sodium_version_string()`): `1.0.18`.
    package static var version: String { String(cString: sodium_version_string()) }
}
