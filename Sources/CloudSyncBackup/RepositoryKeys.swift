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

    /// The most bytes an object of any kind may open to (a snapshot of tens of millions of keys stays under it).
    ///
    /// Only a damaged object reaches a bound, since an object that authenticates was written by a holder of the data
    /// key; the bounds keep one from taking the machine's memory. A zstd frame declares its size, so one that claims
    /// more is refused before anything is allocated.
    static let maxObjectBytes = 1 << 30
    /// The most a pack or an index object opens to: writers make packs of 4 MiB (chunks of at most 8 MiB where a
    /// library caller asks for larger packs) and index objects of at most 10,000 entries, under 2 MiB.
    static let maxPackBytes = 16 << 20

    /// The bound ``open(bytes:name:repository:maxBytes:)`` reads the object `name` to, by its kind.
    static func maxBytes(of name: String) -> Int {
        let kind = name.dropFirst(BackupRepository.prefix.count).prefix { $0 != "." }
        return kind == "data" || kind == "index" ? maxPackBytes : maxObjectBytes
    }

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
    ///
    /// This is the text form, for providers that store only text: the mark, then base64 of the sealed bytes.
    func seal(_ plaintext: [UInt8], name: String) throws(CloudSyncError) -> String {
        let (mark, sealed) = try sealed(plaintext, name: name)
        return mark + Data(sealed).base64EncodedString()
    }

    /// ``seal(_:name:)`` in the byte form, for providers that store files, in its two parts (so a pack is not
    /// copied again to join them).
    ///
    /// The object is `prefix` (a zero byte, then the mark's code, ``BinaryMark``) followed by the sealed bytes as
    /// they are. The associated data is the text form's, so the two forms of one object carry the same sealed bytes.
    func sealBytes(_ plaintext: [UInt8], name: String) throws(CloudSyncError) -> (prefix: [UInt8], sealed: [UInt8]) {
        let (mark, sealed) = try sealed(plaintext, name: name)
        return ([0, BinaryMark(text: mark).rawValue], sealed)
    }

    /// The codes of the byte form's marks (its second byte).
    enum BinaryMark: UInt8 {
        case none = 0
        case deflate = 1
        case zstd = 2

        init(text mark: String) {
            switch mark {
            case RepositoryKeys.zstdMark: self = .zstd
            case RepositoryKeys.deflateMark: self = .deflate
            default: self = .none
            }
        }

        var text: String {
            switch self {
            case .none: ""
            case .deflate: RepositoryKeys.deflateMark
            case .zstd: RepositoryKeys.zstdMark
            }
        }
    }

    /// The compression mark and the sealed (nonce, ciphertext, tag) bytes of `plaintext`.
    private func sealed(_ plaintext: [UInt8], name: String) throws(CloudSyncError) -> (mark: String, sealed: [UInt8]) {
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
            return (mark, sealed)
        } catch {
            throw CloudSyncError(.provider, "could not seal \(name): \(error)")
        }
    }

    /// The plaintext of an object in either form: the byte form when it starts with a zero byte (no text form does),
    /// else the text form; at most `maxBytes` of it.
    func open(bytes stored: [UInt8], name: String, repository: String, maxBytes: Int) throws(CloudSyncError)
        -> [UInt8]
    {
        guard stored.first == 0 else {
            return try open(
                String(decoding: stored, as: UTF8.self), name: name, repository: repository, maxBytes: maxBytes)
        }
        guard stored.count >= 2, let mark = BinaryMark(rawValue: stored[1]) else {
            throw CloudSyncError(
                .decode, "object \(name) of the backup repository in \(repository) has an unknown mark",
                provider: repository, key: name)
        }
        return try open(
            sealed: Array(stored.dropFirst(2)), mark: mark.text, name: name, repository: repository, maxBytes: maxBytes)
    }

    /// The plaintext of a sealed object in the text form, decompressed as its mark says, at most `maxBytes` of it;
    /// `ERR_DECODE` naming the object when it does not open (damaged, or another object's), does not decompress, or
    /// would be longer.
    func open(_ stored: String, name: String, repository: String, maxBytes: Int = maxObjectBytes)
        throws(CloudSyncError) -> [UInt8]
    {
        let mark = Self.mark(of: stored)
        guard let sealed = Data(base64Encoded: String(stored.dropFirst(mark.count))) else {
            throw CloudSyncError(
                .decode, "object \(name) of the backup repository in \(repository) is not base64", provider: repository,
                key: name)
        }
        return try open(sealed: [UInt8](sealed), mark: mark, name: name, repository: repository, maxBytes: maxBytes)
    }

    private func open(sealed: [UInt8], mark: String, name: String, repository: String, maxBytes: Int)
        throws(CloudSyncError) -> [UInt8]
    {
        let opened: [UInt8]
        do {
            opened = try sealed.withUnsafeBufferPointer { buffer throws(SodiumError) in
                try XChaCha20Poly1305.openCombined(buffer, key: data, associatedData: Array((mark + name).utf8))
            }
        } catch {
            throw CloudSyncError(
                .decode,
                "object \(name) of the backup repository in \(repository) does not authenticate: it was changed or "
                    + "damaged", provider: repository, key: name)
        }
        let plaintext: [UInt8]
        do {
            switch mark {
            case Self.zstdMark: plaintext = try Zstd.decompress(opened, maxOutputBytes: maxBytes)
            case Self.deflateMark: plaintext = try RawInflate.inflate(opened, maxOutputBytes: maxBytes)
            default: plaintext = opened
            }
        } catch ZstdError.tooLarge, InflateError.tooLarge {
            throw tooLong(name, repository, maxBytes)
        } catch {
            throw CloudSyncError(
                .decode,
                "object \(name) of the backup repository in \(repository) authenticates but does not decompress "
                    + "(\(error)): it was written damaged; run a verify job, and a prune to drop what no snapshot "
                    + "needs", provider: repository, key: name)
        }
        guard plaintext.count <= maxBytes else { throw tooLong(name, repository, maxBytes) }
        return plaintext
    }

    /// An object that opens to more than a writer of its kind makes: damaged, read no further.
    private func tooLong(_ name: String, _ repository: String, _ maxBytes: Int) -> CloudSyncError {
        CloudSyncError(
            .decode,
            "object \(name) of the backup repository in \(repository) opens to more than \(maxBytes) bytes, more than "
                + "any writer makes an object of its kind; it is damaged and was read no further: run a verify job",
            provider: repository, key: name)
    }
}
