/// A provider type that is recognised but has no implementation on this platform (the iCloud key-value store has
/// no API outside Apple's systems): never available, but its key rules and tier still apply when it is listed.
public struct PlatformOnlyProvider: Provider {
    /// The provider's id in the store.
    public let id: String
    /// The rules and tier of the type it stands for.
    public let capabilities: ProviderCapabilities

    /// A provider that is never available, with the rules and tier of the type it stands for.
    public init(id: String, capabilities: ProviderCapabilities) {
        self.id = id
        self.capabilities = capabilities
    }

    /// Never available: the platform has no implementation.
    public func availability() async -> Availability {
        .unavailable(
            .unsupportedPlatform, "this provider type exists only on Apple platforms; it is never available here")
    }

    private func unavailable() -> CloudSyncError {
        CloudSyncError(.noProvider, "this provider type does not exist on this platform", provider: id)
    }
    /// Fails with `ERR_NO_PROVIDER`.
    public func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] { throw unavailable() }
    /// Fails with `ERR_NO_PROVIDER`.
    public func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] { throw unavailable() }
    /// Fails with `ERR_NO_PROVIDER`.
    public func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] { throw unavailable() }
    /// Fails with `ERR_NO_PROVIDER`.
    public func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage { throw unavailable() }
}

/// The `icloudKV` provider type: the iCloud key-value store, recognised so that its 64 KB tier and key rules apply
/// to a pipeline shared with Apple devices, and never available on Linux.
public struct ICloudKeyValueProviderFactory: ProviderFactory {
    /// It has nothing to configure.
    public struct Configuration: Sendable {}

    /// The factory; register it in a ``ProviderRegistry``.
    public init() {}

    /// The `type` pipeline files name.
    public var type: String { "icloudKV" }
    /// What the provider stores, and where, in one sentence.
    public var summary: String {
        "the iCloud key-value store: recognised, never available on Linux; its key rules and 64 KB tier still apply"
    }
    /// The fields of this type besides the common ones.
    public var fields: [ProviderField] { [] }

    /// Never available here: said by validation and plans, so a pipeline listing it is not mistaken for one that
    /// syncs to iCloud.
    public var unavailableHere: String? {
        "the iCloud key-value store exists only on Apple platforms and is never available here; it is listed only so "
            + "its 64 KB tier and key rules apply; it never holds or receives data here"
    }

    /// The typed configuration of checked field values.
    public func configuration(from values: ProviderFieldValues) throws(ProviderConfigurationError) -> Configuration {
        Configuration()
    }

    /// What a provider of this configuration can do.
    public func capabilities(of configuration: Configuration) -> ProviderCapabilities {
        ProviderCapabilities(tier: .keyValue, keyRules: KeyRule.iCloudKeyValue, canList: false)
    }

    /// Makes the provider with the context's id, clock and metrics.
    public func make(_ configuration: Configuration, context: ProviderContext) throws(CloudSyncError) -> any Provider {
        PlatformOnlyProvider(id: context.providerID, capabilities: capabilities(of: configuration))
    }
}
