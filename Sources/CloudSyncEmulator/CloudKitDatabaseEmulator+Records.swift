import CloudSync
import CloudSyncHTTP
import CloudSyncHTTPServer
import CloudSyncSodium
import Foundation
import Synchronization

/// `records/lookup`, `records/modify` (every operation type, one per record) and `changes/zone`.
extension CloudKitDatabaseEmulator {
    // MARK: Records

    func recordJSON(_ name: String, _ record: SavedState.Record, zone: String, _ context: Context)
        -> [String: Any]
    {
        if record.deleted { return ["recordName": name, "deleted": true, "zoneID": zoneID(zone, context)] }
        let stored = (try? JSONSerialization.jsonObject(with: Data(record.fields.utf8))) as? [String: Any] ?? [:]
        let fields = stored.mapValues { Self.answered($0, base: context.base) }
        return [
            "recordName": name, "recordType": record.recordType, "fields": fields, "recordChangeTag": record.changeTag,
            "zoneID": zoneID(zone, context),
            "created": ["timestamp": NSNumber(value: record.createdMs), "userRecordName": context.user],
            "modified": ["timestamp": NSNumber(value: record.modifiedMs), "userRecordName": context.user],
        ]
    }

    /// `answer` (a record's, or an error's) with only the fields `desiredKeys` names, when it names any (an empty list
    /// as ``Configuration/emptyDesiredKeys`` reads it); the record's name, type, tag and times always come back.
    static func limited(_ answer: [String: Any], to desiredKeys: Any?, _ configuration: Configuration)
        -> [String: Any]
    {
        guard let desired = desiredKeys as? [String], let fields = answer["fields"] as? [String: Any] else {
            return answer
        }
        if desired.isEmpty && configuration.emptyDesiredKeys == .allFields { return answer }
        var limited = answer
        limited["fields"] = fields.filter { desired.contains($0.key) }
        return limited
    }

    /// The zone a records call names, or the answer refusing it.
    ///
    /// `names` are the records it is about, each given a `ZONE_NOT_FOUND` of its own when
    /// ``Configuration/missingZone`` says so.
    func zone(of body: [String: Any], _ context: Context, _ state: SavedState, names: [String]) -> ZoneCheck {
        let name = Self.zoneName(body["zoneID"]) ?? "_defaultZone"
        if name == "_defaultZone" {
            if context.configuration.defaultZoneRecords == .refused { return .refused(Self.defaultZoneRefusal) }
            return .found(name)
        }
        guard state.databases[context.database]?.zones[name] != nil else {
            if context.configuration.missingZone == .perRecord {
                let records = names.map { record in
                    Self.error(
                        "ZONE_NOT_FOUND", "zone \(name) does not exist",
                        extra: ["recordName": record, "zoneID": zoneID(name, context)])
                }
                return .refused((200, ["records": records]))
            }
            return .refused(
                (
                    404,
                    Self.error(
                        "ZONE_NOT_FOUND", "zone \(name) does not exist", extra: ["zoneID": zoneID(name, context)])
                ))
        }
        return .found(name)
    }

    enum ZoneCheck {
        case found(String)
        case refused(Answer)
    }

    func lookupRecords(_ body: [String: Any], _ context: Context, _ state: SavedState) -> Answer {
        let names = (body["records"] as? [[String: Any]] ?? []).map { $0["recordName"] as? String ?? "" }
        guard names.count <= context.configuration.maxOperations else {
            return (
                400,
                Self.error(
                    "BAD_REQUEST",
                    "records/lookup takes at most \(context.configuration.maxOperations) records, "
                        + "not \(names.count)")
            )
        }
        let zone: String
        switch self.zone(of: body, context, state, names: names) {
        case .refused(let answer): return answer
        case .found(let name): zone = name
        }
        let records = state.databases[context.database]?.zones[zone]?.records ?? [:]
        let failing = recordFailures.withLock { $0 }
        let answers: [[String: Any]] = names.map { name in
            if let failure = failing[name] {
                return Self.error(failure.code, failure.reason, extra: ["recordName": name])
            }
            guard let record = records[name], !record.deleted else {
                return Self.error("NOT_FOUND", "record \(name) does not exist", extra: ["recordName": name])
            }
            return Self.limited(
                recordJSON(name, record, zone: zone, context), to: body["desiredKeys"], context.configuration)
        }
        return (200, ["records": answers])
    }

