import CloudSync
import CloudSyncPipeline
import CloudSyncRunner
import Foundation

/// `cloudsync outbox list|flush|discard FILE`.
///
/// `flush` and `discard --yes` open the pipeline's run session, so they wait for no one and are refused (75) while a
/// run holds the lock; `list` and `discard` without `--yes` open it read-only and never are.
extension CommandLineTool {
    func outboxList(_ parsed: ParsedArguments) async -> ExitCode {
        let json = parsed.flag(Commands.json)
        let pending: [OutboxEntry]
        switch await pendingWrites(parsed.argument(Commands.file) ?? "") {
        case .success(let entries): pending = entries
        case .failure(let stopped): return stopped.status
        }
        if json {
            standardOutput(encoded(pending.map(OutboxLine.init)))
        } else {
            for entry in pending { standardOutput(describe(entry) + "\n") }
        }
        standardError("\(pending.count) queued write\(pending.count == 1 ? "" : "s")\n")
        return .success
    }

    func outboxFlush(_ parsed: ParsedArguments) async -> ExitCode {
        guard let compiled = compile(parsed.argument(Commands.file) ?? "") else { return .usage }
        let session: RunSession
        switch await writingSession(compiled, logger: requestLogger(parsed)) {
        case .success(let opened): session = opened
        case .failure(let stopped): return stopped.status
        }
        do {
            let result = try await session.store.flushOutbox()
            standardError("drained \(result.drained), remaining \(result.remaining), dropped \(result.dropped)\n")
            for (provider, held) in session.heldWrites().sorted(by: { $0.key < $1.key }) {
                standardError("held \(held.entries) for \(provider): \(held.message)\n")
            }
        } catch {
            standardError("Error: \(error)\n")
            await session.close()
            return .jobError
        }
        await session.close()
        return .success
    }

    /// Discards the selected writes with `--yes`; without it, says which it would discard and exits 64.
    func outboxDiscard(_ parsed: ParsedArguments) async -> ExitCode {
        let file = parsed.argument(Commands.file) ?? ""
        guard let compiled = compile(file, unsetVariables: .deferred) else { return .usage }
        let keys = parsed.values(Commands.discardKey)
        let provider = parsed.value(Commands.discardProvider)
        if let provider {
            let ids = compiled.spec.providers.map(\.id)
            guard ids.contains(provider) else {
                var message = "no provider '\(provider)' in \(file); its providers: " + ids.joined(separator: ", ")
                if let guess = closest(provider, among: ids) { message += "; did you mean '\(guess)'?" }
                return usageError(message, Commands.outboxDiscard)
            }
        }
        let selected: @Sendable (OutboxEntry) -> Bool = { entry in
            (keys.isEmpty || keys.contains { globMatches($0, entry.key) })
                && (provider.map { $0 == entry.provider } ?? true)
        }
        guard parsed.flag(Commands.discardYes) else {
            let pending: [OutboxEntry]
            switch await pendingWrites(file, compiled) {
            case .success(let entries): pending = entries
            case .failure(let stopped): return stopped.status
            }
            let chosen = pending.filter(selected)
            standardError(
                "would discard \(chosen.count) of \(pending.count) queued write\(pending.count == 1 ? "" : "s")"
                    + (chosen.isEmpty ? "\n" : ":\n"))
            for entry in chosen { standardError("  " + describe(entry) + "\n") }
            return usageError("outbox discard drops writes for good; add --yes to discard them", Commands.outboxDiscard)
        }
        let session: RunSession
        switch await writingSession(compiled) {
        case .success(let opened): session = opened
        case .failure(let stopped): return stopped.status
        }
        let count = session.store.discardPendingWrites(where: selected)
        let left = session.outbox?.pending.count ?? 0
        standardError(
            "discarded \(count) queued write\(count == 1 ? "" : "s")" + (left > 0 ? "; \(left) still queued" : "")
                + "\n")
        await session.close()
        return .success
    }

    /// Whether the pipeline's outbox database exists; says it is empty when it does not.
    private func outboxExists(_ compiled: CompiledPipeline) -> Bool {
        // A shared state's outbox is a table the session finds empty or not.
        guard
            compiled.spec.sharedState != nil
                || FileManager.default.fileExists(atPath: compiled.spec.state + "/outbox.db")
        else {
            standardError(
                "the outbox of \(compiled.spec.name) is empty (\(compiled.spec.state)/outbox.db does not exist yet)\n")
            return false
        }
        return true
    }

    /// The writes queued in the outbox of the pipeline `file`, read without taking its lock.
    private func pendingWrites(
        _ file: String, _ compiledAlready: CompiledPipeline? = nil
    ) async -> Result<[OutboxEntry], Stopped> {
        guard let compiled = compiledAlready ?? compile(file, unsetVariables: .deferred) else {
            return .failure(Stopped(status: .usage))
        }
        guard outboxExists(compiled) else { return .success([]) }
        let session: RunSession
        do {
            session = try await RunSession.open(compiled, access: .dryRun)
        } catch {
            return .failure(Stopped(status: refused(error, compiled)))
        }
        let pending = session.outbox?.pending ?? []
        await session.close()
        return .success(pending)
    }

    /// The entry's key, operation, provider and schedule with ISO 8601 times, never its value.
    func describe(_ entry: OutboxEntry) -> String {
        "\(entry.operation) \"\(entry.key)\" on \(entry.provider) (attempt \(entry.attempts), "
            + "next at \(isoTimestamp(entry.nextAttemptAtMs)), queued at \(isoTimestamp(entry.enqueuedAtMs)), "
            + "last error \(entry.lastErrorCode))"
    }
}

/// A command that ended before it got what it needed, with the exit status it ends with (its message printed).
struct Stopped: Error {
    let status: ExitCode
}

/// What `outbox list --json` prints for one entry: everything but the value, times in ISO 8601 UTC.
struct OutboxLine: Encodable {
    let id: Int64
    let key: String
    let operation: String
    let provider: String
    let attempts: Int
    let nextAttemptAt: String
    let enqueuedAt: String
    let lastErrorCode: String

    init(_ entry: OutboxEntry) {
        id = entry.id
        key = entry.key
        operation = entry.operation.rawValue
        provider = entry.provider
        attempts = entry.attempts
        nextAttemptAt = isoTimestamp(entry.nextAttemptAtMs)
        enqueuedAt = isoTimestamp(entry.enqueuedAtMs)
        lastErrorCode = entry.lastErrorCode
    }
}

/// Milliseconds since 1970 as ISO 8601 in UTC with milliseconds, as the reports write times.
func isoTimestamp(_ milliseconds: Int64) -> String {
    ReportTime.string(milliseconds: milliseconds)
}

extension CommandLineTool {
    /// The pipeline's session for changing its outbox, holding its lock; stops with success when there is no outbox
    /// yet (nothing to change), and with the refusal's status when another command holds the pipeline.
    func writingSession(
        _ compiled: CompiledPipeline, logger: ProviderLogger = .disabled
    ) async -> Result<RunSession, Stopped> {
        guard outboxExists(compiled) else { return .failure(Stopped(status: .success)) }
        do {
            return .success(try await RunSession.open(compiled, access: .write, logger: logger))
        } catch {
            return .failure(Stopped(status: refused(error, compiled)))
        }
    }
}
