import CSodium
import CloudSyncCrypto
import CloudSyncSodium
import Foundation

/// The envelope codec's encode + decode beside the honest floor: libsodium's own calls on the same bytes — seal, base64
/// encode, base64 decode, open — into buffers allocated once.
func benchCodec(_ context: BenchContext) async throws -> [BenchRow] {
    _ = sodium_init()
    let key = SecretBytes.random(count: 32)
    let codec = try EnvelopeCodec(keys: [.raw(id: "bench", key)])
    var rows: [BenchRow] = []
    for (label, size, rounds) in [("1 KB", 1024, 20_000), ("1 MB", 1024 * 1024, 60)] {
        let plaintext = String(repeating: "v", count: size)
        let ours = try await context.medianSeconds { _ in
            for _ in 0..<rounds {
                let envelope = try codec.encode(plaintext, key: "bench.key")
                guard try codec.decode(envelope, key: "bench.key").utf8.count == size else { fatalError("codec") }
            }
        }
        let peer = try await context.medianSeconds { _ in rawLibsodiumRounds(plaintext, key: key, rounds: rounds) }
        let mebibytes = Double(size * rounds) / 1_048_576
        rows.append(
            BenchRow(
                measure: "envelope encode+decode, \(label) values", unit: "MiB/s", ours: mebibytes / ours,
                peerName: "libsodium seal+b64+unb64+open", peer: mebibytes / peer, target: .atLeast(0.8),
                runs: context.runs))
    }
    return rows
}

/// `rounds` of seal, base64 encode, base64 decode and open of `plaintext` with libsodium's C calls.
private func rawLibsodiumRounds(_ plaintext: String, key: SecretBytes, rounds: Int) {
    let message = Array(plaintext.utf8)
    let associated = Array("bench.key".utf8)
    let nonceBytes = Int(crypto_aead_xchacha20poly1305_ietf_npubbytes())
    let tagBytes = Int(crypto_aead_xchacha20poly1305_ietf_abytes())
    let variant = sodium_base64_VARIANT_URLSAFE_NO_PADDING
    var box = [UInt8](repeating: 0, count: nonceBytes + message.count + tagBytes)
    let textCapacity = sodium_base64_encoded_len(box.count, variant)
    var text = [CChar](repeating: 0, count: textCapacity)
    var decoded = [UInt8](repeating: 0, count: box.count)
    var opened = [UInt8](repeating: 0, count: message.count)
    key.withUnsafeBytes { rawKey in
        let keyPointer = rawKey.baseAddress!.assumingMemoryBound(to: UInt8.self)
        for _ in 0..<rounds {
            box.withUnsafeMutableBufferPointer { box in
                randombytes_buf(box.baseAddress!, nonceBytes)
                var written: UInt64 = 0
                _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                    box.baseAddress! + nonceBytes, &written, message, UInt64(message.count), associated,
                    UInt64(associated.count), nil, box.baseAddress!, keyPointer)
            }
            _ = sodium_bin2base64(&text, textCapacity, box, box.count, variant)
            var length = 0
            _ = sodium_base642bin(&decoded, decoded.count, text, textCapacity - 1, nil, &length, nil, variant)
            var written: UInt64 = 0
            let status = decoded.withUnsafeBufferPointer { decoded in
                crypto_aead_xchacha20poly1305_ietf_decrypt(
                    &opened, &written, nil, decoded.baseAddress! + nonceBytes, UInt64(length - nonceBytes),
                    associated, UInt64(associated.count), decoded.baseAddress!, keyPointer)
            }
            guard status == 0, Int(written) == message.count else { fatalError("libsodium round failed") }
        }
    }
}
