#!/usr/bin/env bash
# Bad command lines get one clear line on stderr and exit status 1, never a crash.
# usage: cli_errors.sh INFER_BIN FIXTURES_DIR
bin=$1
fx=$2
fail=0
n=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

expect_error() { # label, substring, command...
    local label=$1 want=$2
    shift 2
    n=$((n + 1))
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    local lines
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" != 1 ] || [ "$lines" != 1 ] || ! grep -q -- "$want" "$tmp/err"; then
        echo "FAILED: $label: exit $rc, $lines stderr lines, want \"$want\":"
        cat "$tmp/err"
        fail=$((fail + 1))
    fi
}

m=$fx/qwen3
expect_error "unknown command" "unknown command" "$bin" frobnicate
expect_error "no ids" "no token ids given" "$bin" logits --out "$tmp/x"
expect_error "flag without value" "needs a value" "$bin" logits -m
expect_error "unknown option" "unknown option" "$bin" run -m "$m" --ids 1 --bogus
expect_error "ids not numbers" "expected a token id" "$bin" logits -m "$m" --ids 1,x,3 --out "$tmp/x"
expect_error "ids trailing comma" "expected a token id" "$bin" logits -m "$m" --ids 1,2, --out "$tmp/x"
expect_error "id too large for int" "too large" "$bin" logits -m "$m" --ids 99999999999 --out "$tmp/x"
expect_error "unknown numa strategy" "numa strategy \"spread\": expected distribute, isolate, numactl or none" "$bin" run -m "$m" --ids 1 -n 1 --numa spread
expect_error "unknown backend" "unknown backend \"gpu9\"" "$bin" logits -m "$m" --ids 1,2 --out "$tmp/x" --backend gpu9
expect_error "id outside the vocabulary" "outside the vocabulary" "$bin" logits -m "$m" --ids 1,512 --out "$tmp/x"
expect_error "missing model dir" "no such file" "$bin" info -m "$tmp/none"
expect_error "bad -n" "not an integer" "$bin" run -m "$m" --ids 1 -n -3
expect_error "prompt longer than the context" "exceed the context (4)" "$bin" run -m "$m" --ids 1,2,3,4,5,6 -n 1 -c 4
expect_error "-n beyond the context" "prompt (2 tokens) + 100 new tokens exceed the context (16)" "$bin" run -m "$m" --ids 1,2 -n 100 -c 16
expect_error "id outside the vocabulary in run" "outside the vocabulary" "$bin" run -m "$m" --ids 1,100000 -n 1
expect_error "unwritable output" "cannot open for writing" "$bin" logits -m "$m" --ids 1 --out "$tmp/no/such/dir/x"
expect_error "prompt beyond learned positions" "learned positions" "$bin" run -m "$fx/gpt2" --ids 1 -n 300
expect_error "bench-knn hidden not a multiple of 32" "multiple of 32" "$bin" bench-knn --hidden 100
expect_error "bench-knn k above features" "more than the" "$bin" bench-knn --features 64 --hidden 64 -k 65
expect_error "bench-knn zero runs" "at least 1" "$bin" bench-knn -r 0
expect_error "predict top 0" "at least 1" "$bin" predict -m "$m" --ids 1 --top 0
expect_error "predict walk-only without vindex" "needs a vindex" "$bin" predict -m "$m" --ids 1 --walk-only
expect_error "predict lm-head-topk without vindex" "needs a vindex" "$bin" predict -m "$m" --ids 1 --lm-head-topk 5
expect_error "predict bad graph" "unknown strategy" "$bin" predict -m "$m" --ids 1 --graph fast
expect_error "predict walk graph without vindex" "need a vindex" "$bin" predict -m "$m" --ids 1 --graph walk@5
expect_error "predict auto without vindex" "needs a vindex" "$bin" predict -m "$m" --ids 1 --graph auto:0.01
expect_error "predict auto budget 0" "KL budget" "$bin" predict -m "$m" --ids 1 --graph auto:0
expect_error "predict auto budget text" "KL budget" "$bin" predict -m "$m" --ids 1 --graph autoc:low
expect_error "run calib without auto" "for --graph auto" "$bin" run -m "$m" --ids 1 --calib "$tmp/none.txt"
expect_error "bench-walk graph and ks" "not both" "$bin" bench-walk -m "$m" -x "$tmp" --graph dense --ks 5
expect_error "calib tokens 1" "at least 2" "$bin" predict -m "$m" --ids 1 --graph auto:0.1 --calib-tokens 1
expect_error "sparsity 0" "at least 1" "$bin" bench-walk -m "$m" -x "$tmp" --sparsity 0
expect_error "sparsity with a graph" "not with" "$bin" bench-walk -m "$m" -x "$tmp" --sparsity 4 --graph dense
expect_error "walk without vindex" "no vindex given" "$bin" walk -m "$m" -p hi
expect_error "bench-walk without vindex" "no vindex given" "$bin" bench-walk -m "$m"
expect_error "bench-walk bad ks" "percentages" "$bin" bench-walk -m "$m" -x "$tmp" --ks 0,5
expect_error "vindex attach missing" "no such file\|cannot open" "$bin" predict -m "$m" -x "$tmp/none" --ids 1
expect_error "long option given a value" "takes no value" "$bin" run -m "$m" --ids 1 --ignore-eos=1
expect_error "unknown short option" "unknown option \"-z\"" "$bin" run -m "$m" --ids 1 -z
expect_error "stray argument" "unexpected argument \"extra\"" "$bin" run -m "$m" --ids 1 extra
expect_error "sampling flag without value" "--temp needs a value" "$bin" run -m "$m" --ids 1 --temp
expect_error "bad sampling value" "not a number" "$bin" chat -m "$m" --top-p 2
expect_error "chat context of 0" "at least 1" "$bin" chat -m "$m" -c 0
expect_error "serve on an unknown device" "--device must be cpu or cuda" "$bin" serve -m "$m" --device gpu
expect_error "serve on a host name" "is not an IPv4 address" "$bin" serve -m "$m" --host localhost
expect_error "serve with no slots" "--parallel must be at least 1" "$bin" serve -m "$m" --parallel 0
expect_error "serve on a bad port" "--port" "$bin" serve -m "$m" --port 70000
expect_error "bench-components no tokens" "at least 1" "$bin" bench-components -p 0
expect_error "-ngl not a count" "-ngl" "$bin" run -m "$m" --ids 1 -ngl x
expect_error "-ngl below -1" "-ngl" "$bin" logits -m "$m" --ids 1 --out "$tmp/x" --n-gpu-layers -2
expect_error "-ngl without a value" "needs a value" "$bin" bench -m "$m" -ngl
expect_error "--greedy without --batch" "applies to --batch" "$bin" bench -m "$m" --greedy
expect_error "-ngl where it means nothing" "unknown option" "$bin" tokenize -m "$m" -ngl 3 -p hi
# -ctk / -ctv: the KV cache's types by name
expect_error "-ctk unknown type" "\"q4_0\" for K" "$bin" run -m "$m" --ids 1 -n 1 -ctk q4_0
expect_error "-ctv unknown type" "\"bf16\" for V" "$bin" logits -m "$m" --ids 1 --out "$tmp/x" --cache-type-v bf16
expect_error "-ctk q8_0 with heads of 16" "blocks of 32" "$bin" bench -m "$m" -p 4 -n 4 -r 1 -ctk q8_0
expect_error "-ctv without a value" "needs a value" "$bin" info -m "$m" -ctv

