#!/usr/bin/env bash
# `make fuzz`: runs libFuzzer on each entry point of CloudSyncFuzzing (yaml, pipeline, envelope, export, inflate, http) for FUZZ_SECONDS
# (default 600) each, starting from the kept corpus in Tests/Fuzz/<entry>/, the entry's seeds and, for the YAML and
# pipeline entries, the example and invalid pipelines. The corpus is then minimized into Tests/Fuzz/<entry>/ (commit
# it: the test suite replays it). A crash leaves its input in
# .build/fuzz/artifacts/<entry>/ and makes the command fail; add the input to the corpus with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-600}
targets=${FUZZ_TARGETS:-yaml pipeline envelope export inflate http}
fuzzer=.build/fuzz/debug/cloudsync-fuzz
[ -x "$fuzzer" ] || { echo "fuzz: $fuzzer is not built; run make fuzz" >&2; exit 1; }
export SWIFT_BACKTRACE=enable=no
crashed=()
for target in $targets; do
    corpus=Tests/Fuzz/$target
    work=.build/fuzz/work/$target
    seeds=.build/fuzz/seeds/$target
    artifacts=.build/fuzz/artifacts/$target
    mkdir -p "$corpus" "$work" "$seeds" "$artifacts"
    extra=()
    if [ "$target" = yaml ] || [ "$target" = pipeline ]; then extra=(pipelines Tests/Fixtures/invalid-pipelines); fi
    echo "fuzz: $target for ${seconds}s"
    status=0
    CLOUDSYNC_FUZZ_TARGET=$target CLOUDSYNC_FUZZ_SEEDS=$seeds nice "$fuzzer" -max_total_time="$seconds" \
        -timeout=30 -rss_limit_mb=2048 -max_len=8192 -artifact_prefix="$artifacts/" -print_final_stats=1 \
        "$work" "$corpus" "$seeds" "${extra[@]}" 2>"$artifacts/log.txt" || status=$?
    grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ *DONE)" "$artifacts/log.txt" || true
    if [ "$status" -ne 0 ]; then
        crashed+=("$target")
        grep -E "ERROR|Fatal error|==[0-9]+==" "$artifacts/log.txt" | head -5 >&2 || true
    fi
    # The kept corpus becomes the smallest set of inputs reaching all the code the old corpus and this run reached;
    # inputs named regression-* (each the input of a fixed crash) are always kept.
    merged=.build/fuzz/merged/$target
    rm -rf "$merged" && mkdir -p "$merged"
    if CLOUDSYNC_FUZZ_TARGET=$target "$fuzzer" -set_cover_merge=1 -max_len=8192 "$merged" "$corpus" "$work" "$seeds" \
        >/dev/null 2>"$artifacts/merge.txt"; then
        find "$corpus" -type f ! -name 'regression-*' -delete
        cp "$merged"/* "$corpus"/
    fi
    echo "fuzz: $target corpus: $(ls "$corpus" | wc -l) inputs"
done
if [ "${#crashed[@]}" -gt 0 ]; then
    echo "fuzz: crashes in ${crashed[*]}; inputs and logs in .build/fuzz/artifacts/" >&2
    exit 1
fi
