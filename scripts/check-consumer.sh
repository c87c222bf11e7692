#!/usr/bin/env bash
# Uses CloudSync the way another package does: Tests/ConsumerPackage depends on this one by path and reaches it only
# through its library products, so a missing product, a missing target dependency or a `package` symbol in a public
# example fails here. Its main.swift holds README.md's Swift examples verbatim (checked first), with the glue they
# assume; it is built into its own scratch directory under .build (kept between runs, so only the first build pays
# for compiling the libraries again), run, and what it prints compared with what the examples must do.
# With --build-only it only builds (`make test` builds it beside the stress phase, then runs this again).
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
main=Tests/ConsumerPackage/Sources/consumer/main.swift

python3 - "$main" <<'PY'
import re, sys
readme = open("README.md", encoding="utf-8").read()
main = open(sys.argv[1], encoding="utf-8").read()
blocks = re.findall(r"```swift\n(.*?)```", readme, re.S)
missing = [b.splitlines()[0] for b in blocks if "// README example:" not in main or b not in main]
if not blocks or missing:
    sys.exit(f"check-consumer: README.md's Swift examples starting {missing} are not in {sys.argv[1]} verbatim")
print(f"check-consumer: the {len(blocks)} Swift examples of README.md are in {sys.argv[1]} verbatim", file=sys.stderr)
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
["primary", "backup"] ["1-sync", "check"] mirror
types: ["memory", "sqlite", "directory", "s3", "cloudKit", "googleDrive", "icloudKV", "notes"]
ok ["ok", "ok"]
after close: closed, primary files: ["primary.db"]'
if [ "$actual" != "$expected" ]; then
    echo "check-consumer: the consumer printed something else:" >&2
    diff <(echo "$expected") <(echo "$actual") >&2 || true
    exit 1
fi
echo "check-consumer: the consumer package built and ran as the README says" >&2
