import CCrypto
import CSodium
import CloudSyncCrypto
import CloudSyncSodium
import Foundation

/// The envelope codec's encode + decode beside the honest floor, libsodium's seal and open on the same bytes into
/// buffers allocated once, and beside those calls with OpenSSL's base64 between them (printed apart, no target).
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
        // The floor is the cipher alone; beside it, the cipher with OpenSSL's base64 (libsodium's own is constant
        // time, and slower than either encoding a codec needs), so the row says how near the codec is to the work it
        // cannot avoid, not how its base64 compares with a slow one.
        let floor = try await context.medianSeconds { _ in
            rawLibsodiumRounds(plaintext, key: key, rounds: rounds, base64: false)
        }
        let withText = try await context.medianSeconds { _ in
            rawLibsodiumRounds(plaintext, key: key, rounds: rounds, base64: true)
        }
        let mebibytes = Double(size * rounds) / 1_048_576
        rows.append(
            BenchRow(
                measure: "envelope encode+decode, \(label) values", unit: "MiB/s", ours: mebibytes / ours,
                peerName: "libsodium seal+open alone", peer: mebibytes / floor, target: .atLeast(0.6),
                runs: context.runs))
        rows.append(
            BenchRow(
                measure: "envelope encode+decode, \(label) values", unit: "MiB/s", ours: mebibytes / ours,
                peerName: "libsodium seal+open, OpenSSL base64", peer: mebibytes / withText, target: nil,
                runs: context.runs))
    }
    return rows
}

/// `rounds` of seal and open of `plaintext` with libsodium's C calls, with (`base64`) an OpenSSL base64 encode and
/// decode of the sealed box between them.
private func rawLibsodiumRounds(_ plaintext: String, key: SecretBytes, rounds: Int, base64: Bool) {
    let message = Array(plaintext.utf8)
    let associated = Array("bench.key".utf8)
    let nonceBytes = Int(crypto_aead_xchacha20poly1305_ietf_npubbytes())
    let tagBytes = Int(crypto_aead_xchacha20poly1305_ietf_abytes())
    var box = [UInt8](repeating: 0, count: nonceBytes + message.count + tagBytes)
    var text = [UInt8](repeating: 0, count: (box.count + 2) / 3 * 4 + 1)
    var decoded = [UInt8](repeating: 0, count: (box.count + 2) / 3 * 3)
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
            if base64 {
                let encoded = EVP_EncodeBlock(&text, box, Int32(box.count))
                guard EVP_DecodeBlock(&decoded, text, encoded) >= Int32(box.count) else { fatalError("base64") }
            } else {
                decoded.withUnsafeMutableBufferPointer { decoded in
                    _ = box.withUnsafeBufferPointer { memcpy(decoded.baseAddress!, $0.baseAddress!, $0.count) }
                }
            }
            let length = box.count
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
