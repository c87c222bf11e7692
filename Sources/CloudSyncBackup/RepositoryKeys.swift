import CloudSync
import CloudSyncDeflate
import CloudSyncSodium
import Foundation

/// The two secrets of a backup repository: the data key that seals every object, and the id key that names values
/// (a value's id is BLAKE2b of its bytes keyed with it, so equal values share an id and ids reveal nothing).
///
/// They are made once, at random, when the repository is created, and stored in its `config` object sealed by the
/// pipeline's codec (an envelope of the current key of its ring): re-keying the codec rewraps that one object, and
/// no data is uploaded again.
struct RepositoryKeys: Sendable {
    let data: SecretBytes
    let id: SecretBytes
    /// Whether objects this writes are compressed (raw DEFLATE) before they are sealed: in format 2.
    ///
    /// A format 1 repository becomes format 2 when a backup opens it. Either kind of object is read in either format.
    let compresses: Bool
    /// What a compressed object's stored text starts with, before the base64.
    ///
    /// Base64 never holds a `:`. Its sealed bytes are bound to the mark too (the associated data is the mark and the
    /// name), so a mark removed or added makes the object fail to authenticate rather than be read the wrong way.
    static let compressedMark = "deflate:"

    /// The most bytes an object may open to.
    ///
    /// Packs hold about 4 MiB and index objects under 1 MiB; the bound only keeps a damaged object from taking the
    /// machine's memory, since an object that authenticates was written by a holder of the data key.
    static let maxObjectBytes = 1 << 30

    /// These keys, writing compressed objects.
    func compressing() -> RepositoryKeys { RepositoryKeys(data: data, id: id, compresses: true) }

    /// Fresh random keys for a repository of `format`.
    static func random(format: Int) -> RepositoryKeys {
        RepositoryKeys(
            data: SecretBytes(copying: SecureRandom.bytes(count: 32)),
            id: SecretBytes(copying: SecureRandom.bytes(count: 32)), compresses: format >= 2)
    }

    /// The keys as the config stores them, sealed by `codec` under the store key `name`.
    func wrapped(with codec: any ValueCodec, as name: String) throws(CloudSyncError) -> String {
        let material = data.withUnsafeBytes { Array($0) } + id.withUnsafeBytes { Array($0) }
        do {
            return try codec.encode(Data(material).base64EncodedString(), key: name)
        } catch {
            throw CloudSyncError(.config, "could not seal the repository's keys with the codec: \(error)")
        }
    }

    /// The keys a config holds, opened with `codec`; `ERR_DECODE` naming `repository` when no key of the ring opens
    /// them.
    static func unwrapped(
        _ stored: String, with codec: any ValueCodec, as name: String, repository: String, format: Int
    ) throws(CloudSyncError) -> RepositoryKeys {
        let opened: String
        do {
            opened = try codec.decode(stored, key: name)
        } catch {
            throw CloudSyncError(
                .decode,
                "no key of the codec's ring opens the backup repository in \(repository) (\(error)); give the codec "
                    + "the key the repository was made with", provider: repository, key: name)
        }
        guard let material = Data(base64Encoded: opened), material.count == 64 else {
            throw CloudSyncError(
                .decode, "the backup repository in \(repository) holds a damaged config: its keys are not 64 bytes",
                provider: repository, key: name)
        }
        let bytes = [UInt8](material)
        return RepositoryKeys(
            data: SecretBytes(copying: bytes[0..<32]), id: SecretBytes(copying: bytes[32..<64]), compresses: format >= 2
        )
    }

    /// A value's id: BLAKE2b-128 of its bytes keyed with the id key, in hexadecimal.
    func objectID(of value: String) -> String {
        var value = value
        return value.withUTF8 { objectID(of: UnsafeRawBufferPointer($0)) }
    }

    /// The id of a blob's bytes.
    func objectID(of bytes: ArraySlice<UInt8>) -> String {
        bytes.withUnsafeBytes { objectID(of: $0) }
    }

    private func objectID(of bytes: UnsafeRawBufferPointer) -> String {
        Hex.encode((try? BLAKE2b.hash(bytes, byteCount: 16, key: id)) ?? [])
    }

    /// `plaintext` sealed with the data key, bound to the object's `name` so an object cannot stand in for another;
    /// in format 2 compressed first and marked with ``compressedMark``.
    func seal(_ plaintext: [UInt8], name: String) throws(CloudSyncError) -> String {
        let mark = compresses ? Self.compressedMark : ""
        let plaintext = compresses ? Deflate.compress(plaintext) : plaintext
        do {
            let sealed = try plaintext.withUnsafeBufferPointer { buffer throws(SodiumError) in
                try XChaCha20Poly1305.sealCombined(buffer, key: data, associatedData: Array((mark + name).utf8))
            }
            return mark + Data(sealed).base64EncodedString()
        } catch {
            throw CloudSyncError(.provider, "could not seal \(name): \(error)")
        }
    }

    /// The plaintext of a sealed object, decompressed when it is marked compressed; `ERR_DECODE` naming the object
    /// when it does not open (damaged, or another object's).
    func open(_ stored: String, name: String, repository: String) throws(CloudSyncError) -> [UInt8] {
        let compressed = stored.hasPrefix(Self.compressedMark)
        let mark = compressed ? Self.compressedMark : ""
        guard let sealed = Data(base64Encoded: String(stored.dropFirst(mark.count))) else {
            throw CloudSyncError(
                .decode, "object \(name) of the backup repository in \(repository) is not base64", provider: repository,
                key: name)
        }
        let opened: [UInt8]
        do {
            opened = try [UInt8](sealed).withUnsafeBufferPointer { buffer throws(SodiumError) in
                try XChaCha20Poly1305.openCombined(buffer, key: data, associatedData: Array((mark + name).utf8))
            }
        } catch {
            throw CloudSyncError(
                .decode,
                "object \(name) of the backup repository in \(repository) does not authenticate: it was changed or "
                    + "damaged", provider: repository, key: name)
        }
        guard compressed else { return opened }
        do {
            return try Deflate.decompress(opened, maxOutputBytes: Self.maxObjectBytes)
        } catch {
            throw CloudSyncError(
                .decode,
                "object \(name) of the backup repository in \(repository) authenticates but does not decompress "
                    + "(\(error)): it was written damaged; run a verify job, and a prune to drop what no snapshot "
                    + "needs", provider: repository, key: name)
        }
    }
}
