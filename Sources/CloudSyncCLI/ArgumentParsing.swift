import CloudSyncPipeline
import CloudSyncRunner

// A small argument parser with swift-argument-parser's behaviour (not its code): `--name value` and `--name=value`,
// short names, `--` ending the options, `-h`/`--help` anywhere, value choices, and errors that say what was wrong
// and, for a near miss, what was meant.

/// One option of a command: a flag, or an option taking a value.
struct OptionSpec: Sendable {
    /// The long name without its dashes: `job` for `--job`.
    let name: String
    /// The one-letter short name, if any: `j` for `-j`.
    let short: Character?
    /// What the value is called in help (`NAME`); nil for a flag.
    let valueName: String?
    /// The values allowed, when only some are.
    let choices: [String]
    /// The value used when the option is not given, shown in help.
    let defaultValue: String?
    /// Whether it may be given more than once, every value kept; otherwise the last one counts.
    let repeatable: Bool
    /// Whether the command needs it.
    let required: Bool
    let help: String
    /// What the shells complete its value with from the pipeline file given, when it names something in it.
    var completes: PipelineNames? = nil

    /// A flag: `--dry-run`, present or not.
    static func flag(_ name: String, short: Character? = nil, help: String) -> OptionSpec {
        OptionSpec(
            name: name, short: short, valueName: nil, choices: [], defaultValue: nil, repeatable: false,
            required: false, help: help)
    }

    /// An option with a value: `--job NAME`.
    static func option(
        _ name: String, short: Character? = nil, value: String, choices: [String] = [],
        default defaultValue: String? = nil,
        repeatable: Bool = false, required: Bool = false, completes: PipelineNames? = nil, help: String
    ) -> OptionSpec {
        OptionSpec(
            name: name, short: short, valueName: value, choices: choices, defaultValue: defaultValue,
            repeatable: repeatable, required: required, help: help, completes: completes)
    }

    var isFlag: Bool { valueName == nil }
    /// Whether its value names a file or directory, which the shells complete as paths.
    var takesPath: Bool { valueName.map { $0.hasPrefix("PATH") || $0 == "FILE" || $0 == "DIR" } ?? false }
    var long: String { "--" + name }

    /// `--job NAME`, or `--progress auto|always|never` when the values are few.
    var synopsis: String {
        guard let valueName else { return long }
        return long + " " + (choices.isEmpty ? valueName : choices.joined(separator: "|"))
    }

    /// As the usage line shows it: `[--job NAME]...`.
    var usage: String {
        (required ? synopsis : "[\(synopsis)]") + (repeatable ? "..." : "")
    }

    /// As the OPTIONS section labels it: `-j, --job NAME`.
    var label: String {
        (short.map { "-\($0), " } ?? "") + long + (valueName.map { " " + $0 } ?? "")
    }

    /// The help text with the values and the default appended, as swift-argument-parser shows them.
    var fullHelp: String {
        var notes: [String] = []
        if !choices.isEmpty { notes.append("values: " + choices.joined(separator: ", ")) }
        if let defaultValue { notes.append("default: " + defaultValue) }
        return notes.isEmpty ? help : help + " (\(notes.joined(separator: "; ")))"
    }
}

/// The names a pipeline file declares that an option's value can be: what `cloudsync __complete KIND FILE` lists
/// for the shells' completion.
enum PipelineNames: String, Sendable, CaseIterable {
    case jobs, providers, codecs
}

/// One positional argument of a command.
struct ArgumentSpec: Sendable {
    /// What it is called in help: `FILE`.
    let name: String
    /// The values allowed, when only some are.
    var choices: [String] = []
    /// Whether it takes every remaining argument (at least one unless optional).
    var repeating = false
    var optional = false
    let help: String

    /// As the usage line shows it: `FILE...`, `[SUBCOMMAND]`, `pipeline|report`.
    var usage: String {
        let shown = (choices.isEmpty ? name : choices.joined(separator: "|")) + (repeating ? "..." : "")
        return optional ? "[\(shown)]" : shown
    }
}

/// A subcommand: what it takes, what it says about itself and the exit codes it can return.
struct CommandSpec: Sendable {
    /// Its words after `cloudsync`: `["outbox", "list"]`.
    let path: [String]
    /// One line for OVERVIEW and the subcommand lists.
    let abstract: String
    /// More paragraphs after the overview, if any.
    var discussion = ""
    var arguments: [ArgumentSpec] = []
    var options: [OptionSpec] = []
    /// Every exit status it can return, with what it means for this command.
    var exitCodes: [(ExitCode, String)] = []
    /// For a group (`outbox`): the commands under it.
    var subcommands: [CommandSpec] = []

    var name: String { path.joined(separator: " ") }

