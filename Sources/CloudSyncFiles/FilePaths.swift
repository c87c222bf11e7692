#if canImport(Glibc)
    import Glibc
#endif

/// The parts of a file's path the file writers need, and making a directory's entries durable.
package enum FilePaths {
    /// The directory `path` is in: `.` for a bare name, `/` for a name at the root.
    package static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// The last component of `path`: `path` itself when it has no `/`.
    package static func name(of path: String) -> String {
        path.lastIndex(of: "/").map { String(path[path.index(after: $0)...]) } ?? path
    }

    /// Syncs the directory `path` is in, so a name just created or renamed there survives a crash; a directory that
    /// cannot be opened is left as it is.
    package static func syncDirectory(of path: String) {
        let descriptor = open(directory(of: path), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        fsync(descriptor)
        close(descriptor)
    }
}
