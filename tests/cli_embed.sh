#!/usr/bin/env bash
# infer embed on all-MiniLM-L6-v2 (scripts/fetch-model.sh minilm): token ids
# equal to Hugging Face's and embeddings within cosine 0.9999 of
# sentence-transformers' (tests/data/embed/minilm.json), then bad input
# refused with a message naming it.
# usage: cli_embed.sh INFER_BIN FIXTURES_DIR
infer=$1
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model=$(bash "$root/scripts/fetch-model.sh" minilm 2>"$tmp/fetch" | tail -1)
[ -d "$model" ] || { echo "FAILED: scripts/fetch-model.sh minilm: $(cat "$tmp/fetch")"; exit 1; }

python3 "$root/tests/embed/check_minilm.py" "$infer" "$model" "$root/tests/data/embed/minilm.json"
rc=$?

# refuse $1 (a pattern of the message) for the command after it: exit 1, no crash
refuse() {
    local want=$1; shift
    "$infer" "$@" >"$tmp/out" 2>"$tmp/err"; local st=$?
    if [ $st != 1 ] || ! grep -q -- "$want" "$tmp/err"; then
        echo "FAILED: infer $* exited $st (want 1 and \"$want\"): $(head -c 300 "$tmp/err")"; rc=1
    fi
}
refuse "encoder" run -m "$model" -p "hello" -n 4
refuse "not mean, cls or last" embed -m "$model" --pooling max -p hi
refuse "give the texts" embed -m "$model"
long=$(printf 'word %.0s' $(seq 600))
refuse "more than the 512" embed -m "$model" -p "$long"
printf '\n\n' >"$tmp/empty"
refuse "holds no text" embed -m "$model" -f "$tmp/empty"
# a file of lines: one embedding per non-empty line
printf 'first line\n\nsecond line\r\n' >"$tmp/lines"
n=$("$infer" embed -m "$model" -f "$tmp/lines" | wc -l)
[ "$n" = 2 ] || { echo "FAILED: -f with two text lines gave $n embeddings"; rc=1; }
exit $rc
