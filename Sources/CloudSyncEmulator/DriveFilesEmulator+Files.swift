import CloudSync
import CloudSyncHTTP
import CloudSyncHTTPServer
import CloudSyncOpenSSL
import CloudSyncSodium
import Foundation
import Synchronization

/// `files`: listing with `q`, metadata, downloads, deletes, and uploads (multipart, media and resumable).
extension DriveFilesEmulator {
    // MARK: Files

    /// `file` as Drive answers it to `user`: every field (a `fields` selector then cuts it), the app data folder
    /// in `parents` by its id, checksums only for content that is not a Google Docs type.
    func resource(_ file: File, user: String) -> [String: Any] {
        let folder = Self.appDataFolderID(of: user)
        var object: [String: Any] = [
            "kind": "drive#file", "id": file.id, "name": file.name, "mimeType": file.mimeType,
            "parents": file.parents.map { $0 == Self.appDataFolderAlias ? folder : $0 },
            "size": String(file.content.count), "version": String(file.version),
            "createdTime": Self.rfc3339(file.createdMs), "modifiedTime": Self.rfc3339(file.modifiedMs),
            "trashed": file.trashed, "spaces": [file.space],
        ]
        if !file.mimeType.hasPrefix("application/vnd.google-apps.") {
            object["md5Checksum"] = Hex.encode(MD5.hash(file.content))
            object["sha1Checksum"] = Hex.encode(SHA1.hash(file.content))
            object["sha256Checksum"] = Hex.encode(SHA256.hash(file.content))
        }
        if let properties = file.appProperties { object["appProperties"] = properties }
        if let properties = file.properties { object["properties"] = properties }
        return object
    }

    /// The name requests may give the app data folder, and the emulator's own name for it in ``File/parents``.
    static let appDataFolderAlias = "appDataFolder"

    /// `parent` as ``File/parents`` keeps it: the app data folder's id as its alias.
    static func storedParent(_ parent: String, user: String) -> String {
        parent == appDataFolderID(of: user) ? appDataFolderAlias : parent
    }

    /// `2026-12-01T03:14:13.123Z`.
    static func rfc3339(_ milliseconds: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
    }

    func list(_ request: ReceivedRequest, user: String) -> HTTPResponse {
        let spaces = Set((request.formQuery("spaces") ?? "drive").split(separator: ",").map(String.init))
        guard spaces.isSubset(of: ["drive", "appDataFolder"]) else {
            return Self.invalid("spaces", "Invalid Value")
        }
        var pageSize = 100
        if let text = request.formQuery("pageSize") {
            guard let number = Int(text), (1...1000).contains(number) else {
                return Self.invalid(
                    "pageSize", "Invalid value '\(text)'. Values must be within the range: [1, 1000]")
            }
            pageSize = number
        }
        if let cap = pageSizeCap { pageSize = min(pageSize, cap) }
        let filter: DriveQuery
        do {
            filter = try DriveQuery(request.formQuery("q") ?? "")
        } catch {
            return Self.invalid("q", "Invalid Value")
        }
        let orderBy = request.formQuery("orderBy") ?? "name"
        let nameOrder = self.nameOrder
        guard let order = Self.ordering(orderBy, names: nameOrder) else {
            return Self.invalid("orderBy", "Invalid Value")
        }
        let identity = "\(request.formQuery("q") ?? "")|\(spaces.sorted())|\(orderBy)"
        let epoch = volatile.withLock { $0.pageTokenEpoch }
        var offset = 0
        if let token = request.formQuery("pageToken") {
            guard let decoded = Self.decodePageToken(token), decoded.epoch == epoch,
                decoded.identity == sha256Hex(identity).prefix(16)
            else {
                return Self.invalid("pageToken", "Invalid Value")
            }
            offset = decoded.offset
        }
        let matching = state.withLock { state in
            Array((state.accounts[user]?.files ?? [:]).values)
        }.filter { spaces.contains($0.space) && filter.matches($0, appDataFolderID: Self.appDataFolderID(of: user)) }
            .sorted(by: order)
        var page = Array(matching.dropFirst(offset).prefix(pageSize))
        if nameOrder == .shuffledWithinPage {
            var random = SeededRandom(seed: UInt64(offset) &+ 0x5EED)
            page.shuffle(using: &random)
        }
        var body: [String: Any] = [
            "kind": "drive#fileList", "incompleteSearch": false, "files": page.map { resource($0, user: user) },
        ]
        if offset + page.count < matching.count {
            body["nextPageToken"] = Self.encodePageToken(
                epoch: epoch, offset: offset + page.count, identity: String(sha256Hex(identity).prefix(16)))
        }
        return Self.jsonResponse(body)
    }

