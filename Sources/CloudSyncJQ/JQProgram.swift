import CJQ

/// A jq program compiled by libjq in this process, run on one JSON text at a time.
///
/// It runs whatever the program does, for as long as it takes: a program that never ends never returns here. Only
/// ``JQSandbox`` (its worker process, with limits) runs programs on values; this process compiles them, to check a
/// pipeline's programs when it loads. Programs are compiled inside ``JQSandboxPrelude``, so `env`, `$ENV`, `input`,
/// `$__loc__`, modules and everything else that reads the world outside the value are unavailable.
///
/// Not thread-safe: libjq's state is one program's, used by one thread at a time.
public final class JQProgram {
    private let state: OpaquePointer
    private let messages: Messages

    /// `text` compiled, or why it does not compile: jq's own messages, naming lines of `text`.
    public init(_ text: String) throws(JQError) {
        try JQSandboxPrelude.refuseUnavailable(in: text)
        guard let state = jq_init() else { throw JQError("libjq could not start (out of memory)") }
        let messages = Messages()
        self.state = state
        self.messages = messages
        jq_set_error_cb(
            state,
            { context, message in
                Unmanaged<Messages>.fromOpaque(context!).takeUnretainedValue().append(message)
            }, Unmanaged.passUnretained(messages).toOpaque())
        // No module search path: `import`, `include` and `modulemeta` find nothing.
        jq_set_attr(state, jv_string("JQ_LIBRARY_PATH"), jv_array())
        guard jq_compile(state, JQSandboxPrelude.wrap(text)) != 0 else {
            throw JQError(JQSandboxPrelude.unwrap(messages.compileReport(), of: text))
        }
    }

    deinit {
        var state: OpaquePointer? = state
        jq_teardown(&state)
    }

    /// Sends libjq's "cannot allocate" to `handler` instead of its own abort (the worker process exits with a code
    /// of its own, so its parent can say the memory limit stopped the program).
    public func onOutOfMemory(_ handler: @convention(c) (UnsafeMutableRawPointer?) -> Void) {
        jq_set_nomem_handler(state, handler, nil)
    }

    /// What the program makes of `json` (a JSON text as bytes).
    ///
    /// Its outputs come as compact JSON texts, at most `maxOutputs` of them (``JQResult/more`` says when it had
    /// more), then the error that stopped it, if one did. A text that is not JSON is an error here, with the parser's message, as `jq` gives it.
    public func run(_ json: UnsafeRawBufferPointer, maxOutputs: Int) -> JQResult {
        var result = JQResult()
        let input = jv_parse_sized(json.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(json.count))
        guard jv_get_kind(input) != JV_KIND_INVALID else {
            result.error = Self.text(ofInvalid: input) ?? "the value is not JSON"
            return result
        }
        jq_start(state, input, 0)
        while true {
            let output = jq_next(state)
            if jv_get_kind(output) == JV_KIND_INVALID {
                if jq_halted(state) != 0 {
                    result.error = haltError()
                } else {
                    result.error = Self.text(ofInvalid: output)
                }
                break
            }
            guard result.outputs.count < maxOutputs else {
                jv_free(output)
                result.more = true
                break
            }
            result.outputs.append(Self.compact(output))
        }
        return result
    }

    /// `run(_:maxOutputs:)` on a text's UTF-8 bytes.
    public func run(_ json: String, maxOutputs: Int = .max) -> JQResult {
        var json = json
        return json.withUTF8 { run(UnsafeRawBufferPointer($0), maxOutputs: maxOutputs) }
    }

    /// The message `halt_error` stopped the program with; nil after a plain `halt` or `halt_error(0)`, which only end
    /// its outputs (as the `jq` command exits 0 after them).
    private func haltError() -> String? {
        let code = jq_get_exit_code(state)
        let message = jq_get_error_message(state)
        let failed =
            jv_get_kind(code) != JV_KIND_INVALID && !(jv_get_kind(code) == JV_KIND_NUMBER && jv_number_value(code) == 0)
        jv_free(code)
        guard failed else {
            jv_free(message)
            return nil
        }
        switch jv_get_kind(message) {
        case JV_KIND_STRING: return "halt_error: " + Self.consumeString(message)
        case JV_KIND_INVALID:
            jv_free(message)
            return "halt_error"
        default: return "halt_error: " + Self.compact(message)
        }
    }

