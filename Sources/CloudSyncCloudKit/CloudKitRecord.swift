import Foundation

/// A typed CloudKit field value, as CloudKit Web Services writes it: `{"value": …, "type": "STRING"}`.
///
/// Timestamps are milliseconds since 1970 and bytes travel as base64, as the web services encode them; an Asset field
/// is ``asset(_:)`` (sent as `ASSET`, answered as `ASSETID`); a field of a type this bridge does not model (a
/// reference, a location) is kept as ``other(type:json:)``.
public enum CloudKitValue: Sendable, Hashable {
    case string(String)
    case int64(Int64)
    case double(Double)
    /// Milliseconds since 1970-01-01 UTC.
    case timestamp(Int64)
    case bytes(Data)
    case stringList([String])
    case int64List([Int64])
    case doubleList([Double])
    case timestampList([Int64])
    case bytesList([Data])
    /// A file in an Asset field: sent with an upload's receipt, read with a download URL.
    case asset(CloudKitAsset)
    /// A type the bridge does not model, with its value as JSON text.
    case other(type: String, json: String)

    /// The type tag the web services use (`STRING`, `INT64_LIST`, ...).
    public var typeTag: String {
        switch self {
        case .string: "STRING"
        case .int64: "INT64"
        case .double: "DOUBLE"
        case .timestamp: "TIMESTAMP"
        case .bytes: "BYTES"
        case .stringList: "STRING_LIST"
        case .int64List: "INT64_LIST"
        case .doubleList: "DOUBLE_LIST"
        case .timestampList: "TIMESTAMP_LIST"
        case .bytesList: "BYTES_LIST"
        case .asset: "ASSET"
        case .other(let type, _): type
        }
    }

    /// The text of a ``string(_:)`` value; nil for every other type.
    public var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    /// The asset of an ``asset(_:)`` value; nil for every other type.
    public var assetValue: CloudKitAsset? {
        if case .asset(let asset) = self { return asset }
        return nil
    }

    /// The field dictionary (`{"value": …, "type": …}`) for a request body.
    var json: [String: Any] {
        let value: Any
        switch self {
        case .string(let text): value = text
        case .int64(let number), .timestamp(let number): value = NSNumber(value: number)
        case .double(let number): value = NSNumber(value: number)
        case .bytes(let data): value = data.base64EncodedString()
        case .stringList(let texts): value = texts
        case .int64List(let numbers), .timestampList(let numbers): value = numbers.map { NSNumber(value: $0) }
        case .doubleList(let numbers): value = numbers.map { NSNumber(value: $0) }
        case .bytesList(let items): value = items.map { $0.base64EncodedString() }
        case .asset(let asset): value = asset.json
        case .other(_, let json):
            value = (try? JSONSerialization.jsonObject(with: Data(json.utf8), options: .fragmentsAllowed)) ?? NSNull()
        }
        return ["value": value, "type": typeTag]
    }

    /// A value from a field dictionary of an answer; nil when it does not have the shape its type says.
    init?(json field: [String: Any]) {
        guard let raw = field["value"] else { return nil }
        let type = (field["type"] as? String) ?? Self.inferType(raw)
        func number(_ any: Any) -> NSNumber? {
            if let number = any as? NSNumber { return number }
            if let text = any as? String, let double = Double(text) { return NSNumber(value: double) }
            return nil
        }
        func int64(_ any: Any) -> Int64? {
            if let text = any as? String { return Int64(text) }
            return number(any)?.int64Value
        }
        func list<T>(_ convert: (Any) -> T?) -> [T]? {
            guard let items = raw as? [Any] else { return nil }
            let converted = items.compactMap(convert)
            return converted.count == items.count ? converted : nil
        }
        switch type {
        case "STRING":
            guard let text = raw as? String else { return nil }
            self = .string(text)
        case "INT64":
            guard let value = int64(raw) else { return nil }
            self = .int64(value)
        case "DOUBLE":
            guard let value = number(raw)?.doubleValue else { return nil }
            self = .double(value)
        case "TIMESTAMP":
            guard let value = number(raw)?.doubleValue else { return nil }
            self = .timestamp(Int64(value))
        case "BYTES":
            guard let text = raw as? String, let data = Data(base64Encoded: text) else { return nil }
            self = .bytes(data)
        case "STRING_LIST":
            guard let items = list({ $0 as? String }) else { return nil }
            self = .stringList(items)
        case "INT64_LIST":
            guard let items = list(int64) else { return nil }
            self = .int64List(items)
        case "DOUBLE_LIST":
            guard let items = list({ number($0)?.doubleValue }) else { return nil }
            self = .doubleList(items)
        case "TIMESTAMP_LIST":
            guard let items = list({ number($0).map { Int64($0.doubleValue) } }) else { return nil }
            self = .timestampList(items)
        case "BYTES_LIST":
            guard let items = list({ ($0 as? String).flatMap { Data(base64Encoded: $0) } }) else { return nil }
            self = .bytesList(items)
        case "ASSET", "ASSETID":
            guard let asset = CloudKitAsset(json: raw) else { return nil }
            self = .asset(asset)
        default:
            let data = (try? JSONSerialization.data(withJSONObject: raw, options: .fragmentsAllowed)) ?? Data()
            self = .other(type: type, json: String(decoding: data, as: UTF8.self))
        }
    }

