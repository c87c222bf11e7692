import CloudSync
import CloudSyncS3
import CloudSyncTesting
import Foundation
import Testing

@Suite struct S3CredentialResolverTests {
    let home: TemporaryDirectory

    init() throws {
        home = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: home.file(".aws"), withIntermediateDirectories: true)
        try """
        [default]
        aws_access_key_id = AKIADEFAULT
        aws_secret_access_key = default-secret

        [backup]
        aws_access_key_id=AKIABACKUP
        aws_secret_access_key=backup-secret
        aws_session_token = backup-token
        """.write(toFile: home.file(".aws/credentials"), atomically: true, encoding: .utf8)
        try """
        [default]
        region = eu-west-1

        [profile from-config]
        aws_access_key_id = AKIACONFIG
        aws_secret_access_key = config-secret

        [profile sso]
        sso_session = corp
        sso_account_id = 123
        """.write(toFile: home.file(".aws/config"), atomically: true, encoding: .utf8)
    }

    func resolve(
        fields: (id: String?, secret: String?, profile: String?) = (nil, nil, nil), environment: [String: String] = [:]
    ) -> S3CredentialResolver.Resolution {
        S3CredentialResolver(
            accessKeyID: fields.id, secretAccessKey: fields.secret, profile: fields.profile,
            environment: ["HOME": home.path].merging(environment) { $1 }
        ).resolve()
    }

    @Test func explicitFieldsComeFirst() {
        #expect(
            resolve(fields: ("AKIAFIELD", "field-secret", nil), environment: ["AWS_ACCESS_KEY_ID": "AKIAENV"])
                == .found(S3Credentials(accessKeyID: "AKIAFIELD", secretAccessKey: "field-secret"), .fields))
    }

    @Test func thenTheEnvironmentWithItsSessionToken() {
        let environment = [
            "AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": "env-secret", "AWS_SESSION_TOKEN": "env-token",
            "AWS_PROFILE": "backup",
        ]
        // As with the CLI, AWS_PROFILE does not hide keys in the environment.
        #expect(
            resolve(environment: environment)
                == .found(
                    S3Credentials(accessKeyID: "AKIAENV", secretAccessKey: "env-secret", sessionToken: "env-token"),
                    .environment))
    }

    @Test func aProfileFieldSkipsTheEnvironmentAsTheCLIsProfileOptionDoes() {
        let resolution = resolve(
            fields: (nil, nil, "backup"),
            environment: ["AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": "env-secret"])
        #expect(
            resolution
                == .found(
                    S3Credentials(
                        accessKeyID: "AKIABACKUP", secretAccessKey: "backup-secret", sessionToken: "backup-token"),
                    .profile(name: "backup", file: home.file(".aws/credentials"))))
    }

    @Test func theDefaultProfileAndAWSProfileAndTheConfigFile() {
        #expect(
            resolve()
                == .found(
                    S3Credentials(accessKeyID: "AKIADEFAULT", secretAccessKey: "default-secret"),
                    .profile(name: "default", file: home.file(".aws/credentials"))))
        #expect(
            resolve(environment: ["AWS_PROFILE": "from-config"])
                == .found(
                    S3Credentials(accessKeyID: "AKIACONFIG", secretAccessKey: "config-secret"),
                    .profile(name: "from-config", file: home.file(".aws/config"))))
        let moved = home.file("elsewhere")
        try? FileManager.default.moveItem(atPath: home.file(".aws/credentials"), toPath: moved)
        #expect(
            resolve(environment: ["AWS_SHARED_CREDENTIALS_FILE": moved, "AWS_PROFILE": "backup"])
                == .found(
                    S3Credentials(
                        accessKeyID: "AKIABACKUP", secretAccessKey: "backup-secret", sessionToken: "backup-token"),
                    .profile(name: "backup", file: moved)))
    }

    @Test func whatIsMissingIsSaidWithoutASecret() {
        guard case .missing(let unknown) = resolve(fields: (nil, nil, "nope")) else {
            Issue.record("an unknown profile resolved")
            return
        }
        #expect(unknown.contains("profile nope is in neither"))
        guard case .missing(let sso) = resolve(fields: (nil, nil, "sso")) else {
            Issue.record("an SSO profile resolved")
            return
        }
        #expect(sso.contains("sso_session") && sso.contains("aws configure export-credentials"))
        guard case .missing(let half) = resolve(fields: ("AKIAFIELD", nil, nil)) else {
            Issue.record("a key id without a secret resolved")
            return
        }
        #expect(half.contains("only one of accessKeyId and secretAccessKey"))
        guard
            case .missing(let none) = S3CredentialResolver(environment: ["HOME": home.file("empty-home")]).resolve()
        else {
            Issue.record("an empty home resolved")
            return
        }
        #expect(none.contains("no AWS access key found") && none.contains("AWS_ACCESS_KEY_ID"))
    }
}