    static func ordering(_ text: String, names: NameOrder) -> ((File, File) -> Bool)? {
        var keys: [(File, File) -> Int] = []
        for term in text.split(separator: ",") {
            let words = term.split(separator: " ")
            guard let field = words.first, words.count <= 2 else { return nil }
            let descending = words.count == 2 && words[1].lowercased() == "desc"
            if words.count == 2, !descending, words[1].lowercased() != "asc" { return nil }
            let compare: (File, File) -> Int
            switch field {
            case "name", "name_natural":
                compare =
                    names == .caseInsensitive
                    ? { a, b in
                        let folded = StoreKey.compareBytes(a.name.lowercased(), b.name.lowercased())
                        return folded != 0 ? folded : StoreKey.compareBytes(a.name, b.name)
                    } : { StoreKey.compareBytes($0.name, $1.name) }
            case "modifiedTime":
                compare = { $0.modifiedMs < $1.modifiedMs ? -1 : ($0.modifiedMs == $1.modifiedMs ? 0 : 1) }
            case "createdTime": compare = { $0.createdMs < $1.createdMs ? -1 : ($0.createdMs == $1.createdMs ? 0 : 1) }
            default: return nil
            }
            keys.append(descending ? { -compare($0, $1) } : compare)
        }
        return { a, b in
            for key in keys {
                let result = key(a, b)
                if result != 0 { return result < 0 }
            }
            return StoreKey.bytesPrecede(a.id, b.id)
        }
    }

    static func encodePageToken(epoch: Int, offset: Int, identity: String) -> String {
        Base64URL.encode(Array("\(epoch):\(offset):\(identity)".utf8))
    }

    static func decodePageToken(_ token: String) -> (epoch: Int, offset: Int, identity: Substring)? {
        guard let bytes = Base64URL.decode(token) else { return nil }
        let parts = String(decoding: bytes, as: UTF8.self).split(separator: ":")
        guard parts.count == 3, let epoch = Int(parts[0]), let offset = Int(parts[1]) else { return nil }
        return (epoch, offset, parts[2])
    }

    func get(_ request: ReceivedRequest, user: String) -> HTTPResponse {
        let id = request.captures["id"] ?? ""
        guard let file = state.withLock({ $0.accounts[user]?.files[id] }) else { return Self.notFound(id) }
        guard request.formQuery("alt") == "media" else { return Self.jsonResponse(resource(file, user: user)) }
        return Self.media(file, range: request.headers["Range"])
    }

    /// `file`'s content, or the part a `Range: bytes=…` header asks for.
    ///
    /// The part is 206 with `Content-Range`; a range covering none of it is 416 with `Content-Range: bytes */total`.
    /// A header of another form, or of several ranges, is ignored (RFC 9110 allows it): the whole content, 200.
    static func media(_ file: File, range: String?) -> HTTPResponse {
        let total = file.content.count
        guard let range, let bounds = ByteRange(range) else {
            return HTTPResponse(status: 200, headers: ["Content-Type": file.mimeType], body: file.content)
        }
        guard let slice = bounds.resolved(total: total) else {
            return HTTPResponse(
                status: 416, headers: ["Content-Range": "bytes */\(total)", "Content-Type": "text/plain"],
                body: Data("Requested range not satisfiable".utf8))
        }
        let start = file.content.startIndex
        return HTTPResponse(
            status: 206,
            headers: [
                "Content-Type": file.mimeType,
                "Content-Range": "bytes \(slice.lowerBound)-\(slice.upperBound)/\(total)",
            ], body: file.content.subdata(in: (start + slice.lowerBound)..<(start + slice.upperBound + 1)))
    }

    func delete(_ request: ReceivedRequest, user: String) -> HTTPResponse {
        let id = request.captures["id"] ?? ""
        let now = clock.nowMilliseconds()
        let removed = state.withLock { state -> Bool in
            guard let file = state.accounts[user]?.files.removeValue(forKey: id) else { return false }
            record(&state, user: user, fileID: id, removed: true, space: file.space, now: now)
            return true
        }
        return removed ? HTTPResponse(status: 204) : Self.notFound(id)
    }

    func record(
        _ state: inout SavedState, user: String, fileID: String, removed: Bool, space: String, now: Int64
    ) {
        var account = state.accounts[user] ?? Account()
        account.changes.removeAll { $0.fileID == fileID }
        account.changes.append(
            Change(number: account.nextChange, fileID: fileID, removed: removed, space: space, timeMs: now))
        account.nextChange += 1
        state.accounts[user] = account
    }

