import CloudSync
import Foundation

/// The `sqlite` provider type: every key in one SQLite file, the embedded default.
public struct SQLiteProviderFactory: ProviderFactory {
    /// Where the database is and how large it may grow.
    public struct Configuration: Sendable {
        /// The database file, absolute.
        public var path: String
        /// The most the database may use, in bytes; nil for no limit.
        public var maxBytes: Int64?
        /// Create the database when it does not exist; otherwise a missing file is an error.
        public var create: Bool
        /// A table of the database's own to read and write as it is, instead of CloudSync's `kv` table.
        public var mapping: SQLiteTableProvider.Mapping?
        /// Open without write access: a source that must never change.
        public var readOnly: Bool
        /// Bytes per page of a database the provider creates.
        public var pageSize = SQLiteProvider.defaultPageSize
    }

    /// The factory; register it in a `ProviderRegistry`.
    public init() {}

    /// The `type` pipeline files name.
    public var type: String { "sqlite" }
    /// What the provider stores, and where, in one sentence.
    public var summary: String { "one SQLite file (write-ahead log), the embedded default" }
    /// The fields of this type besides the common ones.
    public var fields: [ProviderField] {
        [
            ProviderField("path", .path, required: true, summary: "the database file"),
            ProviderField(
                "maxBytes", .integer(minimum: SQLiteProvider.emptyDatabaseBytes(pageSize: 4_096), unit: "bytes"),
                summary: "the most the database may use (an empty one uses seven pages: 114688 bytes at the default "
                    + "page size); writes past it fail with ERR_QUOTA_EXCEEDED"),
            ProviderField(
                "pageSize", .choice(SQLiteProvider.pageSizes.map(String.init)),
                defaultValue: String(SQLiteProvider.defaultPageSize),
                summary: "bytes per page of a database this provider creates (an existing one keeps its own): a value "
                    + "up to about a quarter of a page is stored whole, one just over it takes up to five times its "
                    + "size; 16384 suits values up to about 4 KB (docs/sqlite-page-size.md)"),
            ProviderField(
                "create", .boolean, defaultValue: "false",
                summary: "create the database when it does not exist; without it a missing file is an error, so a "
                    + "mistyped path or an unmounted disk is noticed"),
            ProviderField(
                "table", .text,
                summary: "a table of an existing database (an application's own) to read and write as it is; nothing "
                    + "in that database is ever created or altered"),
            ProviderField(
                "keyColumn", .text,
                summary: "with `table`: the column holding the keys, matched by their bytes whatever its collation"),
            ProviderField("valueColumn", .text, summary: "with `table`: the column holding the values"),
            ProviderField(
                "updatedAtColumn", .text, summary: "with `table`: a column set to the write time, in epoch milliseconds"
            ),
            ProviderField(
                "readOnly", .boolean, defaultValue: "false",
                summary: "open without write access, for a source that must never change; every write fails"),
        ]
    }

    /// The typed configuration of checked field values.
    public func configuration(from values: ProviderFieldValues) throws(ProviderConfigurationError) -> Configuration {
        guard let path = values.text("path") else { throw ProviderConfigurationError(field: "path", "needs a path") }
        let create = values.boolean("create") ?? false
        var mapping: SQLiteTableProvider.Mapping?
        if let table = values.text("table") {
            guard let key = values.text("keyColumn") else {
                throw ProviderConfigurationError(field: "table", "a mapped `table` needs `keyColumn` and `valueColumn`")
            }
            guard let value = values.text("valueColumn") else {
                throw ProviderConfigurationError(field: "table", "a mapped `table` needs `valueColumn` too")
            }
            guard !create else {
                throw ProviderConfigurationError(field: "create", "a mapped table is never created; drop `create`")
            }
            if values.integer("maxBytes") != nil {
                throw ProviderConfigurationError(
                    field: "maxBytes", "`maxBytes` limits CloudSync's own database, not a mapped table; drop it")
            }
            mapping = SQLiteTableProvider.Mapping(
                table: table, keyColumn: key, valueColumn: value, updatedAtColumn: values.text("updatedAtColumn"))
        } else {
            for field in ["keyColumn", "valueColumn", "updatedAtColumn"] where values.text(field) != nil {
                throw ProviderConfigurationError(field: field, "`\(field)` needs `table`: name the table it belongs to")
            }
        }
        let pageSize = values.text("pageSize").flatMap { Int($0) } ?? SQLiteProvider.defaultPageSize
        if let maxBytes = values.integer("maxBytes"), maxBytes < SQLiteProvider.emptyDatabaseBytes(pageSize: pageSize) {
            throw ProviderConfigurationError(
                field: "maxBytes",
                "an empty database of \(pageSize)-byte pages already uses "
                    + "\(SQLiteProvider.emptyDatabaseBytes(pageSize: pageSize)) bytes; raise `maxBytes` to more than "
                    + "that, or give a smaller `pageSize`")
        }
        if mapping != nil, values.text("pageSize") != nil {
            throw ProviderConfigurationError(
                field: "pageSize", "a mapped table lives in a database that is not CloudSync's to make; drop `pageSize`"
            )
        }
        var configuration = Configuration(
            path: path, maxBytes: values.integer("maxBytes"), create: create, mapping: mapping,
            readOnly: values.boolean("readOnly") ?? false)
        configuration.pageSize = pageSize
        return configuration
    }

