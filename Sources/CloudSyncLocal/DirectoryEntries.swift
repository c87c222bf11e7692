#if canImport(Glibc)
    import Glibc
#endif

/// Reading a directory's entries as the kernel returns them: each name's bytes and its type, in place.
///
/// Walks over every file of a directory provider's tree (each listing, each open's search for stale temporary files)
/// read only names: no `String` is built for a name that is skipped, and no `lstat` is asked where the directory
/// records the entry's type (`d_type`; a file system that records none answers ``unknown``).
enum DirectoryEntries {
    static let unknown = UInt8(DT_UNKNOWN)
    static let directory = UInt8(DT_DIR)
    static let regularFile = UInt8(DT_REG)

    private static let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
    private static let typeOffset = MemoryLayout<dirent>.offset(of: \dirent.d_type)!

    /// Calls `body` with the name (without its NUL) and the recorded type (`DT_*`) of each entry of `directory` but
    /// `.` and `..`, and the directory's descriptor (for `fstatat`); returns 0, or the `errno` of opening the
    /// directory.
    ///
    /// The name is valid only during the call.
    static func forEach(
        in directory: String,
        _ body: (_ name: UnsafeBufferPointer<UInt8>, _ type: UInt8, _ descriptor: Int32) throws -> Void
    ) rethrows -> Int32 {
        guard let stream = opendir(directory) else { return errno }
        defer { closedir(stream) }
        let descriptor = dirfd(stream)
        while let entry = readdir(stream) {
            // Read in place: copying `entry.pointee` reads a whole `dirent`, past the end of a short record that ends
            // the kernel's buffer (a crash when that is the end of a mapped page).
            let record = UnsafeRawPointer(entry)
            let start = record.advanced(by: nameOffset).assumingMemoryBound(to: UInt8.self)
            let name = UnsafeBufferPointer(
                start: start, count: strlen(UnsafeRawPointer(start).assumingMemoryBound(to: CChar.self)))
            if name.first == UInt8(ascii: "."), name.count == 1 || (name.count == 2 && name[1] == UInt8(ascii: ".")) {
                continue
            }
            try body(name, record.load(fromByteOffset: typeOffset, as: UInt8.self), descriptor)
        }
        return 0
    }
}
