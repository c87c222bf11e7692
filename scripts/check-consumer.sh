#!/usr/bin/env bash
# Uses CloudSync the way another package does: Tests/ConsumerPackage depends on this one by path and reaches it only
# through its library products, so a missing product, a missing target dependency or a `package` symbol in a public
# example fails here. Its main.swift holds the Swift examples of README.md and docs/ verbatim (checked first), with
# the glue they assume; it is built into its own scratch directory under .build (kept between runs, so only the first
# build pays for compiling the libraries again), run, and what it prints compared with what the examples must do.
# With --build-only it only builds (`make test` builds it beside the stress phase, then runs this again).
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
main=Tests/ConsumerPackage/Sources/consumer/main.swift

python3 - "$main" <<'PY'
import glob, re, sys
main = open(sys.argv[1], encoding="utf-8").read()
missing, count = [], 0
for page in ["README.md"] + sorted(glob.glob("docs/*.md")):
    for block in re.findall(r"```swift\n(.*?)```", open(page, encoding="utf-8").read(), re.S):
        count += 1
        if f"// Example from {page}:" not in main or block not in main:
            missing.append(f"{page}: {block.splitlines()[0]}")
if not count or missing:
    sys.exit(f"check-consumer: these Swift examples are not in {sys.argv[1]} verbatim: {missing}")
print(f"check-consumer: the {count} Swift examples of README.md and docs/ are in {sys.argv[1]} verbatim", file=sys.stderr)
PY

$SWIFT build --package-path Tests/ConsumerPackage --scratch-path .build/consumer
[ "${1:-}" = --build-only ] && exit 0
actual=$(.build/consumer/debug/consumer)
expected='get: {"theme":"dark"}
rekey: 0 re-encrypted, ["ERR_DECODE"] failed
verify: 1 checked, 0 ok
backup holds: an envelope
decoded: secret
queued: ["backup"], flush remaining: 1, pending: ["k"]
outbox file: ["backup"]
files: ["files"] 5 bytes, back: 5 meow!
["primary", "backup"] ["1-sync", "check"] mirror
types: ["memory", "sqlite", "directory", "s3", "cloudKit", "googleDrive", "icloudKV", "notes"]
ok ["ok", "ok"]
plan: ["count the keys of primary under \"settings.\""]
count: [2, 2], runs kept in memory: 2, state.db on disk: false
after close: closed, primary files: ["primary.db"]'
if [ "$actual" != "$expected" ]; then
    echo "check-consumer: the consumer printed something else:" >&2
    diff <(echo "$expected") <(echo "$actual") >&2 || true
    exit 1
fi
echo "check-consumer: the consumer package built and ran as the documentation says" >&2

# The pipeline language alone: a program that depends on the CloudSyncPipeline product only checks pipelines with a
# provider type and a job type of its own, and its binary holds no code of a provider, state store, job or runner
# module (Swift symbols carry their module's name) and loads no libpq, SQLite or libcurl.
language=.build/consumer/debug/pipeline-language
actual=$("$language")
expected='valid: notes ["inbox"] ["tally the keys of inbox"]
invalid: 4:10 provider `inbox` needs `folder`
invalid: 5:18 `type` in provider `cloud` must be one of notes; found "s3"
invalid: 5:22 unknown field `bucket` in provider `cloud`; expected one of: type, maxValueBytes, codec, account, folder
invalid: 8:30 unknown provider `outbox`; the file declares: inbox, cloud'
if [ "$actual" != "$expected" ]; then
    echo "check-consumer: the pipeline-language program printed something else:" >&2
    diff <(echo "$expected") <(echo "$actual") >&2 || true
    exit 1
fi
modules='11CloudSyncS3|14CloudSyncLocal|15CloudSyncSQLite|17CloudSyncPostgres|17CloudSyncCloudKit|14CloudSyncDrive'
modules+='|13CloudSyncHTTP|13CloudSyncJobs|15CloudSyncRunner|22CloudSyncPipelineState'
linked=$(nm "$language" | grep -oE "($modules)" | sort -u | tr '\n' ' ' || true)
libraries=$(ldd "$language" | grep -oE 'libpq|libsqlite3|libcurl' | sort -u | tr '\n' ' ' || true)
if [ -n "$linked$libraries" ]; then
    echo "check-consumer: a program on CloudSyncPipeline alone links more than the language: $linked$libraries" >&2
    exit 1
fi
echo "check-consumer: a program on CloudSyncPipeline alone checks pipelines and links no provider, SQLite or libpq" >&2
