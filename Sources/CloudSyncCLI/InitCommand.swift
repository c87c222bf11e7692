import CloudSync
import CloudSyncCrypto
import CloudSyncFiles
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `cloudsync init FILE [--template NAME]`: writes a starter pipeline from one of ``PipelineTemplates``.
///
/// FILE is created whole or not at all and never replaces anything: the text goes to a temporary file beside it,
/// which is then linked to FILE's name (`link` fails when the name exists, whatever it names: a file, a symlink, a
/// device such as /dev/null). The encrypted templates' key file is made as `keygen` makes it, after FILE, and only
/// when nothing is in its place; a key already there is used as it is.
extension CommandLineTool {
    func initPipeline(_ parsed: ParsedArguments) -> ExitCode {
        let path = parsed.argument(Commands.initFile) ?? ""
        let template =
            PipelineTemplates.named(parsed.value(Commands.initTemplate) ?? "") ?? PipelineTemplates.starter
        guard !path.isEmpty else { return usageError("FILE must not be empty", Commands.initPipeline) }
        if path == "-" { return printTemplate(template) }
        if let refusal = refusalToCreate(path) {
            standardError("Error: \(refusal)\n")
            return .cannotCreate
        }
        let directory = directoryPart(of: path)
        let fileName = path.split(separator: "/").last.map(String.init) ?? path
        let values = TemplateValues(
            name: Self.pipelineName(forFile: fileName), file: shellWord(Self.printable(fileName)),
            installedSchema: Self.installedSchema())
        let keyPath = directory.isEmpty ? values.keyFile : directory + "/" + values.keyFile
        var keyExists = false
        if template.usesKeyFile {
            switch Self.existingKeyFile(keyPath, pipeline: path, name: values.name) {
            case .success(let exists): keyExists = exists
            case .failure(let refusal):
                standardError("Error: \(refusal.message)\n")
                return .cannotCreate
            }
        }
        let failure = Self.createExclusively(path, contents: template.text(values))
        guard failure == 0 else {
            if failure == EEXIST {
                standardError(
                    "Error: \(path) appeared while init was writing it; init never overwrites anything, so it was "
                        + "left as it is\n")
            } else {
                standardError("Error: cannot create \(path): \(String(cString: strerror(failure)))\n")
            }
            return .cannotCreate
        }
        standardError("wrote \(path) (pipeline \(values.name), template \(template.name))\n")
        if template.usesKeyFile, !writeKeyFile(keyPath, exists: keyExists, pipeline: path) { return .cannotCreate }
        standardError(template.next(shellWord(path)) + "\n")
        return .success
    }

    /// `cloudsync init - `: the template on standard output, named after itself, and where its key file goes.
    private func printTemplate(_ template: PipelineTemplate) -> ExitCode {
        let values = TemplateValues(
            name: template.name, file: template.name + ".yaml", installedSchema: Self.installedSchema())
        standardOutput(template.text(values))
        if template.usesKeyFile {
            standardError(
                "note: this template reads its key from \(values.keyFile) beside the pipeline file; make one with "
                    + "cloudsync keygen --out \(values.keyFile) (cloudsync init FILE makes it for you)\n")
        }
        return .success
    }

    /// Why `path` cannot be created as a new pipeline file (it names a directory, something is there, its directory
    /// is missing), with what to do; nil when it can.
    func refusalToCreate(_ path: String) -> String? {
        var status = stat()
        if path.hasSuffix("/") || (lstat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFDIR) {
            return "\(path) names a directory; give the path of a new file in it, such as "
                + "\(shellWord((path.hasSuffix("/") ? path : path + "/") + "pipeline.yaml"))"
        }
        if lstat(path, &status) == 0 {
            let kind: String
            switch status.st_mode & S_IFMT {
            case S_IFREG: kind = ""
            case S_IFLNK: kind = " as a symbolic link, which init never writes through"
            case S_IFCHR, S_IFBLK: kind = " as a device"
            default: kind = " as a FIFO or socket"
            }
            return "\(path) already exists\(kind); init only creates new files, it never overwrites one. Give FILE "
                + "another name (the pipeline's name is taken from it)"
                + (kind.isEmpty ? ", or move \(path) away first" : "")
        }
        if let missing = missingDirectory(of: path) {
            return "cannot create \(path): the directory \(missing) does not exist; create it first "
                + "(mkdir -p \(shellWord(missing))) or give a path in an existing directory"
        }
        return nil
    }

