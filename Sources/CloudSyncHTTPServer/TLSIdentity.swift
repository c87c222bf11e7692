internal import CSSL
import Foundation

/// Why a ``TLSIdentity`` could not be made.
public struct TLSIdentityError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The step that failed and OpenSSL's reason for it.
    public let message: String

    /// `TLS identity: signing the server certificate failed: ...`.
    public var description: String { "TLS identity: \(message)" }
}

/// What ``LoopbackHTTPServer`` serves HTTPS with: a server certificate and its private key, held in memory only, and
/// the certificate of the authority that signed it, which a client trusts to reach the server.
///
/// ``throwaway(dnsNames:ipAddresses:validity:)`` makes both at once: a certificate authority of its own (self-signed,
/// `CA:TRUE`) whose key signs the server certificate and is then thrown away, so nothing else can ever be signed by
/// it; its certificate (``authorityCertificatePEM``, public) is all a client needs. No private key leaves memory.
///
/// Sendable by hand: the OpenSSL context is configured once, in the initializer, and only read after that (each
/// connection makes its own session from it, which OpenSSL allows from any thread).
public final class TLSIdentity: @unchecked Sendable {
    /// The signing authority's certificate as PEM, without its key: the file a client names as its CA
    /// (`curl --cacert`, `httplib2.Http(ca_certs=)`).
    public let authorityCertificatePEM: String
    /// The server certificate as PEM (also public), for tests and for people reading it with `openssl x509`.
    public let certificatePEM: String
    /// The host names the server certificate is valid for (`localhost`).
    public let dnsNames: [String]
    /// The IP addresses the server certificate is valid for (`127.0.0.1`).
    public let ipAddresses: [String]
    /// The `SSL_CTX` every connection's session is made from, holding the server certificate and key.
    let context: OpaquePointer

    private init(
        context: OpaquePointer, authorityCertificatePEM: String, certificatePEM: String, dnsNames: [String],
        ipAddresses: [String]
    ) {
        self.context = context
        self.authorityCertificatePEM = authorityCertificatePEM
        self.certificatePEM = certificatePEM
        self.dnsNames = dnsNames
        self.ipAddresses = ipAddresses
    }

    deinit { SSL_CTX_free(context) }