    func modifyRecords(_ body: [String: Any], _ context: Context, _ state: inout SavedState) -> Answer {
        let operations = body["operations"] as? [[String: Any]] ?? []
        guard operations.count <= context.configuration.maxOperations else {
            return (
                400,
                Self.error(
                    "BAD_REQUEST",
                    "records/modify takes at most \(context.configuration.maxOperations) operations, "
                        + "not \(operations.count)")
            )
        }
        let zone: String
        let names = operations.map { ($0["record"] as? [String: Any])?["recordName"] as? String ?? "" }
        switch self.zone(of: body, context, state, names: names) {
        case .refused(let answer): return answer
        case .found(let name): zone = name
        }
        let atomic = (body["atomic"] as? Bool) ?? ((body["atomic"] as? NSNumber)?.boolValue ?? false)
        sweepAssets(context.now, context.configuration, &state)
        var working = state
        if working.databases[context.database]?.zones[zone] == nil {
            // The default zone always exists; its state is made with its first record.
            working.databases[context.database, default: .init()].zones[zone] = .init(incarnation: "default")
        }
        var answers: [[String: Any]] = []
        var failed = false
        var seen: Set<String> = []
        for operation in operations {
            let outcome = apply(operation, zone: zone, context, &working, seen: &seen)
            if outcome["serverErrorCode"] != nil { failed = true }
            answers.append(Self.limited(outcome, to: body["desiredKeys"], context.configuration))
        }
        if atomic && failed {
            answers = answers.map { answer in
                answer["serverErrorCode"] != nil
                    ? answer
                    : Self.error(
                        "ATOMIC_ERROR", "another operation of this atomic batch failed",
                        extra: ["recordName": answer["recordName"] ?? ""])
            }
            return (200, ["records": answers])
        }
        state = working
        return (200, ["records": answers])
    }

    /// Applies one operation of `records/modify` to `state`: the record's answer, or its error (with its
    /// `recordName`) when the operation is refused.
    func apply(
        _ operation: [String: Any], zone: String, _ context: Context, _ state: inout SavedState,
        seen: inout Set<String>
    ) -> [String: Any] {
        let type = operation["operationType"] as? String ?? ""
        let sent = operation["record"] as? [String: Any] ?? [:]
        var name = sent["recordName"] as? String ?? ""
        if name.isEmpty, type == "create" { name = UUID().uuidString }
        do throws(RecordRefusal) {
            try checkName(name, seen: &seen)
            let existing = state.databases[context.database]?.zones[zone]?.records[name].flatMap {
                $0.deleted ? nil : $0
            }
            try Self.checkPrecondition(
                type, of: name, existing: existing, sentTag: sent["recordChangeTag"] as? String, context)
            return try commit(type, sent, name: name, existing: existing, zone: zone, context, &state)
        } catch {
            return Self.error(error.code, error.reason, extra: ["recordName": name])
        }
    }

    /// Why one operation of `records/modify` was refused: its `serverErrorCode` and reason.
    private struct RecordRefusal: Error {
        let code: String
        let reason: String
        init(_ code: String, _ reason: String) {
            self.code = code
            self.reason = reason
        }
    }

    /// Refuses a record name that is empty, not ASCII, over 255 bytes or named by an earlier operation of the request
    /// (`seen`, which it joins), and one `failRecord(_:code:reason:)` made fail.
    private func checkName(_ name: String, seen: inout Set<String>) throws(RecordRefusal) {
        guard !name.isEmpty else { throw RecordRefusal("BAD_REQUEST", "the operation's record has no recordName") }
        // CloudKit's record names are ASCII, so a name's text is its bytes and `String` keys here compare as CloudKit
        // compares names.
        guard name.utf8.allSatisfy({ $0 < 0x80 }), name.utf8.count <= 255 else {
            throw RecordRefusal("BAD_REQUEST", "record names are at most 255 ASCII characters")
        }
        guard seen.insert(name).inserted else {
            throw RecordRefusal("BAD_REQUEST", "record \(name) appears in more than one operation of this request")
        }
        if let failure = recordFailures.withLock({ $0[name] }) { throw RecordRefusal(failure.code, failure.reason) }
    }

