import CloudSyncHTTP
import Foundation

/// The kinds of JSON answer the Drive emulator gives, each with its fields (what a `fields` selector may name) and
/// what Drive answers of it when the request asks for no fields.
enum DriveResource: Sendable {
    /// `drive#file`: files.get, create, update.
    case file
    /// `drive#fileList`: files.list.
    case fileList
    /// `drive#changeList`: changes.list.
    case changeList
    /// `drive#startPageToken`: changes.getStartPageToken.
    case startPageToken
    /// `drive#about`: about.get, which needs `fields`.
    case about
    /// `drive#generatedIds`: files.generateIds.
    case generatedIDs

    /// The fields of a file: those the emulator answers, and the others of api-facts A.1 it keeps none of (a
    /// selector may name them; they are then absent, as Drive leaves out a field that has no value).
    static let fileFields: [String: DriveFieldSelector.Schema] = [
        "kind": .value, "id": .value, "name": .value, "mimeType": .value, "parents": .value, "size": .value,
        "version": .value, "createdTime": .value, "modifiedTime": .value, "trashed": .value, "spaces": .value,
        "md5Checksum": .value, "sha1Checksum": .value, "sha256Checksum": .value, "appProperties": .map,
        "properties": .map, "headRevisionId": .value, "quotaBytesUsed": .value,
    ]

    /// What a `fields` selector may name in this answer.
    var schema: DriveFieldSelector.Schema {
        let file = DriveFieldSelector.Schema.object(Self.fileFields)
        switch self {
        case .file: return file
        case .fileList:
            return .object(["kind": .value, "incompleteSearch": .value, "nextPageToken": .value, "files": file])
        case .changeList:
            let change = DriveFieldSelector.Schema.object([
                "kind": .value, "changeType": .value, "time": .value, "removed": .value, "fileId": .value,
                "file": file, "driveId": .value,
            ])
            return .object([
                "kind": .value, "nextPageToken": .value, "newStartPageToken": .value, "changes": change,
            ])
        case .startPageToken: return .object(["kind": .value, "startPageToken": .value])
        case .about:
            return .object([
                "kind": .value, "maxUploadSize": .value,
                "user": .object([
                    "kind": .value, "displayName": .value, "emailAddress": .value, "permissionId": .value,
                    "me": .value, "photoLink": .value,
                ]),
                "storageQuota": .object([
                    "limit": .value, "usage": .value, "usageInDrive": .value, "usageInDriveTrash": .value,
                ]),
            ])
        case .generatedIDs: return .object(["kind": .value, "space": .value, "ids": .value])
        }
    }

    /// What Drive answers when the request has no `fields`; nil where `fields` is required.
    var defaultFields: String? {
        let file = "kind,id,name,mimeType"
        switch self {
        case .file: return file
        case .fileList: return "kind,incompleteSearch,nextPageToken,files(\(file))"
        case .changeList:
            return "kind,nextPageToken,newStartPageToken,changes(kind,changeType,time,removed,fileId,file(\(file)))"
        case .startPageToken, .generatedIDs: return "*"
        case .about: return nil
        }
    }

    /// The selector `fields` (a request's parameter, nil or empty when absent) makes, or Drive's 400 refusing it.
    func selector(_ fields: String?) -> Result<DriveFieldSelector, DriveRefusal> {
        guard let text = fields.flatMap({ $0.isEmpty ? nil : $0 }) ?? defaultFields else {
            return .failure(
                DriveRefusal(
                    DriveFilesEmulator.error(
                        400, "required", "The 'fields' parameter is required for this method.", location: "fields")))
        }
        do throws(DriveFieldSelector.Invalid) {
            let selector = try DriveFieldSelector(text)
            try selector.validate(against: schema)
            return .success(selector)
        } catch {
            return .failure(
                DriveRefusal(DriveFilesEmulator.error(400, "invalidParameter", error.message, location: "fields")))
        }
    }

    /// `response` with its JSON body cut to `selector`; any other answer (an error, media, no body) as it is.
    static func cut(_ response: HTTPResponse, to selector: DriveFieldSelector) -> HTTPResponse {
        guard (200..<300).contains(response.status), !selector.everything,
            response.headers["Content-Type"]?.hasPrefix("application/json") == true,
            let object = try? JSONSerialization.jsonObject(with: response.body)
        else { return response }
        return DriveFilesEmulator.jsonResponse(selector.apply(to: object), response.status)
    }
}

/// An answer refusing a request before it does anything.
struct DriveRefusal: Error {
    /// The answer to send.
    var response: HTTPResponse

    init(_ response: HTTPResponse) { self.response = response }
}
