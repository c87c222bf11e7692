import CloudSync
import CloudSyncHTTP
import CloudSyncHTTPServer
import CloudSyncSodium
import Foundation
import Synchronization

/// `about` and the change feed (`changes/startPageToken`, `changes`).
extension DriveFilesEmulator {
    // MARK: About and changes

    func about(_ request: ReceivedRequest, user: String) -> HTTPResponse {
        // `fields`, which about.get requires, is checked before (``DriveResource/about``).
        let used = usage(of: user)
        var quota: [String: Any] = [
            "usage": String(used), "usageInDrive": String(used), "usageInDriveTrash": "0",
        ]
        if let limit = storageLimitBytes { quota["limit"] = String(limit) }
        return Self.jsonResponse([
            "kind": "drive#about",
            "user": [
                "kind": "drive#user", "displayName": user.split(separator: "@").first.map(String.init) ?? user,
                "emailAddress": user, "permissionId": Self.permissionID(of: user), "me": true,
            ],
            "storageQuota": quota, "maxUploadSize": "5497558138880",
        ])
    }

    func startPageToken(_ request: ReceivedRequest, user: String) -> HTTPResponse {
        let next = state.withLock { $0.accounts[user]?.nextChange ?? 1 }
        return Self.jsonResponse(["kind": "drive#startPageToken", "startPageToken": String(next)])
    }

    func changes(_ request: ReceivedRequest, user: String) -> HTTPResponse {
        guard let tokenText = request.formQuery("pageToken") else {
            return Self.error(400, "required", "Required parameter: pageToken", location: "pageToken")
        }
        guard let token = Int(tokenText), token >= 1 else { return Self.invalid("pageToken", "Invalid Value") }
        let spaces = Set((request.formQuery("spaces") ?? "drive").split(separator: ",").map(String.init))
        var pageSize = 100
        if let text = request.formQuery("pageSize") {
            guard let number = Int(text), (1...1000).contains(number) else {
                return Self.invalid("pageSize", "Invalid value '\(text)'. Values must be within the range: [1, 1000]")
            }
            pageSize = number
        }
        let includeRemoved = request.formQuery("includeRemoved") != "false"
        let (account, next) = state.withLock { state in
            (state.accounts[user] ?? Account(), state.accounts[user]?.nextChange ?? 1)
        }
        let pending = account.changes.filter {
            $0.number >= token && spaces.contains($0.space) && (includeRemoved || !$0.removed)
        }
        let page = pending.prefix(pageSize)
        var body: [String: Any] = [
            "kind": "drive#changeList",
            "changes": page.map { change -> [String: Any] in
                var object: [String: Any] = [
                    "kind": "drive#change", "changeType": "file", "fileId": change.fileID, "removed": change.removed,
                    "time": Self.rfc3339(change.timeMs),
                ]
                if !change.removed, let file = account.files[change.fileID] {
                    object["file"] = resource(file, user: user)
                }
                return object
            },
        ]
        if pending.count > page.count, let following = pending.dropFirst(page.count).first {
            body["nextPageToken"] = String(following.number)
        } else {
            body["newStartPageToken"] = String(next)
        }
        return Self.jsonResponse(body)
    }
}
