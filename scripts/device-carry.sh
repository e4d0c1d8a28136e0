#!/usr/bin/env bash
# Makes device-carry/ (gitignored): what the device machine's benchmarks
# (bench/device) need and cannot fetch there (it has no network):
#   device-carry/debs/             libcjson and libmicrohttpd (Debian packages, for infer's build)
#   device-carry/llama-full.tgz    llama.cpp's source from PyPI's llama-cpp-python sdist (the version
#                                  bench/compare-llamacpp names), without models, docs and the GPU backends
#                                  other than CUDA (~10 MB): the CPU subcommands (cpu, cpu-compare, tokenize)
#   device-carry/llama-cuda.tgz    the same file, under the name the CUDA builds read (gpu LLAMA=1, serve, tp2)
#   device-carry/fixtures/hf       a copy of ../shared/fixtures/hf (the GPU parity tests)
#   device-carry/vocab/            llama.cpp's ggml-vocab-*.gguf of the vocabularies `bench/device tokenize`
#                                  times (~27 MB), llama-spm among them (gpu SERVE=1, serve)
# `bench/device pack` makes device-carry/bin.tgz (the prebuilt binaries) from a CUDA build.
# usage: bash scripts/device-carry.sh   (then carry the paths a subcommand names: bench/device help NAME)
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p device-carry/debs
(cd device-carry/debs && apt-get download libcjson1 libcjson-dev libmicrohttpd12 libmicrohttpd-dev >/dev/null)
V=$(sed -n 's/^LCP_VERSION = "\(.*\)"/\1/p' bench/compare-llamacpp)
cache=${INFER_CACHE:-$HOME/.cache/infer}/llama.cpp
sdist=$cache/llama_cpp_python-$V.tar.gz
mkdir -p "$cache"
[ -f "$sdist" ] || pip download --no-deps --no-binary :all: "llama-cpp-python==$V" -d "$cache" >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar xzf "$sdist" -C "$tmp"
src=$tmp/llama_cpp_python-$V/vendor
tar czf "$tmp/llama.tgz" -C "$src" --exclude=llama.cpp/models --exclude=llama.cpp/docs --exclude=llama.cpp/benches \
    --exclude=llama.cpp/tools/server/public --exclude='llama.cpp/ggml/src/ggml-vulkan' --exclude='llama.cpp/ggml/src/ggml-sycl' \
    --exclude='llama.cpp/ggml/src/ggml-metal' --exclude='llama.cpp/ggml/src/ggml-opencl' --exclude='llama.cpp/ggml/src/ggml-cann' \
    --exclude='llama.cpp/ggml/src/ggml-musa' llama.cpp
mv "$tmp/llama.tgz" device-carry/llama-full.tgz # (whole or not at all)
cp device-carry/llama-full.tgz device-carry/llama-cuda.tgz.part && mv device-carry/llama-cuda.tgz.part device-carry/llama-cuda.tgz
mkdir -p device-carry/vocab
for v in llama-spm llama-bpe gpt-2 qwen2 deepseek-llm bert-bge nomic-bert-moe; do
    cp "$src/llama.cpp/models/ggml-vocab-$v.gguf" device-carry/vocab/
done
if [ ! -d device-carry/fixtures/hf ] && [ -d ../shared/fixtures/hf ]; then
    mkdir -p device-carry/fixtures && cp -r ../shared/fixtures/hf device-carry/fixtures/hf.part && mv device-carry/fixtures/hf.part device-carry/fixtures/hf
fi
du -sh device-carry/*
