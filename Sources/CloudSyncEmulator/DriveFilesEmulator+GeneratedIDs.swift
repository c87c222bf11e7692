import CloudSync
import CloudSyncHTTP
import CloudSyncHTTPServer
import Foundation

/// File ids: those creates make, and those `files.generateIds` gives out ahead for a create to use (so that a
/// retried create cannot make a second file).
extension DriveFilesEmulator {
    // MARK: Ids

    /// The next file id of `user`'s, from the emulator's counter: `1`, 24 hex digits and the number.
    static func newFileID(_ state: inout SavedState, user: String) -> String {
        let number = state.nextFileNumber
        state.nextFileNumber += 1
        return "1" + String(sha256Hex("\(user)/\(number)").prefix(24)) + "\(number)"
    }

    /// `files.generateIds`: `count` (1 to 1000, default 10) ids for `space` (`drive`, the default, or
    /// `appDataFolder`) and `type` (`files`, the default, or `shortcuts`).
    func generateIDs(_ request: ReceivedRequest, user: String) -> HTTPResponse {
        var count = 10
        if let text = request.formQuery("count") {
            guard let number = Int(text), (1...1000).contains(number) else {
                return Self.invalid("count", "Invalid value '\(text)'. Values must be within the range: [1, 1000]")
            }
            count = number
        }
        let space = request.formQuery("space") ?? "drive"
        guard space == "drive" || space == Self.appDataFolderAlias else {
            return Self.invalid("space", "Invalid Value")
        }
        guard ["files", "shortcuts"].contains(request.formQuery("type") ?? "files") else {
            return Self.invalid("type", "Invalid Value")
        }
        let ids = state.withLock { state -> [String] in
            var account = state.accounts[user] ?? Account()
            var ids: [String] = []
            for _ in 0..<count {
                let id = Self.newFileID(&state, user: user)
                account.generatedIDs = (account.generatedIDs ?? [:]).merging([id: space]) { $1 }
                ids.append(id)
            }
            state.accounts[user] = account
            return ids
        }
        return Self.jsonResponse(["kind": "drive#generatedIds", "space": space, "ids": ids])
    }

    /// The answer refusing a create of `id` in `space`, or nil when `id` may be used.
    ///
    /// Refused: a file of that id exists (409
    /// `duplicate`; the emulator's choice, api-facts has no answer for it), or it is not one `files.generateIds`
    /// gave `user` for `space` and no create used yet (400 `invalid`). `claiming` takes it: no other create may use
    /// it.
    func generatedIDRefusal(_ id: String, user: String, space: String, claiming: Bool = false) -> HTTPResponse? {
        let found = state.withLock { state -> (exists: Bool, space: String?) in
            let account = state.accounts[user]
            let result = (account?.files[id] != nil, account?.generatedIDs?[id])
            if claiming, !result.0, result.1 == space { state.accounts[user]?.generatedIDs?.removeValue(forKey: id) }
            return result
        }
        if found.exists {
            return Self.error(409, "duplicate", "A file already exists with the provided ID.", status: "ALREADY_EXISTS")
        }
        guard let generated = found.space else {
            return Self.error(
                400, "invalid", "The provided file ID is not usable: files.generateIds did not give it out.")
        }
        guard generated == space else {
            return Self.error(
                400, "invalid", "The provided file ID was generated for the space \(generated), not \(space).")
        }
        return nil
    }
}