    /// Refuses an operation `type` that does not fit the record the zone holds as `name` (`existing`, nil when it
    /// holds none): a create over a record, an update, replace or delete of none or of another change tag than
    /// `sentTag`, a forced delete of none, or a type CloudKit does not have.
    private static func checkPrecondition(
        _ type: String, of name: String, existing: SavedState.Record?, sentTag: String?, _ context: Context
    ) throws(RecordRefusal) {
        switch type {
        case "create":
            if existing != nil {
                throw RecordRefusal(context.configuration.existingRecordCode, "record to insert already exists")
            }
        case "update", "replace", "delete":
            guard let existing else { throw RecordRefusal("NOT_FOUND", "record \(name) does not exist") }
            guard let sentTag else { throw RecordRefusal("BAD_REQUEST", "\(type) needs the record's recordChangeTag") }
            if sentTag != existing.changeTag {
                throw RecordRefusal("CONFLICT", "record \(name) changed on the server since \(sentTag) was read")
            }
        case "forceUpdate", "forceReplace":
            break
        case "forceDelete":
            if existing == nil { throw RecordRefusal("NOT_FOUND", "record \(name) does not exist") }
        default:
            throw RecordRefusal("BAD_REQUEST", "unknown operationType \(type)")
        }
    }

    /// Writes the checked operation `type` on record `name` into `state` under the zone's next sequence number: a
    /// tombstone for a delete (freeing its assets), else the record `sent` makes; answers with what was written.
    private func commit(
        _ type: String, _ sent: [String: Any], name: String, existing: SavedState.Record?, zone: String,
        _ context: Context, _ state: inout SavedState
    ) throws(RecordRefusal) -> [String: Any] {
        var zoneState = state.databases[context.database]!.zones[zone]!
        let sequence = zoneState.nextSequence
        zoneState.nextSequence += 1
        let existingFields =
            existing.flatMap {
                (try? JSONSerialization.jsonObject(with: Data($0.fields.utf8))) as? [String: Any]
            } ?? [:]
        let record: SavedState.Record
        if type == "delete" || type == "forceDelete" {
            for receipt in Self.receipts(in: existingFields) { state.assets[receipt] = nil }
            var tombstone = existing!
            tombstone.deleted = true
            tombstone.sequence = sequence
            tombstone.fields = "{}"
            record = tombstone
        } else {
            var merging = try fieldMerge(
                sent, type: type, name: name, existing: existing, existingFields: existingFields, zone: zone, context,
                state)
            for (field, value) in sent["fields"] as? [String: Any] ?? [:] {
                try merge(field, value, into: &merging, context, state)
            }
            record = try saved(merging, sequence: sequence, existing: existing, context, &state)
        }
        zoneState.records[name] = record
        state.databases[context.database]!.zones[zone] = zoneState
        return recordJSON(name, record, zone: zone, context)
    }

    /// The fields of a record being saved, merged one sent field at a time: what to store, the receipts of the assets
    /// they claim, their size (assets left out), and the record type's schema with the fields it did not have.
    private struct FieldMerge {
        let record: String
        let recordType: String
        let zone: String
        /// The fields the record holds now.
        let existing: [String: Any]
        var fields: [String: Any]
        var schema: [String: String]
        var claimed: [String] = []
        var size = 0
    }