# -h and --help: every subcommand prints its usage to stdout and exits 0
for cmd in info logits run chat serve bench bench-components bench-knn bench-walk convert quantize extract verify tokenize predict walk synth bench-lm; do
    for h in -h --help; do
        n=$((n + 1))
        "$bin" "$cmd" $h >"$tmp/out" 2>"$tmp/err"
        rc=$?
        if [ "$rc" != 0 ] || [ -s "$tmp/err" ] || ! head -1 "$tmp/out" | grep -q "^usage: infer $cmd "; then
            echo "FAILED: $cmd $h: exit $rc, stdout:"
            cat "$tmp/out" "$tmp/err"
            fail=$((fail + 1))
        fi
    done
done

# and the good paths work
n=$((n + 1))
if ! "$bin" logits -m "$m" --ids 1,2,3 --out "$tmp/ok.f32" 2>"$tmp/err" || [ "$(stat -c %s "$tmp/ok.f32")" != $((3 * 512 * 4)) ]; then
    echo "FAILED: logits on a good model"; cat "$tmp/err"; fail=$((fail + 1))
fi
n=$((n + 1))
if ! "$bin" info -m "$m" | grep -q "parameters"; then echo "FAILED: info"; fail=$((fail + 1)); fi
# -ngl on the CPU: said, and nothing changes
n=$((n + 1))
want=$("$bin" run -m "$m" --device cpu --ids 1,2,3 -n 4 --temp 0 2>/dev/null)
got=$("$bin" run -m "$m" --device cpu --ids 1,2,3 -n 4 --temp 0 -ngl 1 2>"$tmp/err")
if [ -z "$want" ] || [ "$got" != "$want" ] || ! grep -q -- "-ngl 1: the model runs on the cpu" "$tmp/err"; then
    echo "FAILED: -ngl on the CPU: \"$got\" against \"$want\""; cat "$tmp/err"; fail=$((fail + 1))
fi
# bench at a depth: the tests named as llama-bench's ("pp4 @ d8"); -d with --batch refused
n=$((n + 1))
if [ "$("$bin" bench -m "$m" -d 8 -p 4 -n 2 -r 1 2>"$tmp/err" | grep -c "| pp4 @ d8 |\|| tg2 @ d8 |")" != 2 ]; then
    echo "FAILED: bench -d 8"; cat "$tmp/err"; fail=$((fail + 1))
fi
expect_error "bench -d with --batch" "not with --batch" "$bin" bench -m "$m" -d 8 --batch 2
# "-ngl" as an option's value is that value (here the output file "-ngl"), not the flag
n=$((n + 1))
if ! (cd "$tmp" && "$bin" logits -m "$m" --ids 1 -o -ngl 2>"$tmp/err") || [ ! -s "$tmp/-ngl" ]; then
    echo "FAILED: -o -ngl did not write the file \"-ngl\""; cat "$tmp/err"; fail=$((fail + 1))
fi

echo "cli_errors: $n checks, $fail failed"
[ "$fail" = 0 ]
