import CloudSync
import Foundation

/// Keeps a copy of every run report the suite produces, so `scripts/run-tests.py` can check them all against
/// `schemas/report.schema.json` with check-jsonschema once the tests have ended.
///
/// Collection is on when `CLOUDSYNC_COLLECT_REPORTS` names a directory (the test runner sets it); otherwise every
/// call does nothing. Reports are found in two places: files left in a ``TemporaryDirectory`` when it is removed,
/// and what `cloudsync run … --report -` printed (``ProcessRunner``). Copies are named by a digest of their
/// content, so the same report kept twice is one file.
public enum ReportCollection {
    /// The directory copies go to; nil when collection is off.
    public static let directory: String? = {
        guard let path = ProcessInfo.processInfo.environment["CLOUDSYNC_COLLECT_REPORTS"], !path.isEmpty else {
            return nil
        }
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }()

    /// Reports are files of a few kilobytes to a few megabytes; anything larger is not one.
    static let largestReport = 16 << 20

    /// Keeps `text` when it is a run report.
    public static func keep(text: String) {
        guard directory != nil else { return }
        keep(data: Data(text.utf8))
    }

    /// Keeps every run report among the `.json` files under `root`, before the directory is removed.
    public static func keepReports(under root: String) {
        guard directory != nil, let walker = FileManager.default.enumerator(atPath: root) else { return }
        for case let relative as String in walker where relative.hasSuffix(".json") {
            let path = root + "/" + relative
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
                attributes[.type] as? FileAttributeType == .typeRegular,
                let size = attributes[.size] as? Int, size <= largestReport,
                let data = FileManager.default.contents(atPath: path)
            else { continue }
            keep(data: data)
        }
    }

    /// Whether `arguments` ask `cloudsync run` to print its report on standard output.
    public static func printsReport(_ arguments: [String]) -> Bool {
        arguments.first == "run"
            && zip(arguments, arguments.dropFirst()).contains { $0 == "--report" && $1 == "-" }
    }

    /// A report is a JSON object naming its run and its jobs; anything else (metrics, exports, fixtures) is not.
    private static func keep(data: Data) {
        guard let directory, data.count <= largestReport,
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            object["runId"] != nil, object["jobs"] != nil
        else { return }
        // Named by the digest the sync snapshot uses: the same report kept twice is one file.
        let name = directory + "/" + SyncFingerprint.digest(of: String(decoding: data, as: UTF8.self)) + ".json"
        guard !FileManager.default.fileExists(atPath: name) else { return }
        // Written beside, then renamed: the checker never sees half a copy, and two tests keeping one report agree.
        let partial = name + ".\(UUID().uuidString).partial"
        guard FileManager.default.createFile(atPath: partial, contents: data) else { return }
        if rename(partial, name) != 0 { unlink(partial) }
    }
}
