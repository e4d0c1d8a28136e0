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
# a file holds what one reading can: no hand-written source over 1000 lines
# (the generated Unicode tables aside)
big='src/tokenizer/normalize_table.c src/tokenizer/unicode_table.c'
find src tools tests include -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -exec wc -l {} + |
    awk -v big="$big" 'BEGIN { n = split(big, b, " "); for (i = 1; i <= n; i++) skip[b[i]] = 1 }
                       $2 != "total" && $1 > 1000 && !($2 in skip) { print $2 ": " $1 " lines" }' |
    rule "no hand-written source file over 1000 lines"
# the layers call down, never up: base < tensor < compute < models <
# tokenizer < vindex < inference, read from the build's objects (beside INFER_BIN)
objs=$(dirname "$1")/CMakeFiles/infer_objects.dir/src
if [ -d "$objs" ]; then
    layers=(base tensor compute models tokenizer vindex inference)
    for ((i = 0; i < ${#layers[@]}; i++)); do
        lo=${layers[i]}
        for ((j = i + 1; j < ${#layers[@]}; j++)); do
            hi=${layers[j]}
            comm -12 <(find "$objs/$lo" -name '*.o' -exec nm -u {} + | awk '{print $2}' | sort -u) \
                     <(find "$objs/$hi" -name '*.o' -exec nm --defined-only {} + | awk '$2 ~ /[TDBRV]/ {print $3}' | sort -u) |
                sed "s/^/$lo calls $hi's /"
        done
    done | rule "no layer calls a layer above it"
else
    echo "FAILED: no objects at $objs (the build's)"; bad=1
fi
exit $bad
