#!/usr/bin/env bash
# infer run --spec-ngram: the same tokens as without it on every fixture
# family (greedy, and sampled with one seed), its counts on stderr; the
# default model's text the same byte for byte (where it is in the cache);
# bad flags refused in one clear line.
# usage: cli_spec.sh INFER_BIN FIXTURES_DIR
bin=$1
fx=$2
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ids=1,2,3,4,5,6,7,1,2,3,4,5,6,7,1,2,3

expect_error() { # label, substring, command...
    local label=$1 want=$2
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$? lines
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" != 1 ] || [ "$lines" != 1 ] || ! grep -q -- "$want" "$tmp/err"; then
        echo "FAILED: $label: exit $rc, $lines stderr lines, want \"$want\":"
        cat "$tmp/err"
        fail=$((fail + 1))
    fi
}

for d in "$fx"/*/; do
    [ -f "$d/reference.json" ] || continue
    fam=$(basename "$d")
    for s in "--temp 0" "--temp 0.8 -s 7"; do
        # shellcheck disable=SC2086
        want=$("$bin" run -m "$d" --ids $ids -n 40 --ignore-eos $s 2>/dev/null)
        # shellcheck disable=SC2086
        got=$("$bin" run -m "$d" --ids $ids -n 40 --ignore-eos $s --spec-ngram 5 2>"$tmp/err")
        if [ -z "$want" ] || [ "$got" != "$want" ] || ! grep -q "speculation (n-gram, K 5):" "$tmp/err"; then
            echo "FAILED: $fam ($s): with --spec-ngram 5: $got, without: $want"
            cat "$tmp/err"
            fail=$((fail + 1))
        fi
    done
done
echo "cli_spec: every fixture family writes the same tokens with and without --spec-ngram"

m=$fx/qwen3
expect_error "K zero" "draft length of 1 to 32" "$bin" run -m "$m" --ids 1 --spec-ngram=0
expect_error "K too large" "draft length of 1 to 32 tokens, not \"33\"" "$bin" run -m "$m" --ids 1 --spec-ngram 33
expect_error "K not a number" "not \"x\"" "$bin" run -m "$m" --ids 1 --draft-ngram=x
expect_error "with a grammar" "does not go with a grammar" "$bin" run -m "$m" --ids 1 --spec-ngram --json
expect_error "with a graph" "does not go with --graph" "$bin" run -m "$m" --ids 1 --spec-ngram --graph dense
expect_error "bench -f alone" "-f is --spec-ngram's text" "$bin" bench -m "$m" -f "$tmp/none"
expect_error "bench with --batch" "not with --batch" "$bin" bench -m "$m" --spec-ngram --batch 1,2
expect_error "bench text missing" "cannot read" "$bin" bench -m "$m" --spec-ngram -f "$tmp/none"

# the default model, where the cache has it: its text the same, and bench's check holds
model=${INFER_CACHE:-$HOME/.cache/infer}/gemma3/gemma-3-270m-q4_k_m.gguf
if [ -f "$model" ]; then
    p="Repeat exactly: the quick brown fox jumps over the lazy dog; the quick brown fox jumps over the lazy dog."
    want=$("$bin" run -m "$model" -p "$p" -n 48 -t 2 --temp 0 2>/dev/null)
    got=$("$bin" run -m "$model" -p "$p" -n 48 -t 2 --temp 0 --spec-ngram 2>/dev/null)
    [ -n "$want" ] && [ "$got" == "$want" ] || { echo "FAILED: default model: the text differs with --spec-ngram"; fail=$((fail + 1)); }
    "$bin" bench -m "$model" -t 2 -n 32 -r 1 --spec-ngram >"$tmp/out" 2>"$tmp/err" && grep -q "spec-ngram K8" "$tmp/out" ||
        { echo "FAILED: bench --spec-ngram:"; cat "$tmp/err"; fail=$((fail + 1)); }
else
    echo "cli_spec: the default model is not in the cache: its checks skipped"
fi
[ "$fail" = 0 ] && echo "cli_spec: ok"
exit $((fail > 0))