    /// Whether a key file is already at `keyPath` (kept and used as it is); refused when that is the pipeline file
    /// itself or holds something that is not a key, which init never replaces.
    static func existingKeyFile(_ keyPath: String, pipeline path: String, name: String) -> Result<Bool, CommandRefusal>
    {
        if keyPath == path {
            return .failure(
                CommandRefusal(
                    "\(path) would be both the pipeline file and its key file (\(name).key); give FILE a name ending "
                        + "in .yaml"))
        }
        var status = stat()
        guard lstat(keyPath, &status) == 0 else { return .success(false) }
        if let problem = keyProblem(keyPath) {
            return .failure(
                CommandRefusal(
                    "\(keyPath), where the pipeline's key file goes, is not a key file (\(problem)); init never "
                        + "replaces it. Move it away, or give FILE another name (the key file is named after it)"))
        }
        return .success(true)
    }

    /// Makes the pipeline's key file unless one `exists`, saying what it did; false when it could not be written.
    private func writeKeyFile(_ keyPath: String, exists: Bool, pipeline path: String) -> Bool {
        if exists {
            standardError("\(keyPath) already holds a key: kept as it is, and the pipeline uses it\n")
            return true
        }
        do {
            try generateKeyFile(at: keyPath)
            standardError(
                "wrote a new key to \(keyPath) (mode 0600); keep a copy elsewhere: without it, nothing encrypted with "
                    + "it can be read\n")
            return true
        } catch {
            standardError(
                "Error: \(path) was written, but its key file could not be: \(error.message). Make it with "
                    + "cloudsync keygen --out \(shellWord(keyPath))\n")
            return false
        }
    }

    /// The pipeline name for a file called `fileName`: its name without the extension, accents dropped, each run of
    /// characters a name cannot hold made one `-`, and without leading dots or dashes (never `.` or `..`);
    /// `pipeline` when nothing is left.
    static func pipelineName(forFile fileName: String) -> String {
        let dot = fileName.dropFirst().lastIndex(of: ".")
        let stem = dot.map { fileName[..<$0] } ?? Substring(fileName)
        let folded = stem.folding(options: [.diacriticInsensitive, .widthInsensitive], locale: nil)
        var name = ""
        for scalar in folded.unicodeScalars {
            let allowed =
                scalar.isASCII
                && (("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)
                    || scalar == "." || scalar == "_" || scalar == "-")
            if allowed {
                name.unicodeScalars.append(scalar)
            } else if !name.hasSuffix("-") {
                name += "-"
            }
        }
        name = String(name.drop { $0 == "." || $0 == "-" }.prefix(100))
        while name.hasSuffix("-") { name.removeLast() }
        return name.isEmpty ? "pipeline" : name
    }

    /// `text` with control characters (a newline would end a YAML comment) shown as `?`.
    static func printable(_ text: String) -> String {
        String(text.unicodeScalars.map { $0.properties.generalCategory == .control ? "?" : Character($0) })
    }

    /// The JSON Schema of pipeline files as `make install` puts it beside this executable
    /// (`PREFIX/share/doc/cloudsync/schemas/`), if it is there.
    static func installedSchema() -> String? {
        guard let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else {
            return nil
        }
        let schema =
            (directoryPart(of: executable) + "/../share/doc/cloudsync/schemas/pipeline.schema.json"
            as NSString).standardizingPath
        guard printable(schema) == schema, FileManager.default.isReadableFile(atPath: schema) else { return nil }
        return schema
    }

    /// Why the file at `path` is not a key file `cloudsync` can load; nil when it is one.
    static func keyProblem(_ path: String) -> String? {
        do {
            _ = try EnvelopeCodec.Key.keyFile(id: "init", path: path)
            return nil
        } catch {
            return error.message
        }
    }

    /// Creates `path` holding `contents` (mode 0644 less the umask), whole or not at all, never replacing anything
    /// there; 0, or the errno that stopped it (EEXIST when something took the name first).
    static func createExclusively(_ path: String, contents: String) -> Int32 {
        Array(contents.utf8).withUnsafeBytes { bytes -> Int32 in
            do throws(NewFile.Failure) {
                try NewFile.create(path, bytes: bytes, mode: 0o644)
                return 0
            } catch {
                return error.code
            }
        }
    }
}

/// `word` as one shell word: as it is when it needs no quoting, else in single quotes.
func shellWord(_ word: String) -> String {
    let plain = word.unicodeScalars.allSatisfy {
        $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "._/@%+=:,-".unicodeScalars.contains($0))
    }
    return plain && !word.isEmpty ? word : "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
}
