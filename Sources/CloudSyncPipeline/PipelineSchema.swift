import CloudSync
import CloudSyncBackup

/// The JSON Schema (2020-12) of pipeline files, printed by `cloudsync schema pipeline`; `schemas/pipeline.schema.json`
/// is this text for the built-in provider types, and a test keeps the two identical.
///
/// The provider definition is derived from the registered factories' field descriptions, so a new provider type
/// appears in the schema by being registered.
public enum PipelineSchema {
    /// The schema for pipelines whose providers come from `registry` and jobs from `jobTypes`.
    public static func json(registry: ProviderRegistry, jobTypes: JobRegistry) -> String {
        template.replacingOccurrences(of: "__PROVIDER__", with: providerDefinition(registry))
            .replacingOccurrences(of: "__JOB__", with: jobDefinition(jobTypes))
            .replacingOccurrences(of: "__MIGRATE_STEP__", with: migrateStepDefinition(jobTypes))
    }

    /// `$defs.migrateStep`: a migration's `migrate` step takes exactly the fields of a `migrate` job.
    static func migrateStepDefinition(_ jobTypes: JobRegistry) -> String {
        guard let migrate = jobTypes.type(named: "migrate") else { return "{ \"type\": \"object\" }" }
        let required = migrate.fields.filter(\.required).map { quoted($0.name) }.joined(separator: ", ")
        let properties = migrate.fields.map { "\(quoted($0.name)): \(jobFieldSchema($0))" }
        return "{ \"description\": \"Copy between providers, with a migrate job's fields.\", \"type\": \"object\", "
            + "\"additionalProperties\": false, \"required\": [\(required)], \"properties\": { "
            + properties.joined(separator: ", ") + " } }"
    }

    /// `$defs.job`: the fields every job has, then one branch per type listing exactly the fields it accepts.
    static func jobDefinition(_ jobTypes: JobRegistry) -> String {
        let types = jobTypes.types
        let typeDescription = types.map { "\($0.name) (\($0.summary))" }.joined(separator: "; ")
        let common = RegisteredJobType.commonFields
        var lines = [
            "{",
            "  \"description\": \"One job: `type`, the fields every job has, and the fields of that type.\",",
            "  \"type\": \"object\",",
            "  \"required\": [\"type\"],",
            "  \"properties\": {",
            "    \"type\": { \"description\": \(quoted(typeDescription + ".")), \"enum\": ["
                + types.map { quoted($0.name) }.joined(separator: ", ") + "] },",
            "    \"name\": { \"description\": \(quoted(sentence(common[0].summary))), \"type\": \"string\", "
                + "\"minLength\": 1 },",
            "    \"needs\": { \"description\": \(quoted(sentence(common[1].summary))), \"oneOf\": [{ \"type\": "
                + "\"string\" }, { \"type\": \"array\", \"uniqueItems\": true, \"items\": { \"type\": \"string\" } }] }",
            "  },",
            "  \"allOf\": [",
        ]
        lines += types.map { type in
            typeBranch(
                type.name,
                properties: ["\"name\": true", "\"needs\": true"]
                    + type.fields.map { "\(quoted($0.name)): \(jobFieldSchema($0))" },
                required: type.fields.filter(\.required).map(\.name))
        }.joinedAsItems()
        return indented(lines + ["  ]", "}"])
    }

