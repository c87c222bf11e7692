import CloudSync
import Foundation

/// Finds the access key the way the AWS CLI does, and says where it came from without showing it.
///
/// In order:
/// 1. the provider's own `accessKeyId` and `secretAccessKey` fields (with `sessionToken`);
/// 2. the environment's `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (with `AWS_SESSION_TOKEN`), unless the
///    provider names a `profile`, which, as the CLI's `--profile` does, skips them;
/// 3. the profile's section of the shared credentials file (`AWS_SHARED_CREDENTIALS_FILE`, else
///    `~/.aws/credentials`), then of the config file (`AWS_CONFIG_FILE`, else `~/.aws/config`, where sections other
///    than `default` are written `[profile NAME]`). The profile is the provider's `profile`, else `AWS_PROFILE`, else
///    `default`.
///
/// Other ways the CLI knows (single sign-on, assumed roles, `credential_process`, instance metadata) are not
/// followed; a profile that relies on one is named in the error.
public struct S3CredentialResolver: Sendable {
    /// Where the credentials were found, for `plan` and errors; never the secret.
    public enum Source: Sendable, Equatable, CustomStringConvertible {
        /// The provider's own fields.
        case fields
        /// `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`.
        case environment
        /// A profile of a shared file.
        case profile(name: String, file: String)

        /// For people: `the pipeline's accessKeyId/secretAccessKey fields`, ....
        public var description: String {
            switch self {
            case .fields: return "the provider's accessKeyId/secretAccessKey fields"
            case .environment: return "the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
            case .profile(let name, let file): return "profile \(name) of \(file)"
            }
        }
    }

    /// What resolving found.
    public enum Resolution: Sendable, Equatable {
        /// Credentials and their source.
        case found(S3Credentials, Source)
        /// None: why, and what to do.
        case missing(String)
    }

    /// The provider's `accessKeyId` field.
    public var accessKeyID: String?
    /// The provider's `secretAccessKey` field.
    public var secretAccessKey: String?
    /// The provider's `sessionToken` field.
    public var sessionToken: String?
    /// The provider's `profile` field.
    public var profile: String?
    /// The environment to read `AWS_*` variables and `HOME` from.
    public var environment: [String: String]

    /// A resolver for these fields, reading `environment` (the process's by default).
    public init(
        accessKeyID: String? = nil, secretAccessKey: String? = nil, sessionToken: String? = nil,
        profile: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment
    ) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
        self.profile = profile
        self.environment = environment
    }

    /// The profile the files are read for.
    public var profileName: String {
        nonEmpty(profile) ?? nonEmpty(environment["AWS_PROFILE"]) ?? nonEmpty(environment["AWS_DEFAULT_PROFILE"])
            ?? "default"
    }

    /// `HOME`; without it (an environment emptied on purpose) the files under `~` are not read.
    private var home: String? { nonEmpty(environment["HOME"]) }

    /// The shared credentials file's path; `~/...` when it is under an unknown home, and then not read.
    public var credentialsFile: String {
        nonEmpty(environment["AWS_SHARED_CREDENTIALS_FILE"]).map(expandTilde) ?? (home ?? "~") + "/.aws/credentials"
    }

    /// The config file's path; `~/...` when it is under an unknown home, and then not read.
    public var configFile: String {
        nonEmpty(environment["AWS_CONFIG_FILE"]).map(expandTilde) ?? (home ?? "~") + "/.aws/config"
    }

    /// Resolves, reading the shared files only when the fields and the environment hold no key.
    public func resolve() -> Resolution {
        if let id = nonEmpty(accessKeyID), let secret = nonEmpty(secretAccessKey) {
            return .found(
                S3Credentials(accessKeyID: id, secretAccessKey: secret, sessionToken: nonEmpty(sessionToken)), .fields)
        }
        if nonEmpty(accessKeyID) != nil || nonEmpty(secretAccessKey) != nil {
            return .missing(
                "the provider gives only one of accessKeyId and secretAccessKey; give both, or neither to use the "
                    + "environment or a profile")
        }
        if nonEmpty(profile) == nil, let id = nonEmpty(environment["AWS_ACCESS_KEY_ID"]),
            let secret = nonEmpty(environment["AWS_SECRET_ACCESS_KEY"])
        {
            let token = nonEmpty(environment["AWS_SESSION_TOKEN"]) ?? nonEmpty(environment["AWS_SECURITY_TOKEN"])
            return .found(S3Credentials(accessKeyID: id, secretAccessKey: secret, sessionToken: token), .environment)
        }
        let name = profileName
        var seen = false
        var unsupported: [String] = []
        for (file, section) in [(credentialsFile, name), (configFile, name == "default" ? name : "profile \(name)")] {
            // A credentials file is small; a FIFO or a huge file is passed over rather than read.
            guard !file.hasPrefix("~"), let data = try? RegularFile.read(file, maximumBytes: 1 << 20),
                let text = String(data: data, encoding: .utf8)
            else { continue }
            guard
                let values = Self.section(section, of: text)
                    ?? (file == configFile ? Self.section(name, of: text) : nil)
            else { continue }
            seen = true
            if let id = nonEmpty(values["aws_access_key_id"]), let secret = nonEmpty(values["aws_secret_access_key"]) {
                let token = nonEmpty(values["aws_session_token"]) ?? nonEmpty(values["aws_security_token"])
                return .found(
                    S3Credentials(accessKeyID: id, secretAccessKey: secret, sessionToken: token),
                    .profile(name: name, file: file))
            }
            for key in ["role_arn", "sso_session", "sso_start_url", "credential_process", "web_identity_token_file"]
            where values[key] != nil {
                unsupported.append("\(key) in \(file)")
            }
        }
        let looked =
            "looked at the provider's accessKeyId/secretAccessKey fields, "
            + (nonEmpty(profile) == nil ? "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, " : "")
            + "and profile \(name) of \(credentialsFile) and \(configFile)"
        if !unsupported.isEmpty {
            return .missing(
                "profile \(name) gets its key through \(unsupported.joined(separator: ", ")), which cloudsync does not "
                    + "follow; export the key (for example `aws configure export-credentials --profile \(name) "
                    + "--format env`) or give it in the provider's fields (\(looked))")
        }
        if !seen, nonEmpty(profile) != nil || nonEmpty(environment["AWS_PROFILE"]) != nil {
            return .missing(
                "profile \(name) is in neither \(credentialsFile) nor \(configFile); check its name, or run "
                    + "`aws configure --profile \(name)`")
        }
        return .missing(
            "no AWS access key found (\(looked)); set `accessKeyId` and `secretAccessKey` (from ${env:...}), export "
                + "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run `aws configure`")
    }

    /// The `key = value` pairs of section `[name]` of an INI file, or nil when it has none; keys lower-cased,
    /// comments (`#`, `;`) and nested values ignored.
    static func section(_ name: String, of text: String) -> [String: String]? {
        var values: [String: String]?
        var inSection = false
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                let title = line.dropFirst().dropLast().split(whereSeparator: \.isWhitespace).joined(separator: " ")
                inSection = title == name
                if inSection && values == nil { values = [:] }
                continue
            }
            guard inSection, !rawLine.first!.isWhitespace, let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            values?[key] = value
        }
        return values
    }

    private func nonEmpty(_ text: String?) -> String? {
        guard let text, !text.trimmingCharacters(in: .whitespaces).isEmpty else { return nil }
        return text
    }

    private func expandTilde(_ path: String) -> String {
        guard path.hasPrefix("~/"), let home else { return path }
        return home + path.dropFirst()
    }
}