    /// Creates (`id` nil) or replaces a file, with `content` when given; nil content keeps what is there.
    ///
    /// A create takes the metadata's `id` when it has one (one `files.generateIds` gave out, which
    /// ``generatedIDRefusal(_:user:space:claiming:)`` checked); `parents`, when given, moves a file that exists.
    @discardableResult
    func store(user: String, id: String?, metadata: [String: Any], content: Data?, parents: [String]? = nil) -> File {
        let now = clock.nowMilliseconds()
        return state.withLock { state -> File in
            var account = state.accounts[user] ?? Account()
            var file: File
            if let id, let existing = account.files[id] {
                file = existing
                file.version += 1
            } else {
                let newID: String
                if let generated = metadata["id"] as? String {
                    newID = generated
                } else {
                    newID = Self.newFileID(&state, user: user)
                }
                file = File(
                    id: newID, name: "Untitled", mimeType: "application/octet-stream", parents: ["root"],
                    content: Data(), createdMs: now, modifiedMs: now, version: 1, trashed: false, appProperties: nil)
                if let parents = metadata["parents"] as? [String], !parents.isEmpty {
                    file.parents = parents.map { Self.storedParent($0, user: user) }
                }
            }
            if let parents { file.parents = parents }
            if let name = metadata["name"] as? String { file.name = name }
            if let mimeType = metadata["mimeType"] as? String { file.mimeType = mimeType }
            if let trashed = metadata["trashed"] as? Bool { file.trashed = trashed }
            if let properties = metadata["appProperties"] as? [String: Any] {
                var merged = file.appProperties ?? [:]
                for (key, value) in properties {
                    merged[key] = value as? String
                }
                file.appProperties = merged
            }
            if let properties = metadata["properties"] as? [String: Any] {
                var merged = file.properties ?? [:]
                for (key, value) in properties {
                    merged[key] = value as? String
                }
                file.properties = merged
            }
            if let content { file.content = content }
            file.modifiedMs = now
            account.files[file.id] = file
            state.accounts[user] = account
            record(&state, user: user, fileID: file.id, removed: false, space: file.space, now: now)
            return file
        }
    }

    /// The 403 for a write that would take `user` past the storage limit, or nil.
    func overLimit(user: String, replacing id: String?, newSize: Int) -> HTTPResponse? {
        guard let limit = storageLimitBytes else { return nil }
        let used = usage(of: user)
        let old = id.flatMap { id in state.withLock { $0.accounts[user]?.files[id]?.content.count } } ?? 0
        guard used - Int64(old) + Int64(newSize) > limit else { return nil }
        return Self.error(
            403, "storageQuotaExceeded", "The user's Drive storage quota has been exceeded.", domain: "usageLimits")
    }

    func usage(of user: String) -> Int64 {
        state.withLock { state in
            (state.accounts[user]?.files ?? [:]).values.reduce(Int64(0)) { $0 + Int64($1.content.count) }
        }
    }

    static func metadata(_ data: Data) -> [String: Any]? {
        if data.isEmpty { return [:] }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }

    func create(_ request: ReceivedRequest, user: String, uploadType: String?) -> HTTPResponse {
        write(request, user: user, id: nil, uploadType: uploadType)
    }

    func update(_ request: ReceivedRequest, user: String, uploadType: String?) -> HTTPResponse {
        let id = request.captures["id"] ?? ""
        guard let file = state.withLock({ $0.accounts[user]?.files[id] }) else { return Self.notFound(id) }
        switch Self.moved(
            file, adding: request.formQuery("addParents"), removing: request.formQuery("removeParents"), user: user)
        {
        case .failure(let refusal): return refusal.response
        case .success(let parents):
            return write(request, user: user, id: id, uploadType: uploadType, parents: parents)
        }
    }