    /// What a provider of this configuration can do.
    public func capabilities(of configuration: Configuration) -> ProviderCapabilities {
        configuration.mapping == nil
            ? SQLiteProvider.capabilities(maxValueBytes: nil)
            : ProviderCapabilities(tier: .file, batchLimit: 500, canList: true, reportsQuota: false)
    }

    /// Makes the provider with the context's id, clock and metrics.
    public func make(_ configuration: Configuration, context: ProviderContext) throws(CloudSyncError) -> any Provider {
        if !configuration.create, !FileManager.default.fileExists(atPath: configuration.path) {
            throw CloudSyncError(
                .config,
                "the database \(configuration.path) does not exist; check the path (is its disk mounted?), or set "
                    + "`create: true` on the provider to start a new one there",
                provider: context.providerID)
        }
        if let mapping = configuration.mapping {
            return try SQLiteTableProvider(
                id: context.providerID, path: configuration.path, mapping: mapping,
                readOnly: configuration.readOnly || context.readOnly, clock: context.clock, metrics: context.metrics)
        }
        if context.readOnly || configuration.readOnly {
            guard FileManager.default.fileExists(atPath: configuration.path) else {
                return MemoryProvider(
                    id: context.providerID, capabilities: capabilities(of: configuration), metrics: context.metrics)
            }
            return try SQLiteProvider(
                id: context.providerID, path: configuration.path, maxBytes: configuration.maxBytes,
                clock: context.clock, readOnly: true, metrics: context.metrics)
        }
        return try SQLiteProvider(
            id: context.providerID, path: configuration.path, maxBytes: configuration.maxBytes, clock: context.clock,
            pageSize: configuration.pageSize, metrics: context.metrics)
    }
}

/// The `directory` provider type: one file per key under a root directory, readable by any tool.
public struct DirectoryProviderFactory: ProviderFactory {
    /// The root directory.
    public struct Configuration: Sendable {
        /// The root, absolute.
        public var path: String
        /// Create the root when it does not exist; otherwise a missing directory is an error.
        public var create: Bool
    }

    /// The factory; register it in a `ProviderRegistry`.
    public init() {}

    /// The `type` pipeline files name.
    public var type: String { "directory" }
    /// What the provider stores, and where, in one sentence.
    public var summary: String { "one file per key under a directory, written atomically, readable by any tool" }
    /// The fields of this type besides the common ones.
    public var fields: [ProviderField] {
        [
            ProviderField("path", .path, required: true, summary: "the root directory"),
            ProviderField(
                "create", .boolean, defaultValue: "false",
                summary: "create the directory when it does not exist; without it a missing directory is an error, so "
                    + "an unmounted backup disk is noticed instead of filled on the disk below it"),
        ]
    }

    /// The typed configuration of checked field values.
    public func configuration(from values: ProviderFieldValues) throws(ProviderConfigurationError) -> Configuration {
        guard let path = values.text("path") else { throw ProviderConfigurationError(field: "path", "needs a path") }
        return Configuration(path: path, create: values.boolean("create") ?? false)
    }

    /// What a provider of this configuration can do.
    public func capabilities(of configuration: Configuration) -> ProviderCapabilities {
        DirectoryProvider.capabilities(maxValueBytes: nil)
    }

    /// Makes the provider with the context's id, clock and metrics.
    public func make(_ configuration: Configuration, context: ProviderContext) throws(CloudSyncError) -> any Provider {
        var isDirectory: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: configuration.path, isDirectory: &isDirectory)
        if !configuration.create, !(exists && isDirectory.boolValue) {
            throw CloudSyncError(
                .config,
                exists
                    ? "\(configuration.path) is not a directory; point the provider at a directory"
                    : "the directory \(configuration.path) does not exist; check the path (is its disk mounted?), "
                        + "or set `create: true` on the provider to create it",
                provider: context.providerID)
        }
        if context.readOnly, !exists {
            return MemoryProvider(
                id: context.providerID, capabilities: capabilities(of: configuration), metrics: context.metrics)
        }
        // A dry run changes nothing, not even leftovers.
        return try DirectoryProvider(
            id: context.providerID, root: configuration.path, metrics: context.metrics,
            removesStaleTemporaryFiles: !context.readOnly)
    }
}
