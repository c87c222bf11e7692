import CloudSync
import CloudSyncPipeline
import CloudSyncRunner
import CloudSyncTesting
import Foundation
import Testing

/// Runs `body` on its own thread and waits at most `seconds`, on another thread; nil when it had not returned by then
/// (the thread is left blocked, so a test that would hang fails instead).
private func within<T: Sendable>(_ seconds: Int, _ body: @escaping @Sendable () -> T) async -> T? {
    let box = Box<T>()
    let done = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        box.value = body()
        done.signal()
    }
    guard await offPool({ done.wait(timeout: .now() + .seconds(seconds)) == .success }) else { return nil }
    return box.value
}

private final class Box<T>: @unchecked Sendable {
    var value: T?
}

/// The loader's error, rendered, or "loaded" when there was none.
private func outcome(
    _ source: String, directory: String = "/tmp", environment: [String: String] = [:], compile: Bool = false
) -> String {
    do {
        let spec = try PipelineLoader.load(
            source: source, file: "p.yaml", directory: directory, registry: BuiltInProviders.registry,
            environment: environment)
        if compile { _ = try PipelineCompiler.compile(spec, environment: environment) }
        return "loaded"
    } catch {
        return error.description
    }
}

/// A pipeline whose jobs each name a provider it does not declare: one error per job.
private func pipelineWithUnknownReferences(_ count: Int, declaring providers: Int = 1) -> String {
    var text = "version: 1\nname: p\nproviders:\n"
    for index in 0..<providers { text += "  a\(index): { type: memory }\n" }
    text += "store: { providers: [a0] }\njobs:\n"
    for index in 0..<count { text += "  - { type: verify, provider: nope\(index) }\n" }
    return text
}

@Suite struct BoundedValidationTests {
    @Test func twentyThousandErrorsReportTheFirstHundredAndCountTheRest() throws {
        let source = pipelineWithUnknownReferences(20_000)
        let (caught, cpuTime) = measuringThreadCPUTime { () -> (PipelineError, rendered: String)? in
            do {
                _ = try PipelineLoader.load(
                    source: source, file: "p.yaml", directory: "/tmp", registry: BuiltInProviders.registry)
                return nil
            } catch let error as PipelineError {
                return (error, error.description)
            } catch {
                return nil
            }
        }
        let (error, rendered) = try #require(caught)
        #expect(error.count == 20_000)
        #expect(error.diagnostics.count == PipelineError.reportedLimit)
        #expect(error.diagnostics.first?.mark.line == 7)
        #expect(error.diagnostics.last?.mark.line == 106)
        #expect(rendered.hasSuffix("and 19900 more errors not shown; fix these and validate again"))
        #expect(rendered.components(separatedBy: ": error: ").count == 101)
        // Quadratic rendering took minutes here; linear work takes well under a second of processor time.
        #expect(cpuTime < .seconds(10), "took \(cpuTime) of processor time")
    }

    @Test func aFileDeclaringThousandsOfIDsKeepsEachMessageShort() async throws {
        let rendered = try #require(
            await within(60) { outcome(pipelineWithUnknownReferences(5_000, declaring: 5_000)) })
        let first = try #require(rendered.split(separator: "\n").first)
        #expect(first.contains("unknown provider `nope0`; the file declares: a0, a1, "))
        #expect(first.contains("and 4990 more"))
        #expect(first.count < 400)
    }

    @Test func aProviderListedThousandsOfTimesIsCheckedInLinearTime() throws {
        var source = "version: 1\nname: p\nproviders: { a: { type: memory } }\nstore:\n  providers:\n"
        for _ in 0..<20_000 { source += "    - a\n" }
        let (rendered, cpuTime) = measuringThreadCPUTime { outcome(source) }
        #expect(cpuTime < .seconds(10), "took \(cpuTime) of processor time")
        #expect(rendered.hasSuffix("and 19899 more errors not shown; fix these and validate again"))
    }
}

@Suite struct BoundedFileReadTests {
    @Test func anInterpolatedFileIsCappedLikeThePipelineFile() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("huge.txt")
        #expect(FileManager.default.createFile(atPath: path, contents: nil))
        // Sparse: 512 MiB that take no space and read as zeros.
        #expect(truncate(path, 512 << 20) == 0)
        let (rendered, cpuTime) = measuringThreadCPUTime {
            outcome(
                "version: 1\nname: p\nproviders: { a: { type: memory, items: { k: '${file:huge.txt}' } } }\n"
                    + "store: { providers: [a] }\n", directory: directory.path)
        }
        // Reading the whole 512 MiB would take seconds of processor time; refusing it from its size takes none.
        #expect(cpuTime < .seconds(5), "took \(cpuTime) of processor time")
        #expect(
            rendered.contains(
                "\(path) for ${file:huge.txt} is 536870912 bytes; a file read into the pipeline may be at most 4194304 bytes"
            ), "\(rendered)")
    }

    @Test func allInterpolatedFilesTogetherReadAtMostThirtyTwoMebibytes() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("four.txt")
        #expect(FileManager.default.createFile(atPath: path, contents: nil))
        #expect(truncate(path, 4 << 20) == 0)
        let items = (0..<9).map { "k\($0): '${file:four.txt}'" }.joined(separator: ", ")
        let rendered = outcome(
            "version: 1\nname: p\nproviders: { a: { type: memory, items: { \(items) } } }\n"
                + "store: { providers: [a] }\n", directory: directory.path)
        #expect(
            rendered.contains(
                "${file:four.txt} would take the files this pipeline reads to more than 33554432 bytes in all"),
            "\(rendered.prefix(300))")
        #expect(rendered.components(separatedBy: ": error: ").count == 2)
    }

    @Test func anInterpolatedFIFOIsRefusedWithoutWaitingForAWriter() async throws {
        let directory = try TemporaryDirectory()
        #expect(mkfifo(directory.file("secret"), 0o600) == 0)
        let source =
            "version: 1\nname: p\nproviders: { a: { type: s3, bucket: b, secretAccessKey: '${file:secret}', "
            + "accessKeyId: k } }\nstore: { providers: [a] }\n"
        let rendered = try #require(await within(10) { outcome(source, directory: directory.path) }, "validate blocked")
        #expect(rendered.contains("is not a regular file"), "\(rendered)")
    }

    @Test(arguments: ["file: k.key", "passphrase: { file: k.key }"])
    func aKeyOrPassphraseFileThatIsAFIFOIsRefused(_ source: String) async throws {
        let directory = try TemporaryDirectory()
        #expect(mkfifo(directory.file("k.key"), 0o600) == 0)
        let pipeline =
            "version: 1\nname: p\nproviders: { a: { type: memory } }\n"
            + "codecs: { v: { type: xchacha20poly1305, keys: [{ id: k1, \(source) }] } }\n"
            + "store: { providers: [a], codec: v }\n"
        let rendered = try #require(
            await within(10) { outcome(pipeline, directory: directory.path, compile: true) }, "compiling blocked")
        #expect(rendered.contains("k.key is not a regular file"), "\(rendered)")
    }

    @Test func aPipelineFileThatIsAFIFOIsRefused() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("p.yaml")
        #expect(mkfifo(path, 0o600) == 0)
        let rendered = try #require(
            await within(10) { () -> String in
                do {
                    _ = try PipelineLoader.load(path: path, registry: BuiltInProviders.registry)
                    return "loaded"
                } catch {
                    return "\(error)"
                }
            }, "loading blocked")
        #expect(rendered.contains("is not a regular file"), "\(rendered)")
    }
}
