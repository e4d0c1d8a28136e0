#!/usr/bin/env bash
# Runs every libFuzzer harness for SECONDS each (default 60), two at a time,
# on its seeds (corpus/KIND, the chat tests' templates for `template`) and
# regression inputs (regress/KIND); what it finds new goes to a scratch
# corpus, a crash to $OUT/crash-* (OUT default: a scratch folder).
#   usage: tests/fuzz/run.sh BUILD_DIR [SECONDS] [KIND ...]
# (BUILD_DIR: a build with CC=clang -DINFER_SANITIZE=ON -DINFER_FUZZ=ON)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$1
secs=${2:-60}
shift 2 2>/dev/null || shift $#
kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(gguf hf tokenizer template vindex request grammar)
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
declare -A dict=([gguf]=gguf [hf]=json [tokenizer]=json [template]=jinja [vindex]=json [request]=json [grammar]=gbnf)

run() {
    local kind=$1 bin=$build/tests/fuzz_$1 seeds=$here/corpus/$1
    [ "$kind" = template ] && seeds=$here/../data/chat/templates
    [ -x "$bin" ] || { echo "fuzz $kind: no $bin"; return 1; }
    local work=$OUT/$kind
    mkdir -p "$work/new"
    local inputs=("$seeds")
    [ -d "$here/regress/$kind" ] && inputs+=("$here/regress/$kind")
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
        /usr/bin/time -f "%U %S" -o "$work/cpu" "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1 \
        -dict="$here/dict/${dict[$kind]}.dict" -artifact_prefix="$work/" "$work/new" "${inputs[@]}" >"$work/log" 2>&1
    local rc=$?
    local execs cov
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log" | grep -o '[0-9]*$')
    cov=$(grep -o 'cov: [0-9]*' "$work/log" | tail -1)
    if [ $rc -ne 0 ]; then
        echo "fuzz $kind: FAILED (exit $rc) after ${execs:-?} runs, $cov; its log: $work/log"
        grep -E "ERROR|SUMMARY|runtime error|Test unit written|==[0-9]+==" "$work/log" | head -12
        return 1
    fi
    local cpu
    cpu=$(awk 'END{printf "%.0f", $1 + $2}' "$work/cpu" 2>/dev/null)
    echo "fuzz $kind: ok, ${execs:-?} runs in ${secs} s (${cpu:-?} s of CPU), $cov, $(ls "$work/new" | wc -l) new inputs"
}

fail=0
i=0
pids=()
for k in "${kinds[@]}"; do
    run "$k" &
    pids+=($!)
    i=$((i + 1))
    if [ $((i % 2)) = 0 ]; then
        for p in "${pids[@]}"; do wait "$p" || fail=$((fail + 1)); done
        pids=()
    fi
done
for p in "${pids[@]}"; do wait "$p" || fail=$((fail + 1)); done
echo "fuzz: ${#kinds[@]} fuzzers, $fail failed"
[ $fail = 0 ]