    /// The parents `file` has after `addParents` and `removeParents`; nil when neither is given.
    ///
    /// Both are comma-separated ids, `appDataFolder` or the folder's id naming the app data folder. A file may not
    /// leave its space (api-facts A.1: files in the app data folder cannot be moved to another space): 403
    /// `cannotChangeSpace` (a reason the emulator chose; api-facts names none).
    static func moved(_ file: File, adding: String?, removing: String?, user: String)
        -> Result<[String]?, DriveRefusal>
    {
        func ids(_ text: String?) -> [String] {
            (text ?? "").split(separator: ",").map {
                storedParent($0.trimmingCharacters(in: .whitespaces), user: user)
            }
        }
        let (added, removed) = (ids(adding), ids(removing))
        if added.isEmpty, removed.isEmpty { return .success(nil) }
        var parents = file.parents.filter { !removed.contains($0) }
        for parent in added where !parents.contains(parent) { parents.append(parent) }
        let leaves =
            file.space == appDataFolderAlias ? parents != [appDataFolderAlias] : parents.contains(appDataFolderAlias)
        guard !leaves else {
            return .failure(
                DriveRefusal(
                    error(
                        403, "cannotChangeSpace",
                        "Files in the app data folder cannot be moved to another space, nor other files into it.")))
        }
        return .success(parents)
    }

    /// The answer refusing a create's or an update's metadata before anything is stored, or nil: an update may not
    /// set `parents` (only `addParents`/`removeParents` move a file); a create's `id` must be one
    /// ``generateIDs(_:user:)`` gave out.
    func metadataRefusal(_ metadata: [String: Any], user: String, updating id: String?) -> HTTPResponse? {
        if id != nil {
            guard metadata["parents"] == nil else {
                return Self.error(
                    403, "fieldNotWritable",
                    "The parents field is not directly writable in update requests. Use the addParents and "
                        + "removeParents parameters instead.")
            }
            return nil
        }
        guard let generated = metadata["id"] else { return nil }
        return generatedIDRefusal(generated as? String ?? "", user: user, space: Self.space(of: metadata, user: user))
    }

    /// The space a create's metadata puts the file in: the app data folder when it is among its `parents`.
    static func space(of metadata: [String: Any], user: String) -> String {
        let parents = (metadata["parents"] as? [String] ?? []).map { storedParent($0, user: user) }
        return parents.contains(appDataFolderAlias) ? appDataFolderAlias : "drive"
    }

    func write(
        _ request: ReceivedRequest, user: String, id: String?, uploadType: String?, parents: [String]? = nil
    ) -> HTTPResponse {
        let isUpload = request.path.hasPrefix("/upload/")
        var metadata: [String: Any] = [:]
        var content: Data?
        switch isUpload ? uploadType ?? "media" : nil {
        case nil:
            guard let parsed = Self.metadata(request.body) else {
                return Self.error(400, "parseError", "Parse Error")
            }
            metadata = parsed
        case "media"?:
            content = request.body
        case "multipart"?:
            guard let parts = MIMEMultipart.parse(request.body, contentType: request.headers["Content-Type"]),
                parts.count == 2, let parsed = Self.metadata(parts[0].body)
            else {
                return Self.error(
                    400, "badContent", "Bad multipart body: expected a JSON metadata part and a media part")
            }
            metadata = parsed
            if metadata["mimeType"] == nil, let type = parts[1].headers["Content-Type"] {
                metadata["mimeType"] = type
            }
            content = parts[1].body
        case "resumable"?:
            guard let parsed = Self.metadata(request.body) else {
                return Self.error(400, "parseError", "Parse Error")
            }
            if parsed["mimeType"] == nil, let type = request.headers["X-Upload-Content-Type"] {
                metadata["mimeType"] = type
            }
            metadata.merge(parsed) { $1 }
            if let refused = metadataRefusal(metadata, user: user, updating: id) { return refused }
            let total = request.headers["X-Upload-Content-Length"].flatMap { Int($0) }
            let uploadID = randomToken("AEnB2U", bytes: 24)
            volatile.withLock {
                $0.sessions[uploadID] = Session(
                    user: user, fileID: id, metadata: metadata, total: total, received: Data(), parents: parents,
                    fields: request.formQuery("fields"))
            }
            // On the scheme and host the session was started on: https:// behind `cloudsync-emulator --tls`.
            let location = request.origin + "/upload/drive/v3/files?uploadType=resumable&upload_id=\(uploadID)"
            return HTTPResponse(
                status: 200, headers: ["Location": location, "X-GUploader-UploadID": uploadID, "Content-Length": "0"])
        case let other?:
            return Self.invalid("uploadType", "Invalid value '\(other)' for uploadType")
        }
        if let refused = metadataRefusal(metadata, user: user, updating: id) { return refused }
        if let content, let refused = overLimit(user: user, replacing: id, newSize: content.count) { return refused }
        if id == nil, let generated = metadata["id"] as? String,
            let refused = generatedIDRefusal(
                generated, user: user, space: Self.space(of: metadata, user: user), claiming: true)
        {
            return refused
        }
        let file = store(user: user, id: id, metadata: metadata, content: content, parents: parents)
        return Self.jsonResponse(resource(file, user: user))
    }

