internal import CBuildInfo
internal import CCurl
import CloudSync
import CloudSyncHTTPServer
import CloudSyncOpenSSL
import CloudSyncPostgres
import CloudSyncSQLite
import CloudSyncSodium
import CloudSyncYAML
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What `cloudsync version` reports: this version, what the binary was built from, where it runs and the C libraries
/// it runs with, each as the loaded library says rather than as its headers said at build time.
struct VersionReport {
    /// ``CloudSyncVersion/current``.
    let version: String
    /// Everything else as (key, value), in the order the text lists them; every value is text, `unknown` when the
    /// build or the system did not say.
    let fields: [(key: String, value: String)]

    /// The report for this binary on this machine.
    static var current: VersionReport {
        VersionReport(
            version: CloudSyncVersion.current,
            fields: [
                ("commit", built(cloudsync_build_commit())),
                ("commitDate", built(cloudsync_build_commit_date())),
                ("swift", swiftVersion),
                ("os", operatingSystem),
                ("kernel", kernel),
                ("arch", architecture),
                ("sqlite", SQLiteLibrary.version),
                ("libsodium", SodiumLibrary.version),
                ("libyaml", YAMLLibrary.version),
                ("libcurl", CurlLibrary.version),
                ("libcurlTLS", CurlLibrary.tlsVersion),
                ("libcrypto", OpenSSLLibrary.version),
                ("libpq", PostgresLibrary.version),
                ("libmicrohttpd", NetworkHTTPServer.libraryVersion),
            ])
    }

    /// `cloudsync VERSION`, then `- key: value` lines, as `rclone version` prints them.
    var text: String {
        "cloudsync \(version)\n" + fields.map { "- \($0.key): \($0.value)\n" }.joined()
    }

    /// One object with `version` and every field, keys sorted, as the other `--json` outputs.
    var json: String {
        var object = ["version": version]
        for (key, value) in fields { object[key] = value }
        return encoded(object)
    }

    /// A string the build passed (Sources/CBuildInfo), `unknown` when it passed none.
    private static func built(_ value: UnsafePointer<CChar>) -> String {
        let text = String(cString: value)
        return text.isEmpty ? "unknown" : text
    }

    /// The compiler's version as the build captured it from `swift --version` (`6.3.1`); for a build that did not
    /// (a plain `swift build`), the language's `#if compiler` test, which knows major and minor versions only.
    static var swiftVersion: String {
        let captured = String(cString: cloudsync_build_swift_version())
        return captured.isEmpty ? compilerVersion : captured
    }

    /// The major and minor version of the compiler that built this code (Package.swift asks for 6.0 at least).
    static var compilerVersion: String {
        #if compiler(>=6.5)
            return "6.5 or later"
        #elseif compiler(>=6.4)
            return "6.4"
        #elseif compiler(>=6.3)
            return "6.3"
        #elseif compiler(>=6.2)
            return "6.2"
        #elseif compiler(>=6.1)
            return "6.1"
        #else
            return "6.0"
        #endif
    }

    /// The architecture this binary was compiled for, named as `uname -m` names it.
    static var architecture: String {
        #if arch(x86_64)
            return "x86_64"
        #elseif arch(arm64)
            return "aarch64"
        #elseif arch(arm)
            return "arm"
        #elseif arch(i386)
            return "i686"
        #elseif arch(powerpc64le)
            return "ppc64le"
        #elseif arch(s390x)
            return "s390x"
        #elseif arch(riscv64)
            return "riscv64"
        #else
            return "unknown"
        #endif
    }

    /// The kernel's name, release and machine, as `uname -srm` prints them but with the machine in parentheses.
    static var kernel: String {
        var names = utsname()
        guard uname(&names) == 0 else { return "unknown" }
        func text<Field>(_ field: Field) -> String {
            withUnsafeBytes(of: field) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        }
        return "\(text(names.sysname)) \(text(names.release)) (\(text(names.machine)))"
    }

    /// The distribution's `PRETTY_NAME` from os-release(5): /etc/os-release, else /usr/lib/os-release; `unknown`
    /// when neither can be read.
    static var operatingSystem: String {
        for path in ["/etc/os-release", "/usr/lib/os-release"] {
            if let contents = try? String(contentsOfFile: path, encoding: .utf8) {
                return prettyName(osRelease: contents)
            }
        }
        return "unknown"
    }

    /// `PRETTY_NAME` of an os-release file, read as the shell would: the value bare (a backslash escapes the next
    /// character), in single quotes (taken as it is) or in double quotes (a backslash escapes `\`, `"`, `$` and a
    /// backquote); the last assignment counts, and `Linux` when there is none, as os-release(5) says.
    static func prettyName(osRelease contents: String) -> String {
        var name = "Linux"
        for line in contents.split(whereSeparator: \.isNewline) {
            let trimmed = line.drop { $0 == " " || $0 == "\t" }
            guard trimmed.hasPrefix("PRETTY_NAME=") else { continue }
            let raw = trimmed.dropFirst("PRETTY_NAME=".count)
            var value = ""
            var quote: Character?
            var escaped = false
            for character in raw {
                if escaped {
                    // In double quotes a backslash escapes only these; before anything else it stays.
                    if quote != nil && !"\\\"$`".contains(character) { value.append("\\") }
                    value.append(character)
                    escaped = false
                } else if let open = quote {
                    if character == open {
                        quote = nil
                    } else if character == "\\" && open == "\"" {
                        escaped = true
                    } else {
                        value.append(character)
                    }
                } else if character == "\"" || character == "'" {
                    quote = character
                } else if character == "\\" {
                    escaped = true
                } else if character == " " || character == "\t" {
                    break
                } else {
                    value.append(character)
                }
            }
            name = value
        }
        return name
    }
}

extension CommandLineTool {
    /// `cloudsync version [--json]`.
    func version(_ parsed: ParsedArguments) -> ExitCode {
        let report = VersionReport.current
        standardOutput(parsed.flag(Commands.json) ? report.json : report.text)
        return .success
    }
}

/// The libcurl this process runs with: the one FoundationNetworking's URLSession, and so every HTTP request of the
/// REST providers, goes through.
enum CurlLibrary {
    /// Its version, as the loaded library says (`curl_version_info()`): `7.88.1`.
    static var version: String {
        cloudsync_curl_version_info()?.pointee.version.map { String(cString: $0) } ?? "unknown"
    }

    /// The TLS library it was built with and its version (`OpenSSL/3.0.19`); `none` when it has none.
    static var tlsVersion: String {
        cloudsync_curl_version_info()?.pointee.ssl_version.map { String(cString: $0) } ?? "none"
    }
}