@Suite struct S3CredentialFileTests {
    @Test func aCredentialsFileThatIsAFIFOIsPassedOverWithoutWaitingForAWriter() async throws {
        let home = try TemporaryDirectory()
        #expect(mkfifo(home.file("credentials"), 0o600) == 0)
        let done = DispatchSemaphore(value: 0)
        let environment = ["HOME": home.path, "AWS_SHARED_CREDENTIALS_FILE": home.file("credentials")]
        Thread.detachNewThread {
            _ = S3CredentialResolver(environment: environment).resolve()
            done.signal()
        }
        let resolved = await offPool { done.wait(timeout: .now() + .seconds(10)) == .success }
        #expect(resolved, "resolving blocked on the FIFO")
    }
}

@Suite struct S3FactoryTests {
    func configure(_ values: [String: ProviderFieldValue], environment: [String: String] = [:])
        throws(ProviderConfigurationError) -> S3ProviderFactory.Configuration
    {
        try S3ProviderFactory(environment: environment).configuration(from: ProviderFieldValues(values))
    }

    @Test func defaultsToAWSVirtualHostedAndToPathStyleWithAnEndpoint() throws {
        let aws = try configure(["bucket": .text("my-backups"), "region": .text("eu-west-1")])
        #expect(aws.location.endpoint.absoluteString == "https://s3.eu-west-1.amazonaws.com")
        #expect(!aws.location.pathStyle)
        #expect(
            aws.location.url(objectKey: "a b").absoluteString == "https://my-backups.s3.eu-west-1.amazonaws.com/a%20b")
        let local = try configure(["bucket": .text("b"), "endpoint": .text("http://127.0.0.1:9000/")])
        #expect(local.location.pathStyle && local.location.region == "us-east-1")
        #expect(local.location.url(objectKey: "p/k").absoluteString == "http://127.0.0.1:9000/b/p/k")
        #expect(local.timeoutMs == 30_000 && local.maxConcurrency == 16)
    }

    @Test func badFieldsAreRefusedNamingTheField() {
        #expect(
            throws: ProviderConfigurationError(
                field: "region", "region `auto` (Cloudflare R2) needs the account's `endpoint`")
        ) {
            try configure(["bucket": .text("b"), "region": .text("auto")])
        }
        #expect { try configure(["bucket": .text("b"), "endpoint": .text("ftp://x")]) } throws: {
            ($0 as? ProviderConfigurationError)?.field == "endpoint"
        }
        #expect { try configure(["bucket": .text("Has_Upper")]) } throws: {
            ($0 as? ProviderConfigurationError)?.message.contains("pathStyle: true") == true
        }
    }

    @Test func planDetailsNameTheCredentialSourceButNeverTheSecret() throws {
        let factory = S3ProviderFactory(environment: [
            "AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": "env-secret-value", "HOME": "/nonexistent",
        ])
        let configuration = try factory.configuration(
            from: ProviderFieldValues(["bucket": .text("b"), "endpoint": .text("http://127.0.0.1:9000")]))
        let details = factory.planDetails(of: configuration)
        #expect(
            details["credentials"]
                == "access key AKIAENV from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)")
        #expect(details["objects"] == "http://127.0.0.1:9000/b/ (path style, signed for us-east-1)")
        #expect(!details.values.joined().contains("env-secret-value"))
    }

    @Test func makingWithoutCredentialsIsNotSignedInSayingWhereItLooked() throws {
        let factory = S3ProviderFactory(environment: ["HOME": "/nonexistent"])
        let configuration = try factory.configuration(from: ProviderFieldValues(["bucket": .text("my-bucket")]))
        #expect {
            _ = try factory.make(configuration, context: ProviderContext(providerID: "bucket"))
        } throws: { error in
            let error = error as? CloudSyncError
            return error?.code == .notSignedIn && error?.provider == "bucket"
                && error?.message.contains("/nonexistent/.aws/credentials") == true
        }
    }
}
