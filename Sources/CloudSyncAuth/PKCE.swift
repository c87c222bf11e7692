import CloudSyncSodium

/// A Proof Key for Code Exchange (RFC 7636): a secret verifier the client keeps and the challenge it sends.
///
/// The authorization request carries the challenge (`code_challenge`, method `S256`); the token request carries the
/// verifier, so a code intercepted on its way to the loopback redirect is useless to anyone else.
public struct PKCE: Sendable, Equatable {
    /// The secret: 43 characters of URL-safe base64 (32 random bytes), within RFC 7636's 43...128 unreserved
    /// characters.
    public let verifier: String

    /// A new random verifier.
    public init() {
        verifier = Base64URL.encode(SecureRandom.bytes(count: 32))
    }

    /// A given verifier, for tests against the RFC's vectors.
    public init(verifier: String) {
        self.verifier = verifier
    }

    /// `BASE64URL(SHA256(ASCII(verifier)))` without padding: the `S256` challenge.
    public var challenge: String { Self.challenge(for: verifier) }

    /// The `code_challenge_method` this type uses.
    public static let method = "S256"

    /// The `S256` challenge of `verifier`.
    public static func challenge(for verifier: String) -> String {
        Base64URL.encode(SHA256.hash(Array(verifier.utf8)))
    }
}

/// An unguessable value for OAuth's `state` parameter, which ties the redirect to the request that caused it.
public func randomOAuthState() -> String {
    Base64URL.encode(SecureRandom.bytes(count: 16))
}