    private static func inferType(_ raw: Any) -> String {
        if raw is String { return "STRING" }
        if let number = raw as? NSNumber {
            return number.doubleValue == number.doubleValue.rounded() ? "INT64" : "DOUBLE"
        }
        if let items = raw as? [Any] { return items.first is String ? "STRING_LIST" : "INT64_LIST" }
        return "UNKNOWN"
    }
}

/// One CloudKit record: its name (unique in its zone across every record type), type, typed fields and the
/// server's change tag.
public struct CloudKitRecord: Sendable, Hashable {
    /// The record name: unique per zone across all record types.
    public var recordName: String
    /// The record type (`CloudSyncItem`).
    public var recordType: String
    /// The fields, by name.
    public var fields: [String: CloudKitValue]
    /// The server's version tag; nil for a record not yet saved.
    public var recordChangeTag: String?
    /// When the server last changed it, in milliseconds since 1970; nil when not known.
    public var modifiedMilliseconds: Int64?

    /// A record; leave the change tag nil for a new one.
    public init(
        recordName: String, recordType: String, fields: [String: CloudKitValue] = [:], recordChangeTag: String? = nil,
        modifiedMilliseconds: Int64? = nil
    ) {
        self.recordName = recordName
        self.recordType = recordType
        self.fields = fields
        self.recordChangeTag = recordChangeTag
        self.modifiedMilliseconds = modifiedMilliseconds
    }

    /// The record as CloudKit's JSON record dictionary (`recordName`, `recordType`, `recordChangeTag`, `fields`
    /// with typed values), keys sorted.
    public func jsonData() -> Data {
        var object = json
        if let modifiedMilliseconds { object["modified"] = ["timestamp": NSNumber(value: modifiedMilliseconds)] }
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
    }

    /// The record dictionary for a request.
    var json: [String: Any] {
        var object: [String: Any] = [
            "recordName": recordName, "recordType": recordType, "fields": fields.mapValues { $0.json },
        ]
        if let recordChangeTag { object["recordChangeTag"] = recordChangeTag }
        return object
    }

    /// A record from a record dictionary of an answer; nil when it has no name.
    init?(json object: [String: Any]) {
        guard let name = object["recordName"] as? String else { return nil }
        recordName = name
        recordType = object["recordType"] as? String ?? ""
        var fields: [String: CloudKitValue] = [:]
        for (field, value) in object["fields"] as? [String: Any] ?? [:] {
            if let dictionary = value as? [String: Any], let typed = CloudKitValue(json: dictionary) {
                fields[field] = typed
            }
        }
        self.fields = fields
        recordChangeTag = object["recordChangeTag"] as? String
        modifiedMilliseconds = ((object["modified"] as? [String: Any])?["timestamp"] as? NSNumber)?.int64Value
    }
}

/// What one `records/modify` operation does (api-facts B.3).
public enum CloudKitOperationType: String, Sendable, Hashable {
    /// Fails when a record of that name exists (`EXISTS` or `CONFLICT`).
    case create
    /// Changes the given fields; needs the change tag.
    case update
    /// Changes the given fields whatever the tag; creates a missing record.
    case forceUpdate
    /// Replaces every field; needs the change tag.
    case replace
    /// Replaces every field whatever the tag; creates a missing record.
    case forceReplace
    /// Deletes; needs the change tag.
    case delete
    /// Deletes whatever the tag.
    case forceDelete
}

/// One `records/modify` operation.
public struct CloudKitOperation: Sendable, Hashable {
    /// What it does.
    public var type: CloudKitOperationType
    /// The record (for the deletes only its name and change tag matter).
    public var record: CloudKitRecord

    /// `type` on `record`.
    public init(_ type: CloudKitOperationType, _ record: CloudKitRecord) {
        self.type = type
        self.record = record
    }

    var json: [String: Any] {
        var record = self.record.json
        if type == .delete || type == .forceDelete {
            record = ["recordName": self.record.recordName]
            if let tag = self.record.recordChangeTag { record["recordChangeTag"] = tag }
        }
        return ["operationType": type.rawValue, "record": record]
    }
}
