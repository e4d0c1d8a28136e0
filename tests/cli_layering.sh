#!/usr/bin/env bash
# The layering's rules (DESIGN.md), checked on the sources: each a grep that
# prints what breaks it. usage: cli_layering.sh INFER_BIN FIXTURES_DIR
shopt -s lastpipe # (rule runs in this shell: bad sticks)
cd "$(dirname "$0")/.." || exit 1
bad=0
rule() { # rule NAME: stdin holds the offenders, one a line
    local found
    found=$(cat)
    if [ -n "$found" ]; then echo "FAILED: $1:"; echo "$found" | sed 's/^/  /'; bad=1; else echo "ok: $1"; fi
}
# the device layer's calls stay behind the backend seam
grep -rnE '\bcuda_[a-z0-9_]+\(' src --include=*.c --include=*.h | grep -v '^src/compute/' | rule "no cuda_* call outside src/compute"
# a build without CUDA: one small stub file
wc -l src/compute/cuda/none.c | awk '$1 >= 30' | rule "the CUDA-less stub under 30 lines"
exit $bad
