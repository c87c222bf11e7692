internal import CSQLite

/// The SQLite library this process runs with.
package enum SQLiteLibrary {
    /// Its version, as the loaded library says (`sqlite3_libversion()`, not the header's): `3.40.1`.
    package static var version: String { String(cString: sqlite3_libversion()) }
}
