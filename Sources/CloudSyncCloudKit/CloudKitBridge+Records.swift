import CloudSync
import CloudSyncAuth
import CloudSyncHTTP
import Foundation
import Synchronization

/// Records of the zone: saved, deleted and modified through `records/modify`, looked up through `records/lookup`.
extension CloudKitBridge {
    /// Saves with `create` (fail-if-exists), non-atomic, 200 a request: one conflict never fails the batch.
    ///
    /// Conflicts (`EXISTS` or `CONFLICT`, which the live service has been seen to send for an existing record) come
    /// back as the **server's** records, read with one `records/lookup` per 200 of them.
    public func saveRecords(_ records: [CloudKitRecord]) async throws(CloudKitError) -> CloudKitSaveResult {
        var result = CloudKitSaveResult()
        let results = try await modify(records.map { CloudKitOperation(.create, $0) })
        var conflicted: [String] = []
        for (record, outcome) in zip(records, results) {
            switch outcome {
            case .success(let saved): result.saved.append(saved ?? record)
            case .failure(let error) where error.code == .conflict: conflicted.append(record.recordName)
            case .failure(let error): result.errors.append(error)
            }
        }
        for (name, found) in zip(conflicted, try await lookup(conflicted)) {
            switch found {
            case .success(let record?): result.conflicts.append(record)
            case .success(nil):
                result.errors.append(
                    CloudKitError(
                        .conflict, "\(name) already existed, then was gone when its server copy was read; save again",
                        recordName: name))
            case .failure(let error): result.errors.append(error)
            }
        }
        return result
    }

    /// Deletes the named records (`forceDelete`), 200 a request; deleting a missing record succeeds.
    public func deleteRecords(_ names: [String]) async throws(CloudKitError) -> [Result<Void, CloudKitError>] {
        let operations = names.map { CloudKitOperation(.forceDelete, CloudKitRecord(recordName: $0, recordType: "")) }
        return try await modify(operations).map { outcome in
            switch outcome {
            case .success: return .success(())
            case .failure(let error) where error.serverErrorCode == "NOT_FOUND": return .success(())
            case .failure(let error): return .failure(error)
            }
        }
    }

    /// Runs `operations` with `records/modify`, non-atomic, 200 a request, and returns each one's outcome in order:
    /// the record as saved (nil for a delete) or its per-record error.
    ///
    /// With `echoingFields` false the request names no field in `desiredKeys`, so the records answered carry their
    /// names, tags and times without the values just sent (where the service reads an empty list as "all fields",
    /// they come back whole, which costs bytes and nothing else). Throws when a whole request failed (not signed in,
    /// zone missing, throttled past the retries).
    public func modify(_ operations: [CloudKitOperation], echoingFields: Bool = true) async throws(CloudKitError)
        -> [Result<CloudKitRecord?, CloudKitError>]
    {
        var results: [Result<CloudKitRecord?, CloudKitError>] = []
        for start in stride(from: 0, to: operations.count, by: Self.maxOperationsPerRequest) {
            let chunk = Array(operations[start..<min(start + Self.maxOperationsPerRequest, operations.count)])
            var body: [String: Any] = [
                "operations": chunk.map(\.json), "zoneID": ["zoneName": configuration.zoneName], "atomic": false,
            ]
            if !echoingFields { body["desiredKeys"] = [String]() }
            // Forced operations are idempotent, so a lost answer may be asked again; a create may not.
            let retrySafe = chunk.allSatisfy { $0.type != .create && $0.type != .update && $0.type != .replace }
            let answer = try await call(
                .post, configuration.url("records/modify"), body: body, doing: "saving records", retrySafe: retrySafe)
            let entries = answer["records"] as? [[String: Any]] ?? []
            guard entries.count == chunk.count else {
                throw CloudKitError(
                    .error,
                    "CloudKit answered records/modify with \(entries.count) results for \(chunk.count) operations")
            }
            for (operation, entry) in zip(chunk, entries) {
                if entry["serverErrorCode"] is String {
                    var error = CloudKitError.from(
                        dictionary: entry, httpStatus: nil, doing: "saving \(operation.record.recordName)",
                        secrets: secrets)
                    if error.recordName == nil { error.recordName = operation.record.recordName }
                    results.append(.failure(error))
                } else if operation.type == .delete || operation.type == .forceDelete {
                    results.append(.success(nil))
                } else {
                    results.append(.success(CloudKitRecord(json: entry)))
                }
            }
        }
        return results
    }

    /// Reads the named records with `records/lookup`, 200 a request: each one's record, nil when it does not exist
    /// (`NOT_FOUND`), or its per-record error, in order.
    public func lookup(_ names: [String]) async throws(CloudKitError) -> [Result<CloudKitRecord?, CloudKitError>] {
        var results: [Result<CloudKitRecord?, CloudKitError>] = []
        for start in stride(from: 0, to: names.count, by: Self.maxOperationsPerRequest) {
            let chunk = Array(names[start..<min(start + Self.maxOperationsPerRequest, names.count)])
            let body: [String: Any] = [
                "records": chunk.map { ["recordName": $0] }, "zoneID": ["zoneName": configuration.zoneName],
            ]
            let answer = try await call(
                .post, configuration.url("records/lookup"), body: body, doing: "reading records", retrySafe: true)
            let entries = answer["records"] as? [[String: Any]] ?? []
            guard entries.count == chunk.count else {
                throw CloudKitError(
                    .error, "CloudKit answered records/lookup with \(entries.count) results for \(chunk.count) names")
            }
            for (name, entry) in zip(chunk, entries) {
                if entry["serverErrorCode"] is String {
                    var error = CloudKitError.from(
                        dictionary: entry, httpStatus: nil, doing: "reading \(name)", secrets: secrets)
                    if error.serverErrorCode == "NOT_FOUND" {
                        results.append(.success(nil))
                        continue
                    }
                    if error.recordName == nil { error.recordName = name }
                    results.append(.failure(error))
                } else if let record = CloudKitRecord(json: entry), !(entry["deleted"] as? Bool ?? false) {
                    results.append(.success(record))
                } else {
                    results.append(.success(nil))
                }
            }
        }
        return results
    }
}