    /// The start of a save of `sent` as record `name`: its type (sent, or the existing record's), the fields an update
    /// keeps, and the type's schema, which a production schema must have already.
    private func fieldMerge(
        _ sent: [String: Any], type: String, name: String, existing: SavedState.Record?,
        existingFields: [String: Any], zone: String, _ context: Context, _ state: SavedState
    ) throws(RecordRefusal) -> FieldMerge {
        let recordType = sent["recordType"] as? String ?? existing?.recordType ?? ""
        guard !recordType.isEmpty else { throw RecordRefusal("BAD_REQUEST", "record \(name) has no recordType") }
        var schema = state.schemas[context.schema]?[recordType]
        if schema == nil {
            if context.production {
                throw RecordRefusal(
                    "BAD_REQUEST",
                    "Cannot create new type \(recordType) in production schema; deploy the schema from development")
            }
            schema = [:]
        }
        return FieldMerge(
            record: name, recordType: recordType, zone: zone, existing: existingFields,
            fields: type == "update" || type == "forceUpdate" ? existingFields : [:], schema: schema ?? [:])
    }

    /// Merges one sent field into `merge`: a field without a value is removed; an asset is claimed by its receipt and
    /// kept as `ASSETID`; a field the schema does not have joins it, but for a production schema.
    private func merge(
        _ field: String, _ value: Any, into merge: inout FieldMerge, _ context: Context, _ state: SavedState
    ) throws(RecordRefusal) {
        guard let dictionary = value as? [String: Any], let raw = dictionary["value"] else {
            merge.fields[field] = nil
            return
        }
        var fieldType = dictionary["type"] as? String ?? Self.inferType(raw)
        var value = raw
        let isAsset = fieldType == "ASSET" || fieldType == "ASSETID"
        if isAsset {
            // Sent as ASSET, kept and answered as ASSETID.
            fieldType = "ASSETID"
            switch assetField(
                raw, field: field, record: merge.record, zone: merge.zone, existing: merge.existing, context, state)
            {
            case .failure(let refusal): throw RecordRefusal("BAD_REQUEST", refusal.reason)
            case .success(let (stored, receipt)):
                value = stored
                if let receipt { merge.claimed.append(receipt) }
            }
        }
        if let known = merge.schema[field], known != fieldType {
            throw RecordRefusal(
                "BAD_REQUEST",
                "invalid value type \(fieldType) for field \(field) of type \(merge.recordType): \(known)")
        }
        if merge.schema[field] == nil {
            if context.production {
                throw RecordRefusal(
                    "BAD_REQUEST",
                    "Cannot create new field \(field) of type \(merge.recordType) in production schema")
            }
            merge.schema[field] = fieldType
        }
        // Assets do not count towards the record's size.
        if !isAsset { merge.size += (try? JSONSerialization.data(withJSONObject: [raw]).count) ?? 0 }
        merge.fields[field] = ["value": value, "type": fieldType]
    }

    /// The record `merge` makes, under a new change tag, once its size is within the limit; records its type's schema
    /// in `state`, claims the assets it took and frees those it no longer holds.
    private func saved(
        _ merge: FieldMerge, sequence: Int64, existing: SavedState.Record?, _ context: Context,
        _ state: inout SavedState
    ) throws(RecordRefusal) -> SavedState.Record {
        guard merge.size <= context.configuration.maxRecordBytes else {
            throw RecordRefusal(
                "BAD_REQUEST",
                "record \(merge.record) is too large: \(merge.size) bytes of fields, over the "
                    + "\(context.configuration.maxRecordBytes) byte limit")
        }
        state.schemas[context.schema, default: [:]][merge.recordType] = merge.schema
        for receipt in merge.claimed { state.assets[receipt]?.claimed = true }
        // An asset the record no longer holds (a field replaced, removed or not sent again) is freed.
        for receipt in Self.receipts(in: merge.existing).subtracting(Self.receipts(in: merge.fields)) {
            state.assets[receipt] = nil
        }
        let fieldsText = String(
            decoding: (try? JSONSerialization.data(withJSONObject: merge.fields, options: [.sortedKeys]))
                ?? Data("{}".utf8),
            as: UTF8.self)
        return SavedState.Record(
            recordType: merge.recordType, fields: fieldsText, changeTag: randomToken("", bytes: 6),
            sequence: sequence, deleted: false, createdMs: existing?.createdMs ?? context.now,
            modifiedMs: context.now)
    }

    static func inferType(_ raw: Any) -> String {
        if raw is String { return "STRING" }
        if raw is [String: Any] { return "ASSET" }
        if raw is NSNumber { return "INT64" }
        return "STRING_LIST"
    }

