/// Keys that are different bytes but one `String` to Swift (canonically equivalent), and keys that differ only in
/// case: the spellings a store must keep apart, since every provider compares keys as bytes.
public enum KeyTwins {
    /// `café` precomposed and decomposed, and `Å` as U+00C5, as `A` + U+030A and as the Ångström sign U+212B:
    /// five keys, two `String` values.
    public static let canonical = ["caf\u{E9}", "cafe\u{301}", "\u{C5}", "A\u{30A}", "\u{212B}"]

    /// Keys whose case-insensitive order is not their byte order, as Drive's web interface sorts names.
    public static let caseMixed = ["Apple", "apple", "Banana", "banana", "Cherry", "cherry", "delta", "Echo"]

    /// A value naming `key` by its bytes, so a value read under the wrong spelling shows.
    public static func value(for key: String) -> String {
        "v-" + key.utf8.map { String($0, radix: 16) }.joined(separator: ".")
    }
}