    /// A fresh certificate authority and a server certificate it signed for `dnsNames` and `ipAddresses` (its
    /// `subjectAltName`), both on new EC P-256 keys, valid from an hour ago (for clocks a little behind) until
    /// `validity` from now; the authority's key is freed once it has signed.
    public static func throwaway(
        dnsNames: [String] = ["localhost"], ipAddresses: [String] = ["127.0.0.1"],
        validity: Duration = .seconds(24 * 3600)
    ) throws(TLSIdentityError) -> TLSIdentity {
        guard !dnsNames.isEmpty || !ipAddresses.isEmpty else {
            throw TLSIdentityError(message: "a server certificate needs at least one host name or IP address")
        }
        let seconds = Int(validity.components.seconds)
        let authorityKey = try newP256Key()
        defer { EVP_PKEY_free(authorityKey) }
        let authority = try certificate(
            commonName: "CloudSync throwaway CA", key: authorityKey, issuer: nil, validFor: seconds,
            extensions: [
                (NID_basic_constraints, "critical,CA:TRUE,pathlen:0"),
                (NID_key_usage, "critical,keyCertSign,cRLSign"),
                (NID_subject_key_identifier, "hash"),
            ])
        defer { X509_free(authority) }

        let serverKey = try newP256Key()
        defer { EVP_PKEY_free(serverKey) }
        let alternativeNames = (dnsNames.map { "DNS:" + $0 } + ipAddresses.map { "IP:" + $0 }).joined(separator: ",")
        let server = try certificate(
            commonName: dnsNames.first ?? ipAddresses[0], key: serverKey, issuer: (authority, authorityKey),
            validFor: seconds,
            extensions: [
                (NID_basic_constraints, "critical,CA:FALSE"),
                (NID_key_usage, "critical,digitalSignature"),
                (NID_ext_key_usage, "serverAuth"),
                (NID_subject_alt_name, alternativeNames),
                (NID_subject_key_identifier, "hash"),
                (NID_authority_key_identifier, "keyid:always"),
            ])
        defer { X509_free(server) }

        guard let context = SSL_CTX_new(TLS_server_method()) else { throw failure("creating the TLS context") }
        guard SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil) == 1,
            SSL_CTX_use_certificate(context, server) == 1, SSL_CTX_use_PrivateKey(context, serverKey) == 1,
            SSL_CTX_check_private_key(context) == 1
        else {
            let error = failure("loading the server certificate and key")
            SSL_CTX_free(context)
            throw error
        }
        return TLSIdentity(
            context: context, authorityCertificatePEM: try pem(authority), certificatePEM: try pem(server),
            dnsNames: dnsNames, ipAddresses: ipAddresses)
    }

    /// A new EC key on P-256 (`prime256v1`).
    private static func newP256Key() throws(TLSIdentityError) -> OpaquePointer {
        guard let generator = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nil) else { throw failure("creating a key generator") }
        defer { EVP_PKEY_CTX_free(generator) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(generator) == 1,
            EVP_PKEY_CTX_set_ec_paramgen_curve_nid(generator, NID_X9_62_prime256v1) == 1,
            EVP_PKEY_keygen(generator, &key) == 1, let key
        else { throw failure("generating an EC P-256 key") }
        return key
    }

    /// An X.509 v3 certificate for `key` named `commonName`, with a random serial and `extensions` (NID and OpenSSL's
    /// configuration text), signed with SHA-256 by `issuer` (certificate and key), or by `key` itself when nil.
    private static func certificate(
        commonName: String, key: OpaquePointer, issuer: (certificate: OpaquePointer, key: OpaquePointer)?,
        validFor seconds: Int, extensions: [(Int32, String)]
    ) throws(TLSIdentityError) -> OpaquePointer {
        guard let certificate = X509_new() else { throw failure("creating a certificate") }
        var built = false
        defer { if !built { X509_free(certificate) } }

        var serial = [UInt8](repeating: 0, count: 16)
        guard RAND_bytes(&serial, Int32(serial.count)) == 1 else { throw failure("drawing a serial number") }
        serial[0] = serial[0] & 0x7f | 0x01  // positive, and 16 bytes long
        guard let number = BN_bin2bn(serial, Int32(serial.count), nil) else { throw failure("a serial number") }
        defer { BN_free(number) }

        let name = X509_get_subject_name(certificate)
        guard X509_set_version(certificate, 2) == 1,  // 2 is X.509 v3, which extensions need
            BN_to_ASN1_INTEGER(number, X509_get_serialNumber(certificate)) != nil,
            X509_gmtime_adj(X509_getm_notBefore(certificate), -3600) != nil,
            X509_gmtime_adj(X509_getm_notAfter(certificate), seconds) != nil,
            X509_set_pubkey(certificate, key) == 1,
            X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, "CloudSync", -1, -1, 0) == 1,
            X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, commonName, -1, -1, 0) == 1,
            X509_set_issuer_name(certificate, issuer.map { X509_get_subject_name($0.certificate) } ?? name) == 1
        else { throw failure("filling in the certificate for \(commonName)") }

        var extensionContext = X509V3_CTX()
        X509V3_set_ctx(&extensionContext, issuer?.certificate ?? certificate, certificate, nil, nil, 0)
        for (nid, value) in extensions {
            guard let made = X509V3_EXT_conf_nid(nil, &extensionContext, nid, value) else {
                throw failure("the extension \(value) of \(commonName)")
            }
            defer { X509_EXTENSION_free(made) }
            guard X509_add_ext(certificate, made, -1) == 1 else { throw failure("adding \(value) to \(commonName)") }
        }
        guard X509_sign(certificate, issuer?.key ?? key, EVP_sha256()) > 0 else {
            throw failure("signing the certificate for \(commonName)")
        }
        built = true
        return certificate
    }

    /// `certificate` as PEM: its DER in Base64, 64 characters a line, between the `CERTIFICATE` markers.
    private static func pem(_ certificate: OpaquePointer) throws(TLSIdentityError) -> String {
        let length = i2d_X509(certificate, nil)
        guard length > 0 else { throw failure("encoding a certificate") }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return i2d_X509(certificate, &cursor)
        }
        guard written == length else { throw failure("encoding a certificate") }
        let base64 = Array(Data(der).base64EncodedString())
        let lines = stride(from: 0, to: base64.count, by: 64).map { String(base64[$0..<min($0 + 64, base64.count)]) }
        return "-----BEGIN CERTIFICATE-----\n" + lines.joined(separator: "\n") + "\n-----END CERTIFICATE-----\n"
    }

    /// An error for `step`, with the reasons on OpenSSL's error queue (which it empties).
    private static func failure(_ step: String) -> TLSIdentityError {
        TLSIdentityError(message: step + " failed" + openSSLReasons())
    }
}

/// `: reason; reason` from this thread's OpenSSL error queue, emptied on the way; empty when it held none.
func openSSLReasons() -> String {
    var reasons: [String] = []
    var buffer = [CChar](repeating: 0, count: 256)
    while case let code = ERR_get_error(), code != 0 {
        ERR_error_string_n(code, &buffer, buffer.count)
        reasons.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
    return reasons.isEmpty ? "" : ": " + reasons.joined(separator: "; ")
}
