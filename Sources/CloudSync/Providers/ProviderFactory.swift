/// One field a provider type accepts in a pipeline file: its name, type, default, whether it is required and
/// whether it holds a secret.
///
/// The pipeline loader, `cloudsync plan`, the pipeline JSON Schema and docs/pipeline-reference.md's provider table are all
/// derived from these descriptions, so a provider type is described once, by the module that implements it.
public struct ProviderField: Sendable, Equatable {
    /// What values the field takes.
    public enum Kind: Sendable, Equatable {
        /// Any text.
        case text
        /// A file or directory path; relative paths resolve against the pipeline file's directory.
        case path
        /// A whole number of at least `minimum`; `unit` names what it counts ("bytes", "milliseconds"), or is empty.
        case integer(minimum: Int64, unit: String)
        /// `true` or `false`.
        case boolean
        /// One of a fixed set of words.
        case choice([String])
        /// A mapping of text keys to text values.
        case textMap
    }

    /// The field's name in the file.
    public var name: String
    /// The values it takes.
    public var kind: Kind
    /// Whether a provider of this type must give it.
    public var required: Bool
    /// Whether its value is a credential: never shown by `plan`, in reports, logs or errors.
    public var secret: Bool
    /// The value used when the field is absent, as written in a file; nil when there is none.
    public var defaultValue: String?
    /// One sentence for people: what the field means.
    public var summary: String

    /// A field description; see the properties for what each argument means.
    public init(
        _ name: String, _ kind: Kind, required: Bool = false, secret: Bool = false, defaultValue: String? = nil,
        summary: String
    ) {
        self.name = name
        self.kind = kind
        self.required = required
        self.secret = secret
        self.defaultValue = defaultValue
        self.summary = summary
    }
}

/// A field's value as the pipeline loader read and checked it against its ``ProviderField``.
public enum ProviderFieldValue: Sendable, Equatable {
    case text(String)
    case integer(Int64)
    case boolean(Bool)
    case textMap([KeyValue])
}

/// The checked values of one provider's fields, by name; absent fields are missing (defaults are the factory's).
public struct ProviderFieldValues: Sendable, Equatable {
    /// Values by field name.
    public var values: [String: ProviderFieldValue]
    /// The environment the pipeline was loaded with (the one its `${env:...}` read), for a type that also reads
    /// variables of its own (the `s3` type's `AWS_*`); nil when the values did not come from a pipeline file.
    public var environment: [String: String]?

    /// Values by field name, loaded with `environment`.
    public init(_ values: [String: ProviderFieldValue] = [:], environment: [String: String]? = nil) {
        self.values = values
        self.environment = environment
    }

    /// The text (or path, already absolute) of `name`, if given.
    public func text(_ name: String) -> String? {
        if case .text(let value) = values[name] { return value }
        return nil
    }

    /// The whole number of `name`, if given.
    public func integer(_ name: String) -> Int64? {
        if case .integer(let value) = values[name] { return value }
        return nil
    }

    /// The boolean of `name`, if given.
    public func boolean(_ name: String) -> Bool? {
        if case .boolean(let value) = values[name] { return value }
        return nil
    }

    /// The key-value pairs of `name`, if given, in file order.
    public func textMap(_ name: String) -> [KeyValue]? {
        if case .textMap(let value) = values[name] { return value }
        return nil
    }
}

/// Why a provider's fields, each valid alone, do not make a configuration (two fields that exclude each other, a
/// credential given no way at all).
public struct ProviderConfigurationError: Error, Sendable, Equatable {
    /// The field the error is about, or nil for the provider as a whole.
    public var field: String?
    /// What is wrong and what to do.
    public var message: String

    /// An error about `field` (nil: the whole provider).
    public init(field: String? = nil, _ message: String) {
        self.field = field
        self.message = message
    }
}

/// Everything about one provider type: its name, its fields, how its configuration is read from them, what it can
/// do, and how to make one.
///
/// Each provider module exports one factory per type it implements; a ``ProviderRegistry`` maps type names to
/// factories, and nothing else needs to know the type exists.
public protocol ProviderFactory: Sendable {
    /// The provider's typed configuration, read from its fields.
    associatedtype Configuration: Sendable

    /// The `type` written in pipeline files.
    var type: String { get }
    /// One sentence for people: what the provider stores and where.
    var summary: String { get }
    /// The fields it accepts besides the ones every provider has (`type`, `codec`, `maxValueBytes`).
    var fields: [ProviderField] { get }

    /// The configuration the checked field values describe; field-by-field checks (types, minimums, required) have
    /// already passed.
    func configuration(from values: ProviderFieldValues) throws(ProviderConfigurationError) -> Configuration
    /// What a provider with this configuration can do, known before it is made.
    func capabilities(of configuration: Configuration) -> ProviderCapabilities
    /// Why a provider of this type can never serve on this platform, when it cannot (the iCloud key-value store on
    /// Linux); nil when it can. Validation and plans say so.
    var unavailableHere: String? { get }
    /// What `cloudsync plan` shows about a configuration besides its fields, by name (where credentials will come
    /// from, the resolved address); never a secret. Reading the environment or a credentials file is fine here,
    /// opening a connection is not.
    func planDetails(of configuration: Configuration) -> [String: String]

