#!/usr/bin/env bash
# infer tokenize on a vocabulary alone (a small WordPiece tokenizer.json written
# here): the ids, the pieces, and errors for bad command lines.
# usage: cli_tokenize.sh INFER_BIN FIXTURES_DIR
bin=$1
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/tokenizer.json" <<'JSON'
{"model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
           "vocab": {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "hello": 3, "world": 4, "##s": 5, ",": 6, "cafe": 7}},
 "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
 "pre_tokenizer": {"type": "BertPreTokenizer"},
 "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 2], "cls": ["[CLS]", 1]},
 "added_tokens": [{"id": 0, "content": "[UNK]", "special": true}, {"id": 1, "content": "[CLS]", "special": true},
                  {"id": 2, "content": "[SEP]", "special": true}]}
JSON
check() { # label, want, command...
    local label=$1 want=$2
    shift 2
    local got
    got=$("$@" 2>&1)
    if [ "$got" != "$want" ]; then
        echo "FAILED: $label: got \"$got\", want \"$want\""
        fail=$((fail + 1))
    fi
}
check "ids" "[1, 3, 6, 4, 5, 7, 0, 2]" "$bin" tokenize -m "$tmp/tokenizer.json" -p "Hello, WORLDS Café xyz" --ids
check "directory, no specials" "[3, 4]" "$bin" tokenize -m "$tmp" -p "hello world" --ids --no-bos
check "pieces" "$(printf '     1 -> '"'"'[CLS]'"'"'\n     3 -> '"'"'hello'"'"'\n     2 -> '"'"'[SEP]'"'"'\nTotal number of tokens: 3')" \
    "$bin" tokenize -m "$tmp" -p "hello" --show-count
printf 'hello\nworlds' >"$tmp/text.txt"
check "file" "[1, 3, 4, 5, 2]" "$bin" tokenize -m "$tmp" -f "$tmp/text.txt" --ids
for args in "-m $tmp" "-m $tmp -p a -f $tmp/text.txt" "-m $tmp/nope.gguf -p a" "-m $tmp -f $tmp/nope.txt" "-m $tmp -p a --bogus"; do
    # shellcheck disable=SC2086
    "$bin" tokenize $args >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" != 1 ] || [ "$(wc -l <"$tmp/err")" != 1 ]; then
        echo "FAILED: tokenize $args: exit $rc, stderr:"
        cat "$tmp/err"
        fail=$((fail + 1))
    fi
done
echo "cli_tokenize: $fail failed"
[ "$fail" = 0 ]
