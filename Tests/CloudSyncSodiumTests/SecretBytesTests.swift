import CloudSyncSodium
import CloudSyncTesting
import Foundation
import Testing

@Suite struct SecretBytesTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    @Test func neverPrintsItsBytes() {
        let secret = SecretBytes(utf8: "hunter2")
        #expect("\(secret)" == "<redacted>")
        #expect(String(reflecting: secret) == "<redacted>")
        var dumped = ""
        dump(secret, to: &dumped)
        #expect(!dumped.contains("hunter2"))
        #expect(!dumped.contains("104"))  // the first byte, 'h'
    }

    @Test func comparesByContent() {
        #expect(SecretBytes(copying: [1, 2, 3]) == SecretBytes(copying: [1, 2, 3]))
        #expect(SecretBytes(copying: [1, 2, 3]) != SecretBytes(copying: [1, 2, 4]))
        #expect(SecretBytes(copying: [1, 2, 3]) != SecretBytes(copying: [1, 2]))
        #expect(SecretBytes(copying: []) == SecretBytes(copying: []))
    }

    @Test func zeroingInitializerClearsTheSource() {
        var source: [UInt8] = [9, 8, 7, 6]
        let secret = SecretBytes(zeroing: &source)
        #expect(source == [0, 0, 0, 0])
        #expect(secret == SecretBytes(copying: [9, 8, 7, 6]))
    }

    @Test func keyFileRoundTripWithOwnerOnlyMode() throws {
        let path = directory.file("vault.key")
        let key = SecretBytes.random(count: 32)
        try key.save(keyFile: path)
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.hasSuffix("\n"))
        #expect(text.dropLast().allSatisfy { $0.isLetter || $0.isNumber || "+/=".contains($0) })
        #expect(text.count == 45)  // 44 characters of base64 for 32 bytes, and the newline
        #expect(try SecretBytes.load(keyFile: path) == key)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["vault.key"])
    }

    @Test func refusesToOverwriteAKeyFile() throws {
        let path = directory.file("vault.key")
        let original = SecretBytes.random(count: 32)
        try original.save(keyFile: path)
        let error = #expect(throws: SodiumError.self) { try SecretBytes.random(count: 32).save(keyFile: path) }
        #expect(error?.code == .keyFileExists)
        #expect(try SecretBytes.load(keyFile: path) == original)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["vault.key"])
    }

    @Test func acceptsAKeyFileWithoutTrailingNewlineOrWithCRLF() throws {
        let encoded = Data(Array(0..<32) as [UInt8]).base64EncodedString()
        for (name, contents) in [("bare", encoded), ("crlf", encoded + "\r\n")] {
            let path = directory.file(name)
            try contents.write(toFile: path, atomically: true, encoding: .utf8)
            #expect(try SecretBytes.load(keyFile: path) == SecretBytes(copying: Array(0..<32)))
        }
    }

    @Test(arguments: [
        ("empty", "", SodiumError.Code.keyFileMalformed, "is empty"),
        ("blank line", "\n", .keyFileMalformed, "is empty"),
        ("not base64", "this is not a key!\n", .keyFileMalformed, "is not valid base64"),
        ("two lines", "AAAA\nAAAA\n", .keyFileMalformed, "is not valid base64"),
        ("missing padding", String(repeating: "A", count: 43) + "\n", .keyFileMalformed, "is not valid base64"),
        (
            "16 bytes", Data(count: 16).base64EncodedString() + "\n", .keyFileWrongLength,
            "holds 16 bytes, but a key must be 32 bytes"
        ),
        ("33 bytes", Data(count: 33).base64EncodedString() + "\n", .keyFileWrongLength, "holds 33 bytes"),
    ])
    func refusesMalformedKeyFiles(name: String, contents: String, code: SodiumError.Code, phrase: String) throws {
        let path = directory.file("bad.key")
        try contents.write(toFile: path, atomically: true, encoding: .utf8)
        let error = #expect(throws: SodiumError.self) { try SecretBytes.load(keyFile: path) }
        #expect(error?.code == code)
        #expect(error?.message.contains(path) == true)
        #expect(error?.message.contains(phrase) == true, "\(error?.message ?? "")")
    }

    /// libsodium's decoder reads characters as signed `char` and takes any byte above 127 in this place for a letter,
    /// so a key file damaged there (a Latin-1 editor, a stray byte) would load as another key, and every decryption
    /// would then fail as "wrong key or tampered" instead of naming the file.
    @Test func aByteAbove127IsRefusedNotReadAsAnotherKey() throws {
        let path = directory.file("damaged.key")
        let damaged = Array(String(repeating: "A", count: 40).utf8) + [0xC3] + Array("AA=\n".utf8)
        #expect(FileManager.default.createFile(atPath: path, contents: Data(damaged)))
        let error = #expect(throws: SodiumError.self) { try SecretBytes.load(keyFile: path) }
        #expect(error?.code == .keyFileMalformed)
        #expect(error?.message.contains("is not valid base64") == true, "\(error?.message ?? "")")
    }

    @Test func refusesALargeFile() throws {
        let path = directory.file("big.key")
        try String(repeating: "A", count: 10_000).write(toFile: path, atomically: true, encoding: .utf8)
        let error = #expect(throws: SodiumError.self) { try SecretBytes.load(keyFile: path) }
        #expect(error?.message == "key file \(path) is larger than 4096 bytes; it is not a key file")
    }

    @Test func aMissingKeyFileNamesThePathAndTheReason() {
        let path = directory.file("absent.key")
        let error = #expect(throws: SodiumError.self) { try SecretBytes.load(keyFile: path) }
        #expect(error?.code == .keyFileIO)
        #expect(error?.message == "cannot read key file \(path): No such file or directory")
    }
}
