import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncJQ

/// What a program may not do, and what happens when it tries: limits end the value it was on, never the run, and the
/// world outside the value stays out of reach.
@Suite struct JQSandboxTests {
    private func sandbox(_ program: String, limits: JQLimits = JQLimits()) throws -> JQSandbox {
        try JQSandbox(program: program, limits: limits, executable: try ProcessRunner.builtProduct("cloudsync-jq"))
    }

    @Test func aProgramThatNeverEndsFailsItsValueAtTheCPULimitAndTheNextValueRuns() async throws {
        let looping = try sandbox(
            #"if . == "loop" then (def f: f; f) else {seen: .} end"#, limits: JQLimits(cpuSeconds: 0.5))
        let results = await looping.run([#""loop""#, #""fine""#].map { Array($0.utf8) })
        #expect(results[0].outputs.isEmpty)
        #expect(results[0].error?.contains("CPU limit of 0.5 s") == true, "\(results[0])")
        #expect(results[1] == JQResult(outputs: [#"{"seen":"fine"}"#]))
    }

    @Test func valuesSentInChunksAreAnsweredInOrderAndAWorkerThatEndsMidChunkCostsOnlyItsValue() async throws {
        let program = try sandbox(
            #"if . == "deep" then reduce range(300000) as $i (0; [.]) else {n: ., size: (tostring | length)} end"#,
            limits: JQLimits(cpuSeconds: 60))
        // Small values fill a chunk; large ones (over a chunk each) go one at a time; three values end the worker.
        var values = (0..<400).map { Array(String($0).utf8) }
        for index in [0, 150, 399] { values[index] = Array(#""deep""#.utf8) }
        let big = "\"" + String(repeating: "x", count: 100_000) + "\""
        values.insert(Array(big.utf8), at: 200)
        let results = await program.run(values)
        #expect(results.count == values.count)
        for (index, (value, result)) in zip(values, results).enumerated() {
            let text = String(decoding: value, as: UTF8.self)
            if text == #""deep""# {
                #expect(result.error != nil, "value \(index)")
            } else {
                #expect(
                    result.outputs == [#"{"n":\#(text),"size":\#(text == big ? 100_000 : text.count)}"#],
                    "value \(index)")
            }
        }
    }

    @Test func aProgramThatGrowsWithoutEndFailsItsValueAtTheMemoryLimit() async throws {
        let growing = try sandbox(
            #"if . == "grow" then [range(1e9) | "xxxxxxxxxxxxxxxx"] | add else . end"#,
            limits: JQLimits(cpuSeconds: 60, memoryBytes: 64 << 20))
        let results = await growing.run([#""grow""#, "[1]"].map { Array($0.utf8) })
        let error = try #require(results[0].error)
        #expect(error.contains("memory limit of \(64 << 20) bytes") || error.contains("crashed"), "\(error)")
        #expect(results[1] == JQResult(outputs: ["[1]"]))
    }

    @Test func aValueNestedTooDeeplyToPrintFailsAloneWhateverItDoesToTheWorker() async throws {
        let nesting = try sandbox(
            #"if . == "deep" then reduce range(300000) as $i (0; [.]) else . end"#, limits: JQLimits(cpuSeconds: 60))
        let results = await nesting.run([#""deep""#, "2"].map { Array($0.utf8) })
        #expect(results[1] == JQResult(outputs: ["2"]))
    }

    @Test(
        arguments: [
            ("env.HOME", "env is unavailable"),
            ("$ENV.HOME // \"none\"", nil),
            ("input", "input is unavailable"),
            ("[inputs]", "inputs is unavailable"),
            ("input_filename", "input_filename is unavailable"),
            ("get_search_list", "get_search_list is unavailable"),
            ("\"m\" | modulemeta", "modulemeta is unavailable"),
        ] as [(String, String?)])
    func theWorldOutsideTheValueIsOutOfReach(program: String, error: String?) async throws {
        let result = try await sandbox(program).run([Array("{}".utf8)])[0]
        if let error {
            #expect(result.error?.contains(error) == true, "\(result)")
        } else {
            #expect(result == JQResult(outputs: [#""none""#]))
        }
    }

    @Test func modulesAndTheProgramsLocationAreRefusedBeforeCompiling() throws {
        for program in [#"import "a" as a; ."#, "# a comment\ninclude \"b\"; .", "$__loc__", #"{at: $__loc__.line}"#] {
            #expect(throws: JQError.self) { try sandbox(program) }
        }
    }

    @Test func stderrAndDebugWriteNothingAndPassTheirInputOn() async throws {
        let result = try await sandbox("stderr | debug | .a").run([Array(#"{"a":"secret"}"#.utf8)])[0]
        #expect(result == JQResult(outputs: [#""secret""#]))
    }

    @Test func aProgramThatDoesNotCompileIsRefusedWithJQsMessageAndNoneOfThePrelude() throws {
        let error = try #require(throws: JQError.self) { try sandbox(".a |\n| .b") }
        #expect(error.message.contains("syntax error"), "\(error.message)")
        #expect(error.message.contains("line 2"), "\(error.message)")
        #expect(!error.message.contains("cloudsync programs"), "\(error.message)")
    }

    @Test func aValueThatIsNotJSONFailsWithTheParsersMessage() async throws {
        let results = try await sandbox(".").run([Array("{not json".utf8), Array("\"ok\"".utf8)])
        #expect(results[0].outputs.isEmpty)
        #expect(results[0].error?.isEmpty == false)
        #expect(results[1] == JQResult(outputs: [#""ok""#]))
    }

    @Test func outputsPastTheLimitAreNotComputedAndSaidToBeMore() async throws {
        let result = try await sandbox(".[]", limits: JQLimits(maxOutputs: 1)).run([Array("[1,2,3]".utf8)])[0]
        #expect(result == JQResult(outputs: ["1"], more: true))
    }

    @Test func haltEndsTheOutputsAndHaltErrorFails() async throws {
        let results = try await sandbox(#"if . == 1 then halt else "stop" | halt_error end"#).run(
            [Array("1".utf8), Array("2".utf8)])
        #expect(results[0] == JQResult())
        #expect(results[1].error == "halt_error: stop")
    }

    @Test func aWorkerThatCannotBeFoundIsNamedWithWhereItWasLookedFor() async throws {
        let sandbox = try JQSandbox(program: ".", executable: "/nonexistent/cloudsync-jq")
        let result = await sandbox.run([Array("1".utf8)])[0]
        #expect(result.error?.contains("/nonexistent/cloudsync-jq") == true, "\(result)")
    }
}

/// jq quotes a few characters of a value in its type errors and the whole text in its parse errors; reports name keys,
/// never values, so those excerpts are left out of what a report says.
@Suite struct JQMessageRedactionTests {
    @Test(arguments: [
        (#""hunter2hunter2""#, ". + {}"),
        (#""hunter2hunter2""#, ".[]"),
        (#""hunter2hunter2""#, "fromjson"),
        (#""hunter2hunter2""#, "tonumber"),
        (#""hunter2""#, "keys"),
        ("hunter2hunter2 is no JSON", "."),
    ])
    func jqsMessagesLoseTheValueButKeepWhatWentWrong(value: String, program: String) async throws {
        let sandbox = try JQSandbox(program: program, executable: try ProcessRunner.builtProduct("cloudsync-jq"))
        let message = try #require(await sandbox.run([Array(value.utf8)])[0].error)
        #expect(message.contains("hunt"), "jq's own message should quote the value, else this test tests nothing")
        let redacted = JQError.withoutValueExcerpts(message)
        #expect(!redacted.contains("hunt"), "\(redacted)")
        #expect(redacted.count > 10, "\(redacted)")
    }
}