    /// One `allOf` branch: when `type` is `name`, the object has exactly `type` and `properties` (each
    /// `"name": schema`), `required` among them.
    static func typeBranch(_ name: String, properties: [String], required: [String]) -> String {
        var then = "{ "
        if !required.isEmpty { then += "\"required\": [\(required.map(quoted).joined(separator: ", "))], " }
        then += "\"properties\": { \((["\"type\": true"] + properties).joined(separator: ", ")) }, "
        then += "\"additionalProperties\": false }"
        return "    { \"if\": { \"properties\": { \"type\": { \"const\": \(quoted(name)) } } }, \"then\": \(then) }"
    }

    /// A definition's lines, every line after the first indented to sit inside `$defs`.
    static func indented(_ lines: [String]) -> String {
        let indent = String(repeating: " ", count: 4)
        return lines.enumerated().map { $0.offset == 0 ? $0.element : indent + $0.element }.joined(separator: "\n")
    }

    static func jobFieldSchema(_ field: JobField) -> String {
        var description = sentence(field.summary, period: false)
        if field.kind == .path { description += "; relative to this file" }
        if let value = field.defaultValue { description += ". Default: \(value)" }
        description += "."
        var parts = ["\"description\": \(quoted(description))"]
        switch field.kind {
        case .provider, .providerOrStore, .providerOrAll, .codec: parts += ["\"type\": \"string\"", "\"minLength\": 1"]
        case .providers: parts += ["\"type\": \"array\"", "\"items\": { \"type\": \"string\" }"]
        case .keys:
            parts.append(
                "\"oneOf\": [{ \"type\": \"string\" }, { \"type\": \"array\", \"items\": { \"type\": \"string\" } }]")
        case .path, .text: parts += ["\"type\": \"string\"", "\"minLength\": 1"]
        case .words:
            parts.append(
                "\"oneOf\": [{ \"type\": \"string\" }, { \"type\": \"array\", \"items\": { \"type\": \"string\" } }]")
        case .boolean: parts.append(orInterpolated(["\"type\": \"boolean\""]))
        case .fraction: parts.append(orInterpolated(["\"type\": \"number\"", "\"minimum\": 0", "\"maximum\": 1"]))
        case .count(let range):
            parts.append(
                orInterpolated([
                    "\"type\": \"integer\"", "\"minimum\": \(range.lowerBound)", "\"maximum\": \(range.upperBound)",
                ]))
        case .choice(let options):
            parts.append(orInterpolated(["\"enum\": [" + options.map(quoted).joined(separator: ", ") + "]"]))
        case .keepPolicy:
            let counts = KeepPolicy.ruleNames.dropLast().map {
                "\"\($0)\": { \"type\": \"integer\", \"minimum\": 1 }"
            }
            let within = "\"within\": { \"type\": \"string\", \"pattern\": \"^([0-9]+[ymwdh])+$\" }"
            parts += [
                "\"type\": \"object\"", "\"minProperties\": 1",
                "\"properties\": { " + (counts + [within]).joined(separator: ", ") + " }",
                "\"additionalProperties\": false",
            ]
        case .rename:
            parts += [
                "\"type\": \"object\"", "\"required\": [\"from\", \"to\"]",
                "\"properties\": { \"from\": { \"type\": \"string\" }, \"to\": { \"type\": \"string\" } }",
                "\"additionalProperties\": false",
            ]
        case .jqProgram: parts += ["\"type\": \"string\"", "\"minLength\": 1"]
        case .deleteLimit:
            parts.append(
                "\"oneOf\": [{ \"type\": \"integer\", \"minimum\": 0 }, { \"type\": \"string\", \"pattern\": "
                    + "\"^(100|[0-9]{1,2}(\\\\.[0-9]+)?)%$\" }]")
        }
        return "{ " + parts.joined(separator: ", ") + " }"
    }

    /// `summary` as a sentence: capitalized, with a period unless `period` is false.
    static func sentence(_ summary: String, period: Bool = true) -> String {
        summary.prefix(1).uppercased() + summary.dropFirst() + (period ? "." : "")
    }

    /// `$defs.provider`: one branch per type, each listing exactly the fields that type accepts.
    static func providerDefinition(_ registry: ProviderRegistry) -> String {
        let types = registry.types
        let typeDescription = types.map { "\($0.name) (\($0.summary))" }.joined(separator: "; ")
        var lines = [
            "{",
            "  \"description\": \"One storage provider: `type` and the fields of that type.\",",
            "  \"type\": \"object\",",
            "  \"required\": [\"type\"],",
            "  \"properties\": { \"type\": { \"description\": \(quoted(typeDescription + ".")), \"enum\": ["
                + types.map { quoted($0.name) }.joined(separator: ", ") + "] } },",
            "  \"allOf\": [",
        ]
        lines += types.map { type in
            typeBranch(
                type.name,
                properties: (ProviderType.commonFields.filter { common in
                    !type.fields.contains { $0.name == common.name }
                } + type.fields).map { "\(quoted($0.name)): \(fieldSchema($0))" },
                required: type.fields.filter(\.required).map(\.name))
        }.joinedAsItems()
        return indented(lines + ["  ]", "}"])
    }

    /// A typed field's schema that also takes a `${env:…}` or `${file:…}` reference, as the loader does: it reads
    /// the reference's text as the type when it loads the file, which no schema can do.
    static func orInterpolated(_ typed: [String]) -> String {
        "\"anyOf\": [{ " + typed.joined(separator: ", ")
            + " }, { \"type\": \"string\", \"pattern\": \"\\\\$\\\\{(env|file):\" }]"
    }

    static func fieldSchema(_ field: ProviderField) -> String {
        var description = field.summary.prefix(1).uppercased() + field.summary.dropFirst()
        if field.kind == .path { description += "; relative to this file" }
        if let value = field.defaultValue { description += ". Default: \(value)" }
        if field.secret { description += ". A secret: give it with ${env:NAME} or ${file:path}" }
        description += "."
        var parts = ["\"description\": \(quoted(description))"]
        switch field.kind {
        case .text: parts.append("\"type\": \"string\"")
        case .path: parts += ["\"type\": \"string\"", "\"minLength\": 1"]
        case .integer(let minimum, _):
            parts.append(orInterpolated(["\"type\": \"integer\"", "\"minimum\": \(minimum)"]))
        case .boolean: parts.append(orInterpolated(["\"type\": \"boolean\""]))
        case .choice(let options):
            parts.append(orInterpolated(["\"enum\": [" + options.map(quoted).joined(separator: ", ") + "]"]))
        case .textMap: parts += ["\"type\": \"object\"", "\"additionalProperties\": { \"type\": \"string\" }"]
        }
        return "{ " + parts.joined(separator: ", ") + " }"
    }

    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    static let template = #"""
        {
          "$schema": "https://json-schema.org/draft/2020-12/schema",
          "$id": "https://cloudsync.invalid/schemas/pipeline.schema.json",
          "title": "CloudSync pipeline (version 1)",
          "description": "A cloudsync pipeline file: providers, codecs, the store over them, and the jobs `cloudsync run` runs in order.",
          "type": "object",
          "additionalProperties": false,
          "required": ["version", "name", "providers", "store"],
          "properties": {
            "version": { "description": "Format version. This cloudsync reads version 1.", "const": 1 },
            "name": { "description": "Names the state directory and the reports. ASCII letters, digits, '.', '_' and '-'.", "type": "string", "pattern": "^[A-Za-z0-9._-]+$" },
            "state": {
              "description": "Where the pipeline keeps its state (outbox, run history, snapshots, tokens, lock): a directory relative to this file (default: .cloudsync/<name> beside this file), or a PostgreSQL schema several runners share.",
              "oneOf": [
                { "type": "string", "minLength": 1 },
                {
                  "type": "object",
                  "additionalProperties": false,
                  "required": ["postgresql"],
                  "properties": {
                    "postgresql": { "description": "libpq URL of the server, such as \"${env:CLOUDSYNC_DATABASE_URL}\"; never write its password in the file.", "type": "string", "minLength": 1 },
                    "schema": { "description": "Schema the tables live in, created when missing. Default: cloudsync.", "type": "string", "pattern": "^[a-z_][a-z0-9_]{0,62}$" }
                  }
                }
              ]
            },
            "schedule": {
              "description": "When the pipeline is due: a five-field cron expression in a time zone, or a fixed interval. `plan` prints the next five slots.",
              "type": "object",
              "additionalProperties": false,
              "oneOf": [{ "required": ["cron"], "not": { "required": ["every"] } }, { "required": ["every"], "not": { "required": ["timezone"] } }],
              "properties": {
                "cron": { "description": "minute hour day-of-month month day-of-week, with lists, ranges, steps and names, or @hourly, @daily, @weekly, @monthly, @yearly.", "type": "string", "minLength": 1 },
                "timezone": { "description": "IANA time zone the cron expression's times are in, such as Europe/Paris. Default: UTC.", "type": "string", "minLength": 1 },
                "every": { "description": "A fixed interval of at least 1s, such as 30s, 5m or 1h30m; slots count from the Unix epoch.", "type": "string", "pattern": "^([0-9]+(ms|s|m|h|d))+$" },
                "jitter": { "description": "The most a run starts after its slot, chosen at random per slot, such as 5m. Default: none.", "type": "string", "pattern": "^([0-9]+(ms|s|m|h|d))+$" },
                "catchUp": { "description": "Run a slot missed while the service was down once when it starts. Default: false.", "type": "boolean" }
              }
            },
            "providers": {
              "description": "Provider id -> provider. Ids are what the rest of the file refers to.",
              "type": "object",
              "minProperties": 1,
              "propertyNames": { "pattern": "^[A-Za-z0-9._-]+$" },
              "additionalProperties": { "$ref": "#/$defs/provider" }
            },
            "codecs": {
              "description": "Codec id -> codec. A provider or the store names a codec to encrypt its values at rest.",
              "type": "object",
              "propertyNames": { "pattern": "^[A-Za-z0-9._-]+$", "not": { "const": "none" } },
              "additionalProperties": { "$ref": "#/$defs/codec" }
            },
            "store": { "$ref": "#/$defs/store" },
            "migrations": {
              "description": "Numbered migrations, applied once each in this order by `cloudsync run` before any job, and recorded in the pipeline's state with a checksum of their steps.",
              "type": "array",
              "items": {
                "type": "object",
                "additionalProperties": false,
                "required": ["id", "on", "steps"],
                "properties": {
                  "id": { "description": "Unique; recorded once applied. ASCII letters, digits, '.', '_' and '-', starting with a letter or digit.", "type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*$" },
                  "description": { "description": "What it does, for people; not part of its checksum.", "type": "string" },
                  "on": { "description": "The provider its rename and transform steps rewrite.", "type": "string", "minLength": 1 },
                  "before": {
                    "description": "What happens before its first step.",
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["backup"],
                    "properties": {
                      "backup": { "description": "A backup snapshot of `on` into the repository in provider `to`, sealed by `codec`, which `cloudsync migrations undo` restores from; every step must then write only `on`.", "type": "object", "additionalProperties": false, "required": ["to", "codec"], "properties": { "to": { "type": "string", "minLength": 1 }, "codec": { "type": "string", "minLength": 1 } } }
                    }
                  },
                  "steps": {
                    "description": "Applied in order, each planned whole and then applied.",
                    "type": "array",
                    "minItems": 1,
                    "items": {
                      "type": "object",
                      "minProperties": 1,
                      "maxProperties": 1,
                      "properties": {
                        "rename": { "description": "Rename the keys of `on` that `from` matches; a key whose new name holds another value fails unless `overwrite` is true.", "type": "object", "additionalProperties": false, "required": ["from", "to"], "properties": { "from": { "type": "string" }, "to": { "type": "string" }, "overwrite": { "type": "boolean" } } },
                        "transform": { "description": "Rewrite each selected value of `on` (JSON) with a jq program.", "type": "object", "additionalProperties": false, "required": ["jq"], "properties": { "keys": { "oneOf": [{ "type": "string" }, { "type": "array", "items": { "type": "string" } }] }, "jq": { "type": "string", "minLength": 1 } } },
                        "migrate": { "$ref": "#/$defs/migrateStep" }
                      },
                      "additionalProperties": false
                    }
                  }
                }
              }
            },
            "jobs": { "description": "Jobs, run in order by `cloudsync run`.", "type": "array", "items": { "$ref": "#/$defs/job" } },
            "report": {
              "description": "Where `cloudsync run` writes its JSON report, and what it keeps beside it.",
              "type": "object",
              "additionalProperties": false,
              "properties": {
                "path": { "description": "Report path, relative to this file; {name} and {startedAt} are filled in. Default: <state>/reports/{name}-{startedAt}.json.", "type": "string", "minLength": 1 },
                "latest": { "description": "A stable path the newest report is also written to, replaced atomically, relative to this file.", "type": "string", "minLength": 1 },
                "keep": { "description": "How many timestamped reports to keep; older ones are deleted after each run. Default: all.", "type": "integer", "minimum": 1 },
                "metrics": { "description": "A Prometheus textfile describing the last run (for node_exporter's textfile collector), relative to this file.", "type": "string", "minLength": 1 }
              }
            }
          },
          "$defs": {
            "bytes": { "type": "integer", "minimum": 1 },
            "provider": __PROVIDER__,
            "codec": {
              "description": "Encryption at rest with XChaCha20-Poly1305 envelopes.",
              "type": "object",
              "additionalProperties": false,
              "required": ["type", "keys"],
              "properties": {
                "type": { "description": "The cipher.", "const": "xchacha20poly1305" },
                "keys": { "description": "The key ring: the first key encrypts; every key decrypts values made with it.", "type": "array", "minItems": 1, "items": { "$ref": "#/$defs/key" } },
                "allowPlaintext": { "description": "Read values that are not envelopes as they are (to encrypt an existing store by migrating or re-keying it). Default false.", "type": "boolean" }
              }
            },
            "key": {
              "description": "One key: exactly one of file, env or passphrase.",
              "type": "object",
              "additionalProperties": false,
              "required": ["id"],
              "properties": {
                "id": { "description": "Key id, recorded in every envelope it makes.", "type": "string", "pattern": "^[A-Za-z0-9._-]{1,64}$" },
                "file": { "description": "A key file (one line of base64 holding 32 bytes, as `cloudsync keygen` writes), relative to this file.", "type": "string", "minLength": 1 },
                "env": { "description": "An environment variable holding the base64 key.", "type": "string", "minLength": 1 },
                "passphrase": {
                  "description": "A passphrase stretched with Argon2id; give exactly one of env or file.",
                  "type": "object",
                  "additionalProperties": false,
                  "properties": {
                    "env": { "description": "An environment variable holding the passphrase.", "type": "string", "minLength": 1 },
                    "file": { "description": "A file holding the passphrase (one trailing newline is ignored), relative to this file.", "type": "string", "minLength": 1 }
                  },
                  "oneOf": [{ "required": ["env"] }, { "required": ["file"] }]
                }
              },
              "oneOf": [{ "required": ["file"] }, { "required": ["env"] }, { "required": ["passphrase"] }]
            },
            "store": {
              "description": "The store over the providers.",
              "type": "object",
              "additionalProperties": false,
              "required": ["providers"],
              "properties": {
                "providers": { "description": "Provider ids in preference order.", "type": "array", "minItems": 1, "uniqueItems": true, "items": { "type": "string" } },
                "writeMode": { "description": "failover (default): a write goes to the first available provider that fits; mirror: to every one.", "enum": ["failover", "mirror"] },
                "tiering": {
                  "description": "auto (default: key-value stores take \#(Tiering.defaultKVMaxBytes) bytes, records \#(Tiering.defaultRecordMaxBytes)), off (always the preferred provider), or explicit thresholds.",
                  "oneOf": [
                    { "enum": ["auto", "off"] },
                    { "type": "object", "additionalProperties": false, "properties": { "kvMaxBytes": { "description": "Largest value for key-value stores, in bytes.", "$ref": "#/$defs/bytes" }, "recordMaxBytes": { "description": "Largest value for record stores, in bytes.", "$ref": "#/$defs/bytes" } } }
                  ]
                },
                "resolver": {
                  "description": "none (default: first value found), or how a read picks among every provider's copy.",
                  "oneOf": [
                    { "const": "none" },
                    { "type": "object", "additionalProperties": false, "required": ["type"], "properties": { "type": { "description": "none, timestamp (newest wins) or union (merge JSON arrays).", "enum": ["none", "timestamp", "union"] }, "field": { "description": "timestamp: the JSON field holding the time.", "type": "string" }, "id": { "description": "union: the field identifying array elements.", "type": "string" } }, "if": { "properties": { "type": { "const": "timestamp" } } }, "then": { "required": ["field"], "not": { "required": ["id"] } }, "else": { "not": { "required": ["field"] } } }
                  ]
                },
                "repairOnRead": { "description": "Write the resolved value back to providers that disagree. Default true.", "type": "boolean" },
                "validateKeys": { "description": "Check keys against the rules of every provider before any request. Default true.", "type": "boolean" },
                "timeoutMs": { "description": "Deadline of every provider call, in milliseconds. Default: the environment's CLOUDSYNC_TIMEOUT_MS (0 or none: no deadline), else \#(StoreOptions.defaultTimeout.milliseconds).", "type": "integer", "minimum": 1 },
                "codec": { "description": "A codec id applied to every provider without its own, or none (default).", "type": "string" },
                "outbox": {
                  "description": "The durable outbox for writes that failed for a reason that may pass.",
                  "type": "object",
                  "additionalProperties": false,
                  "properties": {
                    "enabled": { "description": "Default true.", "type": "boolean" },
                    "maxEntries": { "description": "Oldest entry is evicted beyond this. Default \#(Outbox.Limits.defaultMaxEntries).", "type": "integer", "minimum": 1 },
                    "maxAttempts": { "description": "Attempts before an entry is given up. Default \#(Outbox.Limits.defaultMaxAttempts) (about an hour of backoff).", "type": "integer", "minimum": 1 },
                    "maxAgeMs": { "description": "Age after which an entry is given up, in milliseconds. Default \#(Outbox.Limits.defaultMaxAge.milliseconds) (7 days).", "type": "integer", "minimum": 1 },
                    "autoFlush": {
                      "description": "How often `cloudsync serve` drains the outbox between runs: true for every 60s, false (default) for never, or { every: DURATION } of at least 1s.",
                      "oneOf": [
                        { "type": "boolean" },
                        { "type": "object", "additionalProperties": false, "required": ["every"], "properties": { "every": { "description": "Such as 60s or 5m.", "type": "string", "pattern": "^([0-9]+(ms|s|m|h|d))+$" } } }
                      ]
                    }
                  }
                }
              }
            },
            "job": __JOB__,
            "migrateStep": __MIGRATE_STEP__
          }
        }
        """#
}

extension Array where Element == String {
    /// The lines as items of a JSON array: a comma after each but the last.
    fileprivate func joinedAsItems() -> [String] {
        enumerated().map { $0.offset == count - 1 ? $0.element : $0.element + "," }
    }
}
