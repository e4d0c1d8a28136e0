#!/usr/bin/env bash
# A build without CUDA links: src/compute/cuda/none.c defines every function
# cuda.h declares (a missing one breaks the sanitizer builds, which leave CUDA
# out, only at link time). usage: cli_cuda_stubs.sh INFER_BIN FIXTURES_DIR
dir=$(dirname "$0")/../src/compute/cuda
missing=$(comm -23 <(grep -oE '\bcuda_[a-z0-9_]+\(' "$dir/cuda.h" | sort -u) <(grep -oE '\bcuda_[a-z0-9_]+\(' "$dir/none.c" | sort -u))
if [ -n "$missing" ]; then echo "FAILED: none.c lacks $(tr '\n' ' ' <<<"$missing")"; exit 1; fi
echo "cli_cuda_stubs: none.c defines all $(grep -oE '\bcuda_[a-z0-9_]+\(' "$dir/cuda.h" | sort -u | wc -l) functions of cuda.h"
