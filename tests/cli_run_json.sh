#!/usr/bin/env bash
# infer run --json / --json-schema / --grammar on SmolLM2-135M-Instruct: the
# output parses and matches the schema, greedy and sampled; a schema the
# compiler refuses is one line on stderr naming the keyword.
# usage: cli_run_json.sh INFER_BIN FIXTURES_DIR
infer=$1
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model=$(bash "$root/scripts/fetch-model.sh" smollm2 2>"$tmp/fetch" | tail -1)
[ -f "$model" ] || { echo "FAILED: scripts/fetch-model.sh smollm2: $(cat "$tmp/fetch")"; exit 1; }
fail=0
schema='{"type":"object","properties":{"city":{"enum":["Paris","Rome"]},"population":{"type":"integer"},"rivers":{"type":"array","items":{"type":"string","maxLength":15},"maxItems":2}},"required":["city","population"],"additionalProperties":false}'
prompt=$'<|im_start|>user\nDescribe the capital of France as JSON.<|im_end|>\n<|im_start|>assistant\n'
echo "$schema" >"$tmp/schema.json"
for args in "--temp 0 --json-schema $schema" "--temp 0.9 -s 5 --json-schema $tmp/schema.json"; do
    # shellcheck disable=SC2086
    "$infer" run -m "$model" -p "$prompt" -n 200 $args >"$tmp/out" 2>"$tmp/err" || { echo "FAILED: run $args: $(cat "$tmp/err")"; fail=1; continue; }
    python3 - "$tmp/out" "$schema" <<'EOF' || { echo "FAILED: run $args: $(cat "$tmp/out")"; fail=1; }
import json, sys
v, s = json.load(open(sys.argv[1])), json.loads(sys.argv[2])
p = s["properties"]
assert set(v) <= set(p) and all(k in v for k in s["required"]), v
assert v["city"] in p["city"]["enum"] and isinstance(v["population"], int)
assert all(isinstance(r, str) and len(r) <= 15 for r in v.get("rivers", [])) and len(v.get("rivers", [])) <= 2
EOF
done
"$infer" run -m "$model" -p "$prompt" -n 200 --temp 0 --json >"$tmp/out" 2>"$tmp/err" &&
    python3 -c 'import json, sys; assert isinstance(json.load(open(sys.argv[1])), dict)' "$tmp/out" ||
    { echo "FAILED: run --json: $(cat "$tmp/out" "$tmp/err")"; fail=1; }
printf 'root ::= ("yes" | "no") "."\n' >"$tmp/g.gbnf"
out=$("$infer" run -m "$model" -p "$prompt" -n 20 --temp 0.9 -s 2 --grammar "$tmp/g.gbnf" 2>"$tmp/err")
[ "$out" = yes. ] || [ "$out" = no. ] || { echo "FAILED: run --grammar: '$out' $(cat "$tmp/err")"; fail=1; }
"$infer" run -m "$model" -p "x" --json-schema '{"type":"string","pattern":"a+"}' >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 1 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "'pattern' is unsupported" "$tmp/err" ||
    { echo "FAILED: a schema with pattern: exit $rc: $(cat "$tmp/err")"; fail=1; }
[ $fail = 0 ] && echo "cli_run_json: ok"
exit $fail