    // MARK: Changes

    func zoneChanges(_ body: [String: Any], _ context: Context, _ state: SavedState) -> Answer {
        let requested = body["zones"] as? [[String: Any]] ?? []
        let topLimit = (body["resultsLimit"] as? NSNumber)?.intValue
        let zones: [[String: Any]] = requested.map { item in
            guard let name = Self.zoneName(item["zoneID"]) else {
                return Self.error("BAD_REQUEST", "a zone needs zoneID.zoneName")
            }
            if name == "_defaultZone" {
                return Self.error(
                    "BAD_REQUEST", "changes/zone works only for custom zones; the default zone keeps no change history",
                    extra: ["zoneID": zoneID(name, context)])
            }
            guard let zone = state.databases[context.database]?.zones[name] else {
                return Self.error(
                    "ZONE_NOT_FOUND", "zone \(name) does not exist", extra: ["zoneID": zoneID(name, context)])
            }
            var after: Int64 = 0
            if let token = item["syncToken"] as? String {
                guard let position = Self.position(of: token, zone: name, incarnation: zone.incarnation),
                    position >= zone.tokenFloor
                else {
                    let zoneID = ["zoneID": zoneID(name, context)]
                    switch context.configuration.expiredToken {
                    case .badRequest:
                        return Self.error(
                            "BAD_REQUEST",
                            "the syncToken is expired or does not belong to zone \(name); fetch again without one",
                            extra: zoneID)
                    case .changeTokenExpired:
                        return Self.error("CHANGE_TOKEN_EXPIRED", "the change token has expired", extra: zoneID)
                    case .badRequestOtherWording:
                        return Self.error(
                            "BAD_REQUEST", "the continuation marker is no longer valid for zone \(name)", extra: zoneID)
                    case .syncTokenExpired:
                        return Self.error("SYNC_TOKEN_EXPIRED", "the sync token has expired", extra: zoneID)
                    case .zoneNotFound:
                        return Self.error("ZONE_NOT_FOUND", "zone \(name) does not exist", extra: zoneID)
                    }
                }
                after = position
            }
            return changesPage(of: zone, named: name, after: after, item, body, topLimit: topLimit, context)
        }
        return (200, ["zones": zones])
    }

    /// One zone's answer in `changes/zone`: its records changed after sequence `after`, as many as the zone's (or
    /// the request's) `resultsLimit` allows, with the fields its (or the request's) `desiredKeys` names.
    private func changesPage(
        of zone: SavedState.Zone, named name: String, after: Int64, _ item: [String: Any], _ body: [String: Any],
        topLimit: Int?, _ context: Context
    ) -> [String: Any] {
        let limit = max(
            1,
            min(
                (item["resultsLimit"] as? NSNumber)?.intValue ?? topLimit ?? context.configuration.maxOperations,
                context.configuration.maxOperations))
        let changed = zone.records.filter { $0.value.sequence > after }.sorted {
            $0.value.sequence < $1.value.sequence
        }
        let page = changed.prefix(limit)
        let last = page.last?.value.sequence ?? max(after, zone.nextSequence - 1)
        return [
            "zoneID": zoneID(name, context),
            "records": page.map {
                // A zone's own desiredKeys overrides the request's.
                Self.limited(
                    recordJSON($0.key, $0.value, zone: name, context), to: item["desiredKeys"] ?? body["desiredKeys"],
                    context.configuration)
            },
            "syncToken": Self.token(zone: name, incarnation: zone.incarnation, position: last),
            "moreComing": changed.count > page.count,
        ]
    }

    static func token(zone: String, incarnation: String, position: Int64) -> String {
        Data("\(zone)\n\(incarnation)\n\(position)".utf8).base64EncodedString()
    }

    static func position(of token: String, zone: String, incarnation: String) -> Int64? {
        guard let data = Data(base64Encoded: token) else { return nil }
        let parts = String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
        guard parts.count == 3, parts[0] == zone, parts[1] == incarnation else { return nil }
        return Int64(parts[2])
    }
}
