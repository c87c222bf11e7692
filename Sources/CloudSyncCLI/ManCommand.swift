import CloudSync
import CloudSyncPipeline
import CloudSyncRunner
import Foundation

/// `cloudsync man [PAGE] [--output DIR] [--doc-dir PATH]`: one manual page on standard output, or every page written
/// under a directory (what `make install` does).
extension CommandLineTool {
    func manPages(_ parsed: ParsedArguments) -> ExitCode {
        let pages = ManPages(
            version: CloudSyncVersion.current, registry: registry, jobTypes: jobTypes,
            documentation: parsed.value(Commands.manDocumentation) ?? "/usr/local/share/doc/cloudsync")
        let name = parsed.argument(Commands.manPage)
        guard let output = parsed.value(Commands.manOutput) else {
            guard let page = pages.page(named: name ?? "cloudsync") else {
                var message = "no manual page '\(name ?? "")'; the pages: " + pages.names.joined(separator: ", ")
                if let guess = closest(name ?? "", among: pages.names) { message += "; did you mean '\(guess)'?" }
                return usageError(message, Commands.man)
            }
            standardOutput(page.text)
            return .success
        }
        guard name == nil else { return usageError("give a PAGE or --output, not both", Commands.man) }
        for page in pages.all {
            // Each page replaces an older copy by a rename, so a reader (man, mandb) never sees half a page, and a
            // symbolic link left where a page goes is replaced, never written through.
            let directory = output + "/man\(page.section)"
            let path = directory + "/" + page.fileName
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                try Data(page.text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
            } catch {
                standardError("Error: cannot write \(path): \(error.localizedDescription)\n")
                return .cannotCreate
            }
        }
        standardError("wrote \(pages.all.count) manual pages under \(output)\n")
        return .success
    }
}
