/// What a program is compiled inside, so that it sees only the value it is given.
///
/// jq's builtins that read the world outside the value (the environment, further inputs, file names, module files,
/// the program's own location) are shadowed by definitions that fail with a message saying so, and `stderr`, which
/// writes a value to the process's standard error, returns its input and writes nothing. `$ENV` is bound to an
/// empty object, and `debug`, a no-op here as it has no listener, is one by definition. Module directives (`import`, `include`) and `$__loc__` are refused before compiling.
///
/// The prelude is one line ending where the program starts, so jq's messages name the program's own lines.
enum JQSandboxPrelude {
    /// The builtins a program may not use, each shadowed by an error.
    static let unavailable = [
        "env", "input", "inputs", "input_filename", "input_line_number", "get_search_list", "get_prog_origin",
        "get_jq_origin", "modulemeta",
    ]

    /// The definitions put before a program, and the binding of `$ENV`, on one line.
    static let head: String = {
        let failing = unavailable.map { name in
            "def \(name): error(\"jq's \(name) is unavailable to cloudsync programs: they see only the value\"); "
        }
        return failing.joined() + "def stderr: .; def debug: .; {} as $ENV | ("
    }()

    /// The end of the wrapping, on a line of its own so that a comment on the program's last line does not hide it.
    static let tail = "\n)"

    /// `program` inside the prelude.
    static func wrap(_ program: String) -> String { head + program + tail }

    /// jq's compile messages for `program` as one line each, naming the program's lines rather than the wrapping's:
    /// without jq's `jq: error: ` lead and the program line it quotes, and with an error at the wrapping's last
    /// line (the program ended early) said to be at the end of the program.
    static func unwrap(_ message: String, of program: String) -> String {
        let endLine = program.reduce(1) { $1 == "\n" ? $0 + 1 : $0 } + 1
        let lines = message.split(separator: "\n").filter { $0.hasPrefix("jq: ") }
        return (lines.isEmpty ? [Substring(message)] : lines).map { line in
            var text = String(line)
            if text.hasPrefix("jq: error: ") { text.removeFirst("jq: error: ".count) }
            if text.hasSuffix(":") { text.removeLast() }
            return text.replacing("at <top-level>, line \(endLine)", with: "at the end of the program")
                .replacing("at <top-level>, line ", with: "at line ")
        }.joined(separator: "; ")
    }

    /// Refuses a program that uses what the prelude cannot shadow: module directives and `$__loc__`.
    static func refuseUnavailable(in program: String) throws(JQError) {
        if program.contains("__loc__") {
            throw JQError("$__loc__ is unavailable to cloudsync programs: they see only the value")
        }
        let start = firstCode(of: program)
        for directive in ["import", "include", "module"] where start.hasPrefix(directive) {
            let next = start.dropFirst(directive.count).first
            if next == nil || next!.isWhitespace || next == "\"" || next == "{" {
                throw JQError(
                    "jq's \(directive) is unavailable to cloudsync programs: they read no files; put the definitions "
                        + "in the program itself")
            }
        }
    }

    /// `program` from its first character that is neither blank nor in a `#` comment.
    private static func firstCode(of program: String) -> Substring {
        var rest = Substring(program)
        while let first = rest.first {
            if first.isWhitespace {
                rest = rest.dropFirst()
            } else if first == "#" {
                rest = rest.drop { $0 != "\n" }
            } else {
                break
            }
        }
        return rest
    }
}
