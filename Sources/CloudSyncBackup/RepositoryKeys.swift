import CloudSync
import CloudSyncSodium
import CloudSyncZlib
import CloudSyncZstd
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
    /// How objects this writes are compressed before they are sealed.
    let compression: Compression

    /// How a writer compresses objects before sealing them.
    ///
    /// Every kind of object is read whatever the repository's format: the mark in front of an object's base64 says
    /// how it was compressed (none, `deflate:`, `zstd:`).
    enum Compression: Sendable, Equatable {
        /// Format 1: sealed as they are.
        case none
        /// Format 3: each object a zstd frame at `level`, or as it is when that is not smaller.
        case zstd(level: Int32)
    }

    /// What an object format 2 compressed (raw DEFLATE, read through zlib, never written now) starts with, before
    /// its base64.
    ///
    /// Base64 never holds a `:`. Its sealed bytes are bound to the mark too (the associated data is the mark and the
    /// name), so a mark removed or added makes the object fail to authenticate rather than be read the wrong way.
    static let deflateMark = "deflate:"
    /// What an object compressed into a zstd frame (format 3) starts with, bound the same way.
    static let zstdMark = "zstd:"

    /// The compression mark `stored` starts with; empty for an object sealed as it was.
    static func mark(of stored: String) -> String {
        [zstdMark, deflateMark].first { stored.hasPrefix($0) } ?? ""
    }

    /// The most bytes an object may open to.
    ///
    /// Packs hold about 4 MiB and index objects under 1 MiB; the bound only keeps a damaged object from taking the
    /// machine's memory, since an object that authenticates was written by a holder of the data key. A zstd frame
    /// declares its size, so one that claims more is refused before anything is allocated.
    static let maxObjectBytes = 1 << 30

    /// These keys, writing objects compressed as `compression` says.
    func compressing(_ compression: Compression) -> RepositoryKeys {
        RepositoryKeys(data: data, id: id, compression: compression)
    }

    /// How a writer of a repository of `format` compresses: not at all in format 1, zstd at its default level from
    /// format 3 on (a writer never opens a format 2 repository without making it format 3).
    static func compression(forFormat format: Int) -> Compression {
        format >= 3 ? .zstd(level: Zstd.defaultLevel) : .none
    }

    /// Fresh random keys for a repository of `format`.
    static func random(format: Int) -> RepositoryKeys {
        RepositoryKeys(
            data: SecretBytes(copying: SecureRandom.bytes(count: 32)),
            id: SecretBytes(copying: SecureRandom.bytes(count: 32)), compression: compression(forFormat: format))
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
            data: SecretBytes(copying: bytes[0..<32]), id: SecretBytes(copying: bytes[32..<64]),
            compression: compression(forFormat: format))
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
    /// compressed first when the keys compress and that makes it smaller, and then marked with the compression's mark.
    func seal(_ plaintext: [UInt8], name: String) throws(CloudSyncError) -> String {
        var mark = ""
        var payload = plaintext
        if case .zstd(let level) = compression {
            let frame = Zstd.compress(plaintext, level: level)
            if frame.count < plaintext.count {
                mark = Self.zstdMark
                payload = frame
            }
        }
        do {
            let sealed = try payload.withUnsafeBufferPointer { buffer throws(SodiumError) in
                try XChaCha20Poly1305.sealCombined(buffer, key: data, associatedData: Array((mark + name).utf8))
            }
            return mark + Data(sealed).base64EncodedString()
        } catch {
            throw CloudSyncError(.provider, "could not seal \(name): \(error)")
        }
    }

    /// The plaintext of a sealed object, decompressed as its mark says; `ERR_DECODE` naming the object when it does
    /// not open (damaged, or another object's) or does not decompress.
    func open(_ stored: String, name: String, repository: String) throws(CloudSyncError) -> [UInt8] {
        let mark = Self.mark(of: stored)
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
        do {
            switch mark {
            case Self.zstdMark: return try Zstd.decompress(opened, maxOutputBytes: Self.maxObjectBytes)
            case Self.deflateMark: return try RawInflate.inflate(opened, maxOutputBytes: Self.maxObjectBytes)
            default: return opened
            }
        } catch {
            throw CloudSyncError(
                .decode,
                "object \(name) of the backup repository in \(repository) authenticates but does not decompress "
                    + "(\(error)): it was written damaged; run a verify job, and a prune to drop what no snapshot "
                    + "needs", provider: repository, key: name)
        }
    }
}
