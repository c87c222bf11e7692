import CloudSync
import CloudSyncPipeline
import CloudSyncPipelineState
import CloudSyncRunner
import Foundation

/// `cloudsync accounts list [--json]` and `cloudsync accounts remove NAME`: the named accounts `login --account`
/// kept, which any pipeline's provider can sign in with; never a credential's value.
extension CommandLineTool {
    func accountsList(_ parsed: ParsedArguments) -> ExitCode {
        let accounts: [AccountStore.Account]
        do {
            accounts = try AccountStore.existing(environment: environment)?.accounts() ?? []
        } catch {
            standardError("Error: \(error.code): \(error.message)\n")
            return .jobError
        }
        return printAccounts(accounts, json: parsed.flag(Commands.json))
    }

    private func printAccounts(_ accounts: [AccountStore.Account], json: Bool) -> ExitCode {
        func time(_ milliseconds: Int64) -> String { ReportTime.string(milliseconds: milliseconds) }
        if json {
            let objects: [[String: Any]] = accounts.map {
                [
                    "name": $0.name, "type": $0.type, "credentials": $0.credentials,
                    "updatedAt": time($0.updatedAtMilliseconds),
                ]
            }
            let data = (try? JSONSerialization.data(withJSONObject: objects, options: [.sortedKeys])) ?? Data("[]".utf8)
            standardOutput(String(decoding: data, as: UTF8.self) + "\n")
        } else if accounts.isEmpty {
            standardError("no account is kept; sign one in with cloudsync login FILE --provider ID --account NAME\n")
        } else {
            for account in accounts {
                standardOutput(
                    "\(account.name)  \(account.type)  \(account.credentials.joined(separator: ","))  "
                        + "\(time(account.updatedAtMilliseconds))\n")
            }
        }
        return .success
    }

    func accountsRemove(_ parsed: ParsedArguments) -> ExitCode {
        let name = parsed.argument(Commands.accountName) ?? ""
        do {
            guard try AccountStore.existing(environment: environment)?.remove(name) == true else {
                standardError("Account '\(name)' was not kept: nothing to forget.\n")
                return .success
            }
        } catch {
            standardError("Error: \(error.code): \(error.message)\n")
            return .jobError
        }
        standardError("Forgot account '\(name)': every pipeline that signs in with it must sign in again.\n")
        return .success
    }
}
