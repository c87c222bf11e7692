import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A file-system error as a sentence: the OS's reason, never a Foundation error dump.
///
/// Foundation wraps the OS's error (on Linux, sometimes as a Swift error rather than an `NSError`); the sentence
/// comes from that errno. When a part of the path is a file where a directory should be, it names that file.
package func describeFileError(_ error: any Error) -> String {
    let nsError = error as NSError
    let path = nsError.userInfo[NSFilePathErrorKey] as? String
    if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? any Error {
        let posix = underlying as NSError
        if posix.domain == NSPOSIXErrorDomain { return describe(errno: Int32(posix.code), path: path) }
    }
    if nsError.domain == NSPOSIXErrorDomain { return describe(errno: Int32(nsError.code), path: path) }
    switch CocoaError.Code(rawValue: nsError.code) {
    case .fileNoSuchFile, .fileReadNoSuchFile: return "no such file or directory"
    case .fileWriteNoPermission, .fileReadNoPermission: return "permission denied"
    case .fileWriteOutOfSpace: return "no space left on the device"
    case .fileWriteVolumeReadOnly: return "the file system is read-only"
    case .fileWriteFileExists:
        if let path, let file = fileInTheWay(of: path) { return "\(file) is a file, not a directory" }
        return "a file is in the way"
    default:
        if let path, let file = fileInTheWay(of: path) { return "\(file) is a file, not a directory" }
        return "the file system refused it (error \(nsError.code))"
    }
}

/// An errno as a sentence about `path`, naming the file in the way when a part of the path is not a directory.
package func describe(errno code: Int32, path: String?) -> String {
    switch code {
    case ENOTDIR:
        if let path, let file = fileInTheWay(of: path) { return "\(file) is a file, not a directory" }
        return "a part of the path is a file, not a directory"
    case ENOENT: return "no such file or directory"
    case EACCES, EPERM: return "permission denied"
    case ENOSPC: return "no space left on the device"
    case EROFS: return "the file system is read-only"
    case EEXIST:
        if let path, let file = fileInTheWay(of: path) { return "\(file) is a file, not a directory" }
        return "a file is in the way"
    default: return String(cString: strerror(code))
    }
}

/// The nearest existing one of `path` and its ancestors, when it is not a directory.
private func fileInTheWay(of path: String) -> String? {
    var candidate = path
    while !candidate.isEmpty, candidate != "/" {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: candidate, isDirectory: &isDirectory) {
            return isDirectory.boolValue ? nil : candidate
        }
        candidate = (candidate as NSString).deletingLastPathComponent
    }
    return nil
}
