/// A provider type that is recognised but has no implementation on this platform (the iCloud key-value store has
/// no API outside Apple's systems): never available, but its key rules and tier still apply when it is listed.
public struct PlatformOnlyProvider: Provider {
    public let id: String
    public let capabilities: ProviderCapabilities

    /// A provider that is never available, with the rules and tier of the type it stands for.
    public init(id: String, capabilities: ProviderCapabilities) {
        self.id = id
        self.capabilities = capabilities
    }

    public func availability() async -> Availability {
        .unavailable(
            .unsupportedPlatform, "this provider type exists only on Apple platforms; it is never available here")
    }

    private func unavailable() -> CloudSyncError {
        CloudSyncError(.noProvider, "this provider type does not exist on this platform", provider: id)
    }
    public func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] { throw unavailable() }
    public func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] { throw unavailable() }
    public func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] { throw unavailable() }
    public func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage { throw unavailable() }
}

/// The `icloudKV` provider type: the iCloud key-value store, recognised so that its 64 KB tier and key rules apply
/// to a pipeline shared with Apple devices, and never available on Linux.
public struct ICloudKeyValueProviderFactory: ProviderFactory {
    /// It has nothing to configure.
    public struct Configuration: Sendable {}

    /// The factory; register it in a ``ProviderRegistry``.
    public init() {}

    public var type: String { "icloudKV" }
    public var summary: String {
        "the iCloud key-value store: recognised, never available on Linux; its key rules and 64 KB tier still apply"
    }
    public var fields: [ProviderField] { [] }

    public func configuration(from values: ProviderFieldValues) throws(ProviderConfigurationError) -> Configuration {
        Configuration()
    }

    public func capabilities(of configuration: Configuration) -> ProviderCapabilities {
        ProviderCapabilities(tier: .keyValue, keyRules: KeyRule.iCloudKeyValue, canList: false)
    }

    public func make(_ configuration: Configuration, context: ProviderContext) throws(CloudSyncError) -> any Provider {
        PlatformOnlyProvider(id: context.providerID, capabilities: capabilities(of: configuration))
    }
}