    /// The interactive sign-in a provider with this configuration needs once (`cloudsync login`), or nil when the
    /// type needs none. It must have no side effects: it runs only when asked.
    func signIn(for configuration: Configuration) -> (any ProviderSignIn)?

    /// Makes the provider: the first step with side effects (opening files, connections).
    ///
    /// With ``ProviderContext/readOnly`` the provider must change nothing where it stores data, and a provider whose
    /// storage does not exist yet stands in as an empty one.
    func make(_ configuration: Configuration, context: ProviderContext) throws(CloudSyncError) -> any Provider
}

extension ProviderFactory {
    /// Most provider types can serve on this platform.
    public var unavailableHere: String? { nil }

    /// Most provider types need no sign-in: local storage, or credentials given in full in the pipeline file.
    public func signIn(for configuration: Configuration) -> (any ProviderSignIn)? { nil }
    /// Most provider types have nothing to show besides their fields.
    public func planDetails(of configuration: Configuration) -> [String: String] { [:] }
}

/// A provider type's configuration, checked and ready to make providers, its concrete type erased.
public struct ConfiguredProvider: Sendable {
    /// The provider type.
    public let type: String
    /// What the provider can do.
    public let capabilities: ProviderCapabilities
    /// The one-time interactive sign-in it needs (`cloudsync login`); nil when it needs none.
    public let signIn: (any ProviderSignIn)?
    /// What `plan` shows besides the fields; see ``ProviderFactory/planDetails(of:)``.
    public let planDetails: [String: String]
    private let maker: @Sendable (ProviderContext) throws -> any Provider

    init<Factory: ProviderFactory>(_ factory: Factory, _ configuration: Factory.Configuration) {
        type = factory.type
        capabilities = factory.capabilities(of: configuration)
        signIn = factory.signIn(for: configuration)
        planDetails = factory.planDetails(of: configuration)
        maker = { context in try factory.make(configuration, context: context) }
    }

    /// Makes the provider; see ``ProviderFactory/make(_:context:)``.
    public func make(context: ProviderContext) throws(CloudSyncError) -> any Provider {
        do {
            return try maker(context)
        } catch {
            throw CloudSyncError.wrapping(error, provider: context.providerID)
        }
    }
}

/// A registered provider type, its factory's concrete type erased.
public struct ProviderType: Sendable {
    /// The `type` written in pipeline files.
    public let name: String
    /// One sentence for people: what the provider stores and where.
    public let summary: String
    /// Its own fields, besides ``ProviderType/commonFields``.
    public let fields: [ProviderField]
    /// Why it can never serve on this platform; nil when it can.
    public let unavailableHere: String?
    private let configure: @Sendable (ProviderFieldValues) throws -> ConfiguredProvider

    /// The fields every provider type has, read by the pipeline loader itself.
    public static let commonFields: [ProviderField] = [
        ProviderField(
            "maxValueBytes", .integer(minimum: 1, unit: "bytes"),
            summary: "lowers the largest encoded value this provider takes"),
        ProviderField("codec", .text, summary: "a codec id for this provider's values, overriding the store's codec"),
        ProviderField(
            "account", .text,
            summary: "for types that sign in (and have no `account` field of their own): a named account kept by "
                + "`cloudsync login --account NAME`, one sign-in for every pipeline that names it, used instead of a "
                + "sign-in kept by this pipeline"),
    ]

    init<Factory: ProviderFactory>(_ factory: Factory) {
        name = factory.type
        summary = factory.summary
        fields = factory.fields
        unavailableHere = factory.unavailableHere
        configure = { values in ConfiguredProvider(factory, try factory.configuration(from: values)) }
    }

    /// Reads a configuration from checked field values.
    public func configuration(from values: ProviderFieldValues) throws(ProviderConfigurationError)
        -> ConfiguredProvider
    {
        do {
            return try configure(values)
        } catch let error as ProviderConfigurationError {
            throw error
        } catch {
            throw ProviderConfigurationError("\(error)")
        }
    }

    /// The field named `name`, its own or common.
    public func field(named name: String) -> ProviderField? {
        (fields + Self.commonFields).first { $0.name == name }
    }
}

/// The provider types a pipeline may name, by type name.
///
/// The command line registers the built-in types; a program embedding the pipeline runner registers its own.
public struct ProviderRegistry: Sendable {
    private var byName: [String: ProviderType] = [:]
    private var order: [String] = []

    /// An empty registry.
    public init() {}

    /// Adds `factory`'s type; a second factory for one type name replaces the first.
    public mutating func register<Factory: ProviderFactory>(_ factory: Factory) {
        if byName[factory.type] == nil { order.append(factory.type) }
        byName[factory.type] = ProviderType(factory)
    }

    /// The registered types in registration order.
    public var types: [ProviderType] { order.compactMap { byName[$0] } }

    /// The type named `name`, if registered.
    public func type(named name: String) -> ProviderType? { byName[name] }
}
