import CPostgres

/// The libpq this process runs with.
package enum PostgresLibrary {
    /// Its version, as the loaded library says (`PQlibVersion()`): `15.18`.
    ///
    /// libpq 10 and later number themselves major * 10000 + minor; earlier ones major * 10000 + minor * 100 + patch.
    package static var version: String {
        let number = Int(PQlibVersion())
        if number >= 100_000 { return "\(number / 10_000).\(number % 10_000)" }
        return "\(number / 10_000).\(number / 100 % 100).\(number % 100)"
    }
}
