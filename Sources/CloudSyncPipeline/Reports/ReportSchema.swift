/// The JSON Schema (2020-12) of run reports, printed by `cloudsync schema report`; `schemas/report.schema.json` is
/// this text, and a test keeps the two identical.
public enum ReportSchema {
    /// The schema of reports of pipelines whose jobs come from `jobTypes`; for the built-in types it is
    /// `schemas/report.schema.json`, and a test keeps the two identical.
    ///
    /// Each job type's `counts` are closed: a report's job may hold only the counts its type declares.
    public static func json(jobTypes: JobRegistry) -> String {
        let types = jobTypes.types
        let indent = String(repeating: " ", count: 8)
        let branches = types.enumerated().map { index, type in
            let counts = type.counts.map {
                "\(quoted($0.name)): { \"description\": \(quoted(sentence($0.summary))), \"type\": \"integer\", \"minimum\": 0 }"
            }
            return indent
                + "  { \"if\": { \"properties\": { \"type\": { \"const\": \(quoted(type.name)) } } }, \"then\": "
                + "{ \"properties\": { \"counts\": { \"properties\": { \(counts.joined(separator: ", ")) }, "
                + "\"additionalProperties\": false } } } }" + (index == types.count - 1 ? "" : ",")
        }
        return template.replacingOccurrences(
            of: "__JOB_TYPES__", with: "[" + types.map { quoted($0.name) }.joined(separator: ", ") + "]"
        ).replacingOccurrences(of: "__JOB_COUNTS__", with: (["["] + branches + [indent + "]"]).joined(separator: "\n"))
    }

    private static func quoted(_ text: String) -> String { PipelineSchema.quoted(text) }
    private static func sentence(_ text: String) -> String { PipelineSchema.sentence(text) }

