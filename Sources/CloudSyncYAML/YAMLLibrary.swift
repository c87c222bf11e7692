internal import CYAML

/// The libyaml this process runs with.
package enum YAMLLibrary {
    /// Its version, as the loaded library says (`yaml_get_version_string()`): `0.2.5`.
    package static var version: String { String(cString: yaml_get_version_string()) }
}
