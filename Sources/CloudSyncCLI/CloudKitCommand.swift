import CloudSync
import CloudSyncCloudKit
import CloudSyncPipeline
import CloudSyncRunner
import Foundation

/// `cloudsync cloudkit status|ensure-zone|changes|delete-zone FILE --provider ID`: what a developer reaches for while
/// setting a container up, over the provider's own bridge (its tokens, rotated and kept in the state database).
extension CommandLineTool {
    func cloudkitStatus(_ parsed: ParsedArguments) async -> ExitCode {
        await withBridge(parsed, Commands.cloudkitStatus) { bridge, id in
            let configuration = bridge.configuration
            let status = await bridge.accountStatus()
            var user: String?
            var zoneExists: Bool?
            var problem: (any Error)?
            if status == .available {
                do {
                    user = try await bridge.userRecordID()
                    zoneExists = try await bridge.zoneExists()
                } catch {
                    problem = error
                }
            }
            if parsed.flag(Commands.json) {
                var object: [String: Any] = [
                    "provider": id, "container": configuration.container, "environment": configuration.environment,
                    "zone": configuration.zoneName, "accountStatus": status.rawValue,
                ]
                if let user { object["userRecordName"] = user }
                if let zoneExists { object["zoneExists"] = zoneExists }
                standardOutput(jsonLine(object))
            } else {
                var text = "provider \(id): \(configuration.container) (\(configuration.environment))\n"
                text += "account: \(status.rawValue)\(user.map { ", user record \($0)" } ?? "")\n"
                if let zoneExists {
                    text +=
                        "zone \(configuration.zoneName): \(zoneExists ? "exists" : "missing (cloudsync cloudkit ensure-zone)")\n"
                }
                standardOutput(text)
            }
            if status == .noAccount {
                standardError(
                    "Not signed in: run `cloudsync login \(parsed.argument(Commands.file) ?? "FILE") --provider \(id)`.\n"
                )
            }
            if let problem { throw problem }
            return status == .available ? .success : .failure
        }
    }

    func cloudkitEnsureZone(_ parsed: ParsedArguments) async -> ExitCode {
        await withBridge(parsed, Commands.cloudkitEnsureZone) { bridge, _ in
            try await bridge.ensureZone()
            standardOutput("zone \(bridge.configuration.zoneName) exists in \(bridge.configuration.container)\n")
            return .success
        }
    }

    func cloudkitChanges(_ parsed: ParsedArguments) async -> ExitCode {
        await withBridge(parsed, Commands.cloudkitChanges) { bridge, _ in
            let changes = try await bridge.fetchChanges(since: parsed.value(Commands.cloudkitSince))
            let json = parsed.flag(Commands.json)
            for record in changes.records {
                let body = String(decoding: record.jsonData(), as: UTF8.self)
                standardOutput(json ? "{\"record\":\(body)}\n" : "record \(record.recordName): \(body)\n")
            }
            for name in changes.deletedRecordNames {
                standardOutput(json ? jsonLine(["deleted": name]) : "deleted \(name)\n")
            }
            let token = changes.syncToken ?? ""
            standardOutput(json ? jsonLine(["syncToken": token]) : "syncToken \(token)\n")
            return .success
        }
    }

    func cloudkitDeleteZone(_ parsed: ParsedArguments) async -> ExitCode {
        guard parsed.flag(Commands.cloudkitDeleteYes) else {
            return usageError(
                "delete-zone deletes the zone and every record in it; add --yes to delete it",
                Commands.cloudkitDeleteZone)
        }
        return await withBridge(parsed, Commands.cloudkitDeleteZone) { bridge, _ in
            try await bridge.deleteZone()
            standardOutput("zone \(bridge.configuration.zoneName) deleted from \(bridge.configuration.container)\n")
            return .success
        }
    }

    /// Opens the pipeline (taking its lock, so rotated tokens are kept), finds the cloudKit provider `--provider`
    /// names and runs `body` with its bridge; a bridge error prints its code and exits 1.
    private func withBridge(
        _ parsed: ParsedArguments, _ command: CommandSpec,
        _ body: (CloudKitBridge, String) async throws -> ExitCode
    ) async -> ExitCode {
        let file = parsed.argument(Commands.file) ?? ""
        guard let compiled = compile(file) else { return .usage }
        let id = parsed.value(Commands.cloudkitProvider) ?? ""
        let cloudKitIDs = compiled.spec.providers.filter { $0.type == "cloudKit" }.map(\.id)
        guard let spec = compiled.spec.providers.first(where: { $0.id == id }) else {
            var message =
                "no provider '\(id)' in \(file); its cloudKit providers: "
                + (cloudKitIDs.isEmpty ? "none" : cloudKitIDs.joined(separator: ", "))
            if let guess = closest(id, among: cloudKitIDs) { message += "; did you mean '\(guess)'?" }
            return usageError(message, command)
        }
        guard spec.type == "cloudKit" else {
            return usageError("provider '\(id)' is \(spec.type), not cloudKit", command)
        }
        let session: RunSession
        do {
            session = try await RunSession.open(compiled, access: .write)
        } catch {
            return refused(error, compiled)
        }
        defer { Task { await session.close() } }
        guard let provider = session.providers[id] as? CloudKitProvider else {
            let why = session.unopened[id]?.description ?? "it could not be opened"
            standardError("Error: provider '\(id)' could not be opened: \(why)\n")
            await session.close()
            return .jobError
        }
        let status: ExitCode
        do {
            status = try await body(provider.bridge, id)
        } catch {
            let secrets = spec.secrets + (provider.bridge.webAuthToken.value.map { [$0] } ?? [])
            let text = (error as? CloudKitError)?.description ?? "\(error)"
            let message = secrets.filter { !$0.isEmpty }.reduce(text) {
                $0.replacingOccurrences(of: $1, with: "<redacted>")
            }
            standardError("Error: \(message)\n")
            status = .failure
        }
        await session.close()
        return status
    }

    private func jsonLine(_ object: [String: Any]) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self) + "\n"
    }
}