    /// The message an invalid value carries, as `jq` prints it: a string as is, anything else as JSON with
    /// " (not a string)"; nil when it carries none (the end of the outputs).
    private static func text(ofInvalid value: jv) -> String? {
        guard jv_invalid_has_msg(jv_copy(value)) != 0 else {
            jv_free(value)
            return nil
        }
        let message = jv_invalid_get_msg(value)
        if jv_get_kind(message) == JV_KIND_STRING { return consumeString(message) }
        return compact(message) + " (not a string)"
    }

    /// `value` as compact JSON, as `jq -c` prints it; consumes `value`.
    static func compact(_ value: jv) -> String { consumeString(jv_dump_string(value, 0)) }

    /// A jv string's UTF-8 text; consumes it.
    static func consumeString(_ string: jv) -> String {
        defer { jv_free(string) }
        let count = Int(jv_string_length_bytes(jv_copy(string)))
        return jv_string_value(string).withMemoryRebound(to: UInt8.self, capacity: count) { bytes in
            String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
        }
    }

    /// Messages libjq reports while compiling.
    private final class Messages {
        private var lines: [String] = []

        func append(_ message: jv) {
            if jv_get_kind(message) == JV_KIND_STRING {
                lines.append(JQProgram.consumeString(message))
            } else {
                lines.append(JQProgram.compact(message))
            }
        }

        /// The messages as one text, without the count libjq ends them with.
        func compileReport() -> String {
            let kept = lines.filter { !($0.hasPrefix("jq: ") && $0.hasSuffix("compile error")) }
            let text = (kept.isEmpty ? lines : kept).joined(separator: "\n")
            return text.trimmingSuffix(while: \.isNewline)
        }
    }
}

/// What a jq program made of one value.
public struct JQResult: Sendable, Equatable {
    /// Its outputs, each compact JSON.
    public var outputs: [String] = []
    /// Whether it had more outputs than were asked for (they were not computed).
    public var more = false
    /// The error that stopped it (jq's message), after the outputs it gave first.
    public var error: String?

    /// A result of `outputs` and `error`.
    public init(outputs: [String] = [], more: Bool = false, error: String? = nil) {
        self.outputs = outputs
        self.more = more
        self.error = error
    }
}

/// Why a jq program could not be compiled or run.
public struct JQError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, for a person: jq's own message where jq gave one.
    public let message: String

    /// An error saying `message`.
    public init(_ message: String) { self.message = message }

    public var description: String { message }
}

extension String {
    /// This text without the characters at its end that `drop` picks.
    fileprivate func trimmingSuffix(while drop: (Character) -> Bool) -> String {
        var text = Substring(self)
        while let last = text.last, drop(last) { text.removeLast() }
        return String(text)
    }
}

extension JQError {
    /// `message` with the excerpts of values jq quotes in its messages left out.
    ///
    /// A type error's `string ("abc…")` becomes `string (…)`, and a parse error's `(while parsing '…')` becomes `(while parsing the value)`. What a
    /// program passes to `error` is its author's choice and stays.
    public static func withoutValueExcerpts(_ message: String) -> String {
        var text = message
        if let parsing = text.firstRange(of: " (while parsing '") {
            text = String(text[..<parsing.lowerBound]) + " (while parsing the value)"
        }
        var result = ""
        var rest = Substring(text)
        let kinds = ["null (", "boolean (", "number (", "string (", "array (", "object ("]
        while let range = kinds.compactMap({ rest.firstRange(of: $0) }).min(by: { $0.lowerBound < $1.lowerBound }) {
            result += rest[..<range.upperBound]
            rest = rest[range.upperBound...]
            // jq cuts excerpts to a few characters, so the close is near: the first ")" that ends the text or comes
            // before a space.
            let close = rest.indices.prefix(40).first { index in
                rest[index] == ")"
                    && (rest.index(after: index) == rest.endIndex || rest[rest.index(after: index)] == " ")
            }
            guard let close else { continue }
            result += "…"
            rest = rest[close...]
        }
        return result + rest
    }
}