    /// The options help applies to: the command's own plus `-h, --help`.
    var allOptions: [OptionSpec] { options + [CommandSpec.helpOption] }

    static let helpOption = OptionSpec.flag("help", short: "h", help: "Show this help and exit.")

    /// The synopsis after the command's name: positionals first, then options, in declaration order.
    var synopsis: String {
        if !subcommands.isEmpty { return subcommands.map { $0.path.last ?? "" }.joined(separator: "|") + " ..." }
        return (arguments.map(\.usage) + options.map(\.usage)).joined(separator: " ")
    }

    /// The usage line: `cloudsync run FILE [--job NAME]... ...`.
    var usage: String { "cloudsync \(name) \(synopsis)" }

    /// OVERVIEW, USAGE, ARGUMENTS, OPTIONS, SUBCOMMANDS and EXIT CODES, as `--help` prints them.
    var help: String {
        var text = "OVERVIEW: \(abstract)\n\n"
        for paragraph in discussion.components(separatedBy: "\n\n") where !paragraph.isEmpty {
            text += wrap(paragraph, indent: 0) + "\n\n"
        }
        text += "USAGE: \(usage)\n\n"
        if !arguments.isEmpty {
            text += "ARGUMENTS:\n" + arguments.map { helpEntry($0.usage, $0.help) }.joined() + "\n"
        }
        text += "OPTIONS:\n" + allOptions.map { helpEntry($0.label, $0.fullHelp) }.joined() + "\n"
        if !subcommands.isEmpty {
            text += "SUBCOMMANDS:\n" + subcommands.map { helpEntry($0.path.last ?? "", $0.abstract) }.joined() + "\n"
            text += "  See 'cloudsync help \(name) <subcommand>' for detailed help.\n\n"
        }
        if !exitCodes.isEmpty {
            text += "EXIT CODES:\n" + exitCodes.map { exitCodeEntry($0.0, $0.1) }.joined()
        }
        return text
    }

    /// The subcommand named `word`, if this is a group that has one.
    func subcommand(_ word: String) -> CommandSpec? { subcommands.first { $0.path.last == word } }
}

/// What a command line said: its options by long name and its positionals by argument name.
struct ParsedArguments: Sendable {
    var options: [String: [String]] = [:]
    var arguments: [String: [String]] = [:]

    /// Whether the flag was given.
    func flag(_ option: OptionSpec) -> Bool { options[option.name] != nil }
    /// The option's value (the last one, when given more than once); nil when it was not given.
    func value(_ option: OptionSpec) -> String? { options[option.name]?.last }
    /// Every value of a repeatable option, in order.
    func values(_ option: OptionSpec) -> [String] { options[option.name] ?? [] }
    /// The argument's value; nil when it was not given.
    func argument(_ argument: ArgumentSpec) -> String? { arguments[argument.name]?.first }
    /// Every value of a repeating argument, in order.
    func all(_ argument: ArgumentSpec) -> [String] { arguments[argument.name] ?? [] }
}

/// A command line that does not fit its command; the message says what is wrong, without `Error: `.
struct UsageError: Error, Sendable {
    let message: String
    init(_ message: String) { self.message = message }
}

extension CommandSpec {
    /// Whether the arguments ask for help (`-h` or `--help` before any `--`), which wins over any error in them.
    static func asksForHelp(_ arguments: [String]) -> Bool {
        asks(arguments, ["-h", "--help"])
    }

    /// Whether the arguments ask for the version (`--version` before any `--`): after a subcommand as before one,
    /// winning over any error in them as help does (help wins over it).
    static func asksForVersion(_ arguments: [String]) -> Bool {
        asks(arguments, ["--version"])
    }

    /// Whether one of `options` comes before any `--`.
    private static func asks(_ arguments: [String], _ options: Set<String>) -> Bool {
        for argument in arguments {
            if argument == "--" { return false }
            if options.contains(argument) { return true }
        }
        return false
    }