    /// One `PUT` to a resumable upload session: its bytes at the `Content-Range` given, then the file once every byte
    /// came (`308` with the `Range` received until then).
    func chunk(_ request: ReceivedRequest, user: String) -> HTTPResponse {
        guard let uploadID = request.formQuery("upload_id"),
            var session = volatile.withLock({ $0.sessions[uploadID] }), session.user == user
        else {
            return Self.error(404, "notFound", "Upload session not found or expired; start a new upload.")
        }
        let range = request.headers["Content-Range"] ?? "bytes */*"
        guard let parsed = Self.parseContentRange(range) else {
            return Self.error(400, "badRequest", "Invalid Content-Range: \(range)")
        }
        if let total = parsed.total {
            if let known = session.total, known != total {
                return Self.error(400, "badRequest", "Content-Range total \(total) differs from \(known)")
            }
            session.total = total
        }
        if let first = parsed.first {
            guard first <= session.received.count else {
                return Self.error(
                    400, "badRequest",
                    "Content-Range starts at \(first) but only \(session.received.count) bytes were received")
            }
            let isLast = session.total.map { first + request.body.count >= $0 } ?? false
            if !isLast, request.body.count % Self.chunkGranularity != 0 {
                return Self.error(
                    400, "badRequest",
                    "Invalid request. The number of bytes uploaded is required to be equal or greater than 262144, "
                        + "except for the final request (it's recommended to be the exact multiple of 262144).")
            }
            session.received = session.received.prefix(first) + request.body
        }
        if let total = session.total, session.received.count >= total {
            return finish(session, total: total, uploadID: uploadID, user: user)
        }
        let stored = session
        volatile.withLock { $0.sessions[uploadID] = stored }
        var headers: HTTPHeaders = ["Content-Length": "0", "X-GUploader-UploadID": uploadID]
        if !session.received.isEmpty { headers["Range"] = "bytes=0-\(session.received.count - 1)" }
        return HTTPResponse(status: 308, headers: headers)
    }

    /// Ends upload session `uploadID` once its `total` bytes came: stores the file and answers with it.
    ///
    /// More bytes than `total` are refused, the session kept as it was; refusing the file (over the storage limit,
    /// the file it updates gone, a generated id refused) ends the session too.
    private func finish(_ session: Session, total: Int, uploadID: String, user: String) -> HTTPResponse {
        if session.received.count > total {
            return Self.error(400, "badRequest", "More bytes were sent than Content-Range announced")
        }
        if let refused = overLimit(user: user, replacing: session.fileID, newSize: total) {
            volatile.withLock { _ = $0.sessions.removeValue(forKey: uploadID) }
            return refused
        }
        if let fileID = session.fileID, state.withLock({ $0.accounts[user]?.files[fileID] }) == nil {
            volatile.withLock { _ = $0.sessions.removeValue(forKey: uploadID) }
            return Self.notFound(fileID)
        }
        if session.fileID == nil, let generated = session.metadata["id"] as? String,
            let refused = generatedIDRefusal(
                generated, user: user, space: Self.space(of: session.metadata, user: user), claiming: true)
        {
            volatile.withLock { _ = $0.sessions.removeValue(forKey: uploadID) }
            return refused
        }
        let file = store(
            user: user, id: session.fileID, metadata: session.metadata, content: session.received,
            parents: session.parents)
        volatile.withLock { _ = $0.sessions.removeValue(forKey: uploadID) }
        // The fields were checked when the session started.
        let selector = (try? DriveResource.file.selector(session.fields).get()) ?? .all
        return DriveResource.cut(Self.jsonResponse(resource(file, user: user)), to: selector)
    }

    /// `bytes a-b/total`, `bytes */total`, `bytes a-b/*` or `bytes */*`.
    static func parseContentRange(_ text: String) -> (first: Int?, total: Int?)? {
        guard text.hasPrefix("bytes ") else { return nil }
        let parts = text.dropFirst(6).split(separator: "/")
        guard parts.count == 2 else { return nil }
        let total = parts[1] == "*" ? nil : Int(parts[1])
        if parts[1] != "*", total == nil { return nil }
        if parts[0] == "*" { return (nil, total) }
        let bounds = parts[0].split(separator: "-")
        guard bounds.count == 2, let first = Int(bounds[0]), let last = Int(bounds[1]), last >= first else {
            return nil
        }
        return (first, total)
    }
}
