import Foundation

/// The pipeline files `serve` was given: files as they are, directories as the `*.yaml` and `*.yml` files directly in
/// them, in name order.
enum PipelineFiles {
    /// The files found, and the paths that are neither a file nor a directory, with why.
    static func expand(_ paths: [String]) -> (files: [String], missing: [String: String]) {
        var files: [String] = []
        var missing: [String: String] = [:]
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                missing[path] = "\(path): no such file or directory"
                continue
            }
            guard isDirectory.boolValue else {
                files.append(path)
                continue
            }
            let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
            let base = path.hasSuffix("/") ? path : path + "/"
            files += names.filter { ($0.hasSuffix(".yaml") || $0.hasSuffix(".yml")) && !$0.hasPrefix(".") }.sorted()
                .map { base + $0 }
        }
        var seen = Set<String>()
        return (files.filter { seen.insert($0).inserted }, missing)
    }
}
