#!/usr/bin/env bash
# `make check-install` (part of `make test`): installs into a temporary DESTDIR and checks that the result stands
# alone -- the files are where README.md says, the binary needs no Swift toolchain library (scripts/check-libraries.sh),
# it runs from outside the repository with a bare environment (--version, version, validate, the demo end to end),
# the systemd units pass `systemd-analyze verify` (when systemd-analyze is installed), and `make uninstall` removes
# everything it installed.
set -euo pipefail
cd "$(dirname "$0")/.."
repository=$PWD
SWIFT=${SWIFT:-swift}
prefix=/usr/local
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
destdir=$scratch/root
fail() {
    echo "check-install: error: $*" >&2
    exit 1
}

if ! make --no-print-directory install DESTDIR="$destdir" PREFIX="$prefix" SWIFT="$SWIFT" >"$scratch/install.log" 2>&1; then
    cat "$scratch/install.log" >&2
    fail "make install DESTDIR=$destdir failed"
fi
grep -h "complete!" "$scratch/install.log" | sed 's/^/check-install: release build: /' >&2 || true
installed=$destdir$prefix
binary=$installed/bin/cloudsync
docdir=$installed/share/doc/cloudsync
for file in bin/cloudsync share/man/man1/cloudsync.1 share/man/man1/cloudsync-run.1 share/man/man5/cloudsync-pipeline.5 \
    share/doc/cloudsync/README.md share/doc/cloudsync/LICENSE \
    share/doc/cloudsync/cloudsync-help.txt share/doc/cloudsync/docs/ARCHITECTURE.md \
    share/doc/cloudsync/schemas/pipeline.schema.json share/doc/cloudsync/schemas/report.schema.json \
    share/doc/cloudsync/systemd/cloudsync@.service share/doc/cloudsync/systemd/cloudsync@.timer \
    share/doc/cloudsync/systemd/cloudsync-failure@.service share/doc/cloudsync/systemd/nightly.yaml; do
    [ -f "$installed/$file" ] || fail "make install did not install $prefix/$file"
done
[ -x "$binary" ] || fail "$prefix/bin/cloudsync is not executable"
worker=$installed/libexec/cloudsync/cloudsync-jq
[ -x "$worker" ] || fail "make install did not install $prefix/libexec/cloudsync/cloudsync-jq, which runs jq programs"

scripts/check-libraries.sh "$binary"
scripts/check-libraries.sh "$worker"

# Standalone: from a directory outside the repository, with no Swift toolchain on PATH and no library path.
outside=$scratch/elsewhere
mkdir -p "$outside"
cp -R pipelines "$outside/pipelines"
rm -rf "$outside/pipelines/demo-output" "$outside/pipelines/.cloudsync"
bare() { (cd "$outside" && env -i HOME="$outside" PATH=/usr/bin:/bin LANG=C.UTF-8 "$@"); }
version=$(bare "$binary" --version) || fail "the installed cloudsync --version failed"
[[ $version =~ ^cloudsync\ [0-9] ]] || fail "the installed cloudsync --version printed '$version'"
# `cloudsync version` starts with the same line and names what make install built from: in a checkout of this
# directory, its HEAD (-dirty when tracked files differ) and that commit's date, as the Makefile hands them over.
report=$(bare "$binary" version) || fail "the installed cloudsync version failed"
[ "${report%%$'\n'*}" = "$version" ] || fail "cloudsync version's first line is not --version's: $report"
if [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$(pwd -P)" ]; then
    head=$(git rev-parse HEAD)
    grep -Eqx -- "- commit: $head(-dirty)?" <<<"$report" ||
        fail "the installed cloudsync version does not name commit $head: $report"
    grep -Eqx -- "- commitDate: [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z" <<<"$report" ||
        fail "the installed cloudsync version names no commit date: $report"
fi
bare "$binary" --help | cmp -s - "$docdir/cloudsync-help.txt" || fail "the installed --help text differs from the binary's"
bare "$binary" validate "$repository/pipelines/demo.yaml" "$docdir/systemd/nightly.yaml" >"$scratch/validate.log" 2>&1 ||
    { cat "$scratch/validate.log" >&2; fail "the installed cloudsync could not validate pipelines/demo.yaml"; }
bare "$binary" run --quiet "$outside/pipelines/demo.yaml" >"$scratch/run.log" 2>&1 ||
    { cat "$scratch/run.log" >&2; fail "the installed cloudsync could not run the demo"; }
ls "$outside"/pipelines/demo-output/reports/demo-*.json >/dev/null 2>&1 || fail "the demo run wrote no report"
# A jq transform: the installed binary finds its worker in libexec/cloudsync, and the worker needs no Swift library.
mkdir -p "$outside/reshape/from"
printf '{"theme":"dark"}' >"$outside/reshape/from/settings.theme"
cat >"$outside/reshape/reshape.yaml" <<'YAML'
version: 1
name: reshape
providers:
  from: { type: directory, path: from }
  to: { type: directory, path: to, create: true }
store: { providers: [from] }
jobs:
  - { name: reshape, type: migrate, from: from, to: to, transform: '{appearance: {theme: .theme}}' }
report: { path: report.json }
YAML
bare "$binary" run --quiet "$outside/reshape/reshape.yaml" >"$scratch/reshape.log" 2>&1 ||
    { cat "$scratch/reshape.log" >&2; fail "the installed cloudsync could not run a jq transform"; }
[ "$(cat "$outside/reshape/to/settings.theme")" = '{"appearance":{"theme":"dark"}}' ] ||
    fail "the installed cloudsync's jq transform wrote '$(cat "$outside/reshape/to/settings.theme")'"
echo "check-install: the installed $version ran from $outside: --version, version, --help, validate, the demo, a jq transform" >&2

# The units, as installed, pointing at the staged binary so systemd-analyze can check the ExecStart= path, and with
# the staged man page on MANPATH for Documentation=man:cloudsync(1). It exits 0 on warnings too: any output fails.
if command -v systemd-analyze >/dev/null 2>&1; then
    units=$scratch/units
    mkdir -p "$units"
    for unit in "$docdir"/systemd/*.service "$docdir"/systemd/*@.timer; do
        sed "s|$prefix/bin/cloudsync|$binary|g" "$unit" >"$units/${unit##*/}"
    done
    if ! report=$(cd "$units" && MANPATH=$installed/share/man systemd-analyze verify \
        "$units/cloudsync@nightly.service" "$units/cloudsync@nightly.timer" "$units/cloudsync-failure@nightly.service" \
        "$units/cloudsync-serve.service" 2>&1) ||
        [ -n "$report" ]; then
        echo "$report" >&2
        fail "systemd-analyze verify found problems in contrib/systemd"
    fi
    echo "check-install: systemd-analyze verify passed cloudsync@.service, cloudsync@.timer, cloudsync-failure@.service, cloudsync-serve.service" >&2
else
    echo "check-install: systemd-analyze not installed; the systemd units were not verified" >&2
fi

make --no-print-directory uninstall DESTDIR="$destdir" PREFIX="$prefix" >"$scratch/uninstall.log" 2>&1 ||
    { cat "$scratch/uninstall.log" >&2; fail "make uninstall failed"; }
left=$(find "$destdir" -type f)
[ -z "$left" ] || fail "make uninstall left files behind: $left"
echo "check-install: make install and make uninstall (DESTDIR, PREFIX=$prefix) check out" >&2
