/// A value written to its temporary file, still open so it can be made durable.
struct DirectoryStagedFile: Sendable {
    let key: String
    let descriptor: Int32
    /// The directory the file goes in, opened without following links; closed with the file.
    let directoryDescriptor: Int32
    /// The temporary file's name in that directory; nil for an unnamed one (`O_TMPFILE`), named only once
    /// durable.
    let temporary: String?
    /// The directory the temporary file is in.
    let directory: String
    /// The key's file name in that directory.
    let name: String
    var target: String { directory + "/" + name }
    /// The directory holding `target`, plus the parent of every directory this write created.
    let touchedDirectories: [String]
}
