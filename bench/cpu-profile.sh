#!/usr/bin/env bash
# Where infer's CPU time goes, per operation (INFER_PROFILE=1), on the device
# machine's host CPU (no perf there): prefill (pp) and decode (tg) of the
# synthetic shapes at several thread counts, infer alone.
#   through `device`, carrying device-carry/debs (libcjson, as bench/cpu-matrix.sh):
#   bash bench/cpu-profile.sh
# Options (environment): CELLS="1b:q8_0 4b:q4_k_m"  THREADS=1,4,16  P=512 N=64
#   VARIANTS="base: name:-DMACRO=V ..."  builds of infer with extra C flags (commas for spaces), each profiled
#   TESTS=pp,tg   which of the two
# Output: $OUT/profile.txt
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
CELLS=${CELLS:-"1b:q8_0 4b:q4_k_m"}
THREADS=${THREADS:-1,4,16}
P=${P:-512} N=${N:-64}
TESTS=${TESTS:-pp,tg}
VARIANTS=${VARIANTS:-"base:"}
J=$(nproc)
[ -d device-carry/debs ] && dpkg -i device-carry/debs/*.deb >/dev/null 2>&1
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/log.txt"; }
pids=()
for v in $VARIANTS; do # (built side by side)
    name=${v%%:*} flags=${v#*:} flags=${flags//,/ }
    log "build $name ($flags)"
    (cmake -S . -B /tmp/infer-$name -DCMAKE_BUILD_TYPE=Release -DINFER_CUDA=OFF -DCMAKE_C_FLAGS="$flags" >/dev/null 2>>"$OUT/log.txt" &&
        cmake --build /tmp/infer-$name -j"$J" --target infer_cli >/dev/null 2>>"$OUT/log.txt") &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || { log "a build failed"; exit 1; }; done
first=/tmp/infer-${VARIANTS%%:*}/infer
for cell in $CELLS; do
    shape=${cell%%:*} type=${cell#*:}
    f=/tmp/synth-$shape-$type.gguf
    [ -f "$f" ] || { log "synth $cell"; "$first" synth --shape "$shape" --type "$type" -o "$f" >>"$OUT/log.txt" 2>&1; } || continue
    for t in ${THREADS//,/ }; do
        for v in $VARIANTS; do
            name=${v%%:*}
            tests=()
            [[ $TESTS == *pp* ]] && tests+=("-p $P -n 0")
            [[ $TESTS == *tg* ]] && tests+=("-p 0 -n $N")
            for test in "${tests[@]}"; do
                echo "== $cell $name -t $t $test" | tee -a "$OUT/profile.txt"
                INFER_PROFILE=1 /tmp/infer-$name/infer bench -m "$f" -t "$t" $test -r 1 2>&1 | grep -E "^  |t/s|pp|tg" | grep -v -- "---" |
                    tee -a "$OUT/profile.txt"
            done
        done
    done
done
log done