    static let template = #"""
        {
          "$schema": "https://json-schema.org/draft/2020-12/schema",
          "$id": "https://cloudsync.invalid/schemas/report.schema.json",
          "title": "CloudSync run report",
          "description": "What one `cloudsync run` did. Holds keys, ids, codes and counts, never values or secrets.",
          "type": "object",
          "additionalProperties": false,
          "required": ["pipeline", "runId", "status", "dryRun", "startedAt", "finishedAt", "durationMs", "jobs", "outbox", "providers"],
          "properties": {
            "pipeline": { "description": "The pipeline's name.", "type": "string" },
            "runId": { "description": "Unique per run.", "type": "string" },
            "status": { "description": "ok, failed (a job had failing keys or a quota warning under failOnWarning), error (a job could not run), queued (every job succeeded but writes wait in the outbox) or interrupted; the exit status follows it (0, 1, 2, 3, 130).", "enum": ["ok", "failed", "error", "queued", "interrupted"] },
            "dryRun": { "description": "True when nothing was written.", "type": "boolean" },
            "startedAt": { "description": "ISO-8601 UTC.", "type": "string", "format": "date-time" },
            "finishedAt": { "description": "ISO-8601 UTC.", "type": "string", "format": "date-time" },
            "durationMs": { "description": "Milliseconds.", "type": "integer", "minimum": 0 },
            "timeoutMs": { "description": "The store's deadline of each provider call in this run, in milliseconds; 0 for none. The file's store.timeoutMs, else the environment's CLOUDSYNC_TIMEOUT_MS, else 15000.", "type": "integer", "minimum": 0 },
            "jobs": {
              "description": "Jobs in the order they ran.",
              "type": "array",
              "items": {
                "type": "object",
                "additionalProperties": false,
                "required": ["name", "type", "status", "counts", "failures", "failuresOmitted"],
                "properties": {
                  "name": { "type": "string" },
                  "type": { "description": "The job type.", "enum": __JOB_TYPES__ },
                  "status": { "description": "ok, failed (some keys failed, something differed, a guard held deletions back, or a quota warning under failOnWarning), error (could not run: a provider it needs unavailable, a refused clear), interrupted (stopped after a batch by SIGINT or SIGTERM), skipped (not run: interrupted before it started, or a job it needs did not end ok; its error says which).", "enum": ["ok", "failed", "error", "interrupted", "skipped"] },
                  "counts": { "description": "What the job did: exactly the counts of its type (see the branches below); empty for a skipped job.", "type": "object", "additionalProperties": { "type": "integer", "minimum": 0 } },
                  "keyLists": { "description": "check: the first 100 keys of each kind of difference (differ, missingOnDestination, missingOnSource); mirror: the first 100 keys deleted; forget: the first 100 snapshots kept and removed (or, in a dry run, that would be), by id, oldest first. Names only, never values.", "type": "object", "additionalProperties": { "type": "array", "maxItems": 100, "items": { "type": "string" } } },
                  "failures": { "description": "The first 100 failing keys.", "type": "array", "items": { "$ref": "#/$defs/failure" } },
                  "failuresOmitted": { "description": "Failing keys beyond the first 100.", "type": "integer", "minimum": 0 },
                  "error": { "description": "Why the job could not run; for a sync that failed, also why it deleted nothing (ERR_TOO_MANY_DELETES).", "$ref": "#/$defs/failure" },
                  "quota": {
                    "description": "quota jobs: one entry per provider that can know.",
                    "type": "array",
                    "items": {
                      "type": "object",
                      "additionalProperties": false,
                      "required": ["provider", "warning"],
                      "properties": {
                        "provider": { "type": "string" },
                        "usedBytes": { "type": "integer", "minimum": 0 },
                        "totalBytes": { "description": "Absent means unlimited.", "type": "integer", "minimum": 0 },
                        "fraction": { "type": "number", "minimum": 0 },
                        "warning": { "type": "boolean" }
                      }
                    }
                  },
                  "file": { "description": "export/import: the file, as the pipeline names it.", "type": "string" },
                  "snapshot": { "description": "backup: the snapshot it wrote; restore: the snapshot it read, by id.", "type": "string", "pattern": "^[0-9a-f]{32}$" },
                  "shards": {
                    "description": "Jobs with `shards: N`: how the key ranges were shared between runners.",
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["count", "takenOver", "runners"],
                    "properties": {
                      "count": { "description": "Key ranges the job was split into.", "type": "integer", "minimum": 1 },
                      "takenOver": { "description": "Ranges a runner took over from one that stopped, resuming after its last recorded batch.", "type": "integer", "minimum": 0 },
                      "resumedRun": { "description": "The earlier run whose unfinished ranges this run finished.", "type": "string" },
                      "runners": {
                        "type": "array",
                        "items": {
                          "type": "object",
                          "additionalProperties": false,
                          "required": ["runner", "ranges", "counts"],
                          "properties": {
                            "runner": { "description": "host/pid.", "type": "string" },
                            "ranges": { "description": "Ranges it finished.", "type": "integer", "minimum": 0 },
                            "counts": { "description": "Its share of the job's counts.", "type": "object", "additionalProperties": { "type": "integer", "minimum": 0 } }
                          }
                        }
                      }
                    }
                  },
                  "sync": {
                    "description": "sync jobs: what the job compared against, what it could not see, and what it deleted or chose.",
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["firstRun", "deletes", "maxDeletes", "unlisted", "conflicts", "deletions", "deletionsOmitted"],
                    "properties": {
                      "firstRun": { "description": "No snapshot from an earlier run: the union of every provider's keys, nothing deleted.", "type": "boolean" },
                      "deletes": { "enum": ["propagate", "ignore"] },
                      "maxDeletes": { "description": "The job's limit: a count or a percentage.", "type": "string" },
                      "unlisted": { "description": "Providers that could not be listed: their keys were neither read nor deleted, their snapshot rows kept.", "type": "array", "items": { "$ref": "#/$defs/failure" } },
                      "conflicts": {
                        "description": "The first 100 keys edited on one provider and deleted or edited on another since the last sync.",
                        "type": "array",
                        "items": {
                          "type": "object",
                          "additionalProperties": false,
                          "required": ["key", "kind", "editedOn", "deletedOn"],
                          "properties": {
                            "key": { "type": "string" },
                            "kind": { "description": "editedAndDeleted: the edit won and the key came back; editedOnSeveral: the resolver (or the preference order) chose.", "enum": ["editedAndDeleted", "editedOnSeveral"] },
                            "editedOn": { "type": "array", "items": { "type": "string" } },
                            "deletedOn": { "type": "array", "items": { "type": "string" } }
                          }
                        }
                      },
                      "deletions": { "description": "The first 100 keys deleted everywhere (or that would be, in a dry run or past maxDeletes).", "type": "array", "items": { "type": "string" } },
                      "deletionsOmitted": { "description": "Deleted keys beyond the first 100.", "type": "integer", "minimum": 0 },
                      "mode": { "description": "What the run compared: incremental (only the keys every provider's change feed named since the last clean run) or full (some provider's whole listing against the snapshot; fullBecause says why).", "enum": ["incremental", "full"] },
                      "modes": { "description": "Per provider, `incremental` (keys from its change feed) or `full` (its whole listing).", "type": "object", "additionalProperties": { "enum": ["incremental", "full"] } },
                      "fullBecause": { "description": "Why a provider was compared in full: the job sets incremental: false (or is split into shards), it offers no change feed, no earlier clean run left a cursor, its cursor was refused.", "type": "object", "additionalProperties": { "type": "string" } }
                    }
                  }
                },
                "allOf": __JOB_COUNTS__
              }
            },
            "outbox": {
              "description": "The outbox, flushed before the first job.",
              "type": "object",
              "additionalProperties": false,
              "required": ["pendingBefore", "drained", "dropped", "pendingAfter"],
              "properties": {
                "pendingBefore": { "type": "integer", "minimum": 0 },
                "drained": { "type": "integer", "minimum": 0 },
                "dropped": { "description": "Entries given up, by reason.", "type": "object", "propertyNames": { "enum": ["notRetryable", "tooManyAttempts", "expired", "queueFull", "accountChanged", "discarded"] }, "additionalProperties": { "type": "integer", "minimum": 0 } },
                "pendingAfter": { "type": "integer", "minimum": 0 },
                "drainedBy": { "description": "With the state in PostgreSQL: entries each runner of the run delivered in the drain, by runner (host/pid); they sum to drained.", "type": "object", "additionalProperties": { "type": "integer", "minimum": 0 } },
                "pendingByProvider": { "description": "The entries still waiting when the run ended, by the provider they wait for; they sum to pendingAfter.", "type": "object", "additionalProperties": { "type": "integer", "minimum": 1 } }
              }
            },
            "error": { "description": "Why the run could not start at all (state directory, outbox or state database); every job is then skipped.", "$ref": "#/$defs/failure" },
            "providers": {
              "description": "Every provider the pipeline declares.",
              "type": "array",
              "items": {
                "type": "object",
                "additionalProperties": false,
                "required": ["id", "type", "available", "requests", "bytesRead", "bytesWritten", "retries", "throttled"],
                "properties": {
                  "id": { "type": "string" },
                  "type": { "type": "string" },
                  "available": { "description": "Whether it could serve requests when the run ended.", "type": "boolean" },
                  "unavailable": {
                    "description": "Why it could not, when it could not.",
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["reason", "message"],
                    "properties": {
                      "reason": { "enum": ["signedOut", "offline", "misconfigured", "unsupportedPlatform", "timedOut", "closed", "other"] },
                      "message": { "type": "string" }
                    }
                  },
                  "requests": { "description": "Requests the provider made, counted where they happen (one HTTP request or local call counts once).", "type": "integer", "minimum": 0 },
                  "bytesRead": { "type": "integer", "minimum": 0 },
                  "bytesWritten": { "type": "integer", "minimum": 0 },
                  "retries": { "description": "Requests sent again after a failure that may pass.", "type": "integer", "minimum": 0 },
                  "throttled": { "description": "Answers that asked for fewer requests.", "type": "integer", "minimum": 0 },
                  "duplicates": { "description": "Surplus copies of keys the provider found (Drive files sharing a key's name); absent when none.", "type": "integer", "minimum": 1 },
                  "httpRequests": {
                    "description": "HTTP requests by method and outcome: 'GET 2xx', 'PUT 5xx', 'POST failed' (no answer). Absent for providers that make none.",
                    "type": "object",
                    "propertyNames": { "pattern": "^[A-Z]+ ([1-5]xx|failed)$" },
                    "additionalProperties": { "type": "integer", "minimum": 1 }
                  },
                  "waitMs": { "description": "Milliseconds its HTTP requests waited for a concurrency slot or in backoff before a retry; absent for providers that make no HTTP requests.", "type": "integer", "minimum": 0 },
                  "outboxHeld": {
                    "description": "Queued writes not sent because the run could not check who is signed in to an account an earlier run recorded; they stay queued for a run that can. Absent when none were held.",
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["entries", "code", "message"],
                    "properties": {
                      "entries": { "type": "integer", "minimum": 1 },
                      "code": { "description": "The code the account check failed with.", "type": "string", "pattern": "^ERR_[A-Z_]+$" },
                      "message": { "type": "string" }
                    }
                  }
                }
              }
            }
          },
          "$defs": {
            "failure": {
              "type": "object",
              "additionalProperties": false,
              "required": ["key", "code", "message"],
              "properties": {
                "key": { "description": "The key, or empty for a whole-job error.", "type": "string" },
                "provider": { "type": "string" },
                "code": { "description": "A stable error code such as ERR_OFFLINE.", "type": "string", "pattern": "^ERR_[A-Z_]+$" },
                "message": { "type": "string" },
                "serviceCode": { "description": "The service's own code for the failure (S3's SlowDown, Drive's storageQuotaExceeded, CloudKit's QUOTA_EXCEEDED), when a service answered.", "type": "string" },
                "httpStatus": { "description": "The HTTP status of the service's answer, when there was one.", "type": "integer", "minimum": 100, "maximum": 599 }
              }
            }
          }
        }
        """#
}