    /// Parses `arguments` (those after the command's name) against this command's options and arguments.
    func parse(_ arguments: [String]) throws(UsageError) -> ParsedArguments {
        var parsed = ParsedArguments()
        var positionals: [String] = []
        var index = 0
        var optionsEnded = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if optionsEnded || argument == "-" || !argument.hasPrefix("-") {
                positionals.append(argument)
                continue
            }
            if argument == "--" {
                optionsEnded = true
                continue
            }
            let (option, attached) = lookUp(argument)
            guard let option else { throw unknownOption(argument) }
            if option.isFlag {
                if let attached { throw UsageError("'\(option.long)' takes no value; found '\(attached)'") }
                parsed.options[option.name] = [""]
                continue
            }
            let value: String
            if let attached {
                value = attached
            } else if index < arguments.count, arguments[index] == "-" || !arguments[index].hasPrefix("-") {
                value = arguments[index]
                index += 1
            } else {
                throw UsageError("missing value for '\(option.long) \(option.valueName ?? "")'")
            }
            try check(value, among: option.choices, for: "'\(option.long)'")
            if option.repeatable {
                parsed.options[option.name, default: []].append(value)
            } else {
                parsed.options[option.name] = [value]
            }
        }
        try assign(positionals, to: &parsed)
        return parsed
    }

    /// The option `argument` (`--name`, `--name=value` or `-x`) names, and the value attached to it with `=`.
    private func lookUp(_ argument: String) -> (option: OptionSpec?, attached: String?) {
        guard argument.hasPrefix("--") else {
            return (argument.count == 2 ? options.first { $0.short == argument.last } : nil, nil)
        }
        let body = argument.dropFirst(2)
        let name = body.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)[0]
        let attached = body.contains("=") ? String(body.dropFirst(name.count + 1)) : nil
        return (options.first { $0.name == name }, attached)
    }

    /// Gives the positional arguments to the command's arguments in order (a repeating one takes the rest), after
    /// checking that every required option was given; refuses a missing argument, a value outside an argument's
    /// choices, and one argument too many.
    private func assign(_ positionals: [String], to parsed: inout ParsedArguments) throws(UsageError) {
        var positionals = positionals
        for option in options where option.required && parsed.options[option.name] == nil {
            throw UsageError("missing expected argument '\(option.synopsis)'")
        }
        for spec in self.arguments {
            if spec.repeating {
                guard spec.optional || !positionals.isEmpty else {
                    throw UsageError("missing expected argument '\(spec.name)'")
                }
                for value in positionals { try check(value, among: spec.choices, for: "'\(spec.name)'") }
                parsed.arguments[spec.name] = positionals
                positionals = []
            } else if !positionals.isEmpty {
                let value = positionals.removeFirst()
                try check(value, among: spec.choices, for: "'\(spec.name)'")
                parsed.arguments[spec.name] = [value]
            } else if !spec.optional {
                throw UsageError("missing expected argument '\(spec.name)'")
            }
        }
        if let extra = positionals.first { throw UsageError("unexpected argument '\(extra)'") }
    }

    private func unknownOption(_ argument: String) -> UsageError {
        let written = String(argument.split(separator: "=", maxSplits: 1).first ?? "")
        var message = "unknown option '\(written)'"
        // A one-letter option is one edit from every other, so only long names are worth suggesting.
        if written.hasPrefix("--"), let guess = closest(written, among: allOptions.map(\.long)) {
            message += "; did you mean '\(guess)'?"
        }
        return UsageError(message)
    }
}

/// Throws unless `value` is one of `choices` (or there are none), naming them and the nearest.
func check(_ value: String, among choices: [String], for what: String) throws(UsageError) {
    guard !choices.isEmpty, !choices.contains(value) else { return }
    var message = "the value '\(value)' is invalid for \(what); pick \(listed(choices, "or"))"
    if let guess = closest(value, among: choices) { message += "; did you mean '\(guess)'?" }
    throw UsageError(message)
}

/// `a, b or c`.
func listed(_ words: [String], _ conjunction: String) -> String {
    guard words.count > 1 else { return words.first ?? "" }
    return words.dropLast().joined(separator: ", ") + " \(conjunction) " + words[words.count - 1]
}

/// Help text lines are at most this wide.
let helpWidth = 100
/// Where the description of an option, argument or subcommand starts.
let helpColumn = 26

/// `  LABEL    text`, the text wrapped at ``helpColumn``; on its own line when the label is too long.
func helpEntry(_ label: String, _ text: String) -> String {
    let head = "  " + label
    let body = wrap(text, indent: helpColumn)
    if head.count <= helpColumn - 2 {
        return head + String(repeating: " ", count: helpColumn - head.count) + body.dropFirst(helpColumn) + "\n"
    }
    return head + "\n" + body + "\n"
}

/// `  64   what it means`.
func exitCodeEntry(_ code: ExitCode, _ meaning: String) -> String {
    let number = String(code.rawValue)
    return "  " + number + String(repeating: " ", count: 5 - number.count) + wrap(meaning, indent: 7).dropFirst(7)
        + "\n"
}

/// `text`'s words in lines of at most ``helpWidth`` columns, each indented by `indent` spaces.
func wrap(_ text: String, indent: Int) -> String {
    let margin = String(repeating: " ", count: indent)
    var lines: [String] = []
    var line = ""
    for word in text.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
        if !line.isEmpty, indent + line.count + 1 + word.count > helpWidth {
            lines.append(margin + line)
            line = ""
        }
        line += (line.isEmpty ? "" : " ") + word
    }
    lines.append(margin + line)
    return lines.joined(separator: "\n")
}
