#!/usr/bin/env bash
# bench/ab --gpu on the H200 machine, which has neither network nor the
# repository's history: the Debian packages of scripts/device-carry.sh
# installed, the base's source carried in device-carry/base-src (made here:
# `git archive BASE | tar -x -C device-carry/base-src`), the two builds kept in
# build-ab/ between calls (a warm machine keeps ignored build outputs).
#   PHASE=1b|8b     bench/ab --gpu's rows of that shape (the first call builds both sides)
#   PHASE=tests     test_cuda and test_batch built in the new side's build and run
# usage (through device, carry device-carry/debs device-carry/base-src device-carry/fixtures):
#   PHASE=1b bash bench/gpu-ab.sh; then PHASE=tests and PHASE=8b at once after it
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
dpkg -i --force-depends device-carry/debs/*.deb >/dev/null 2>&1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu-$PHASE.txt"
case ${PHASE:-1b} in
tests)
    cmake build-ab/build-new -DINFER_SHARED="$PWD/device-carry" >/dev/null
    cmake --build build-ab/build-new -j"$(nproc)" --target test_cuda test_batch 2>&1 | tail -2
    for t in test_cuda test_batch; do (cd build-ab/build-new/tests && ./$t) 2>&1 | tail -15; done | tee "$OUT/tests.txt"
    ;;
*)
    python3 bench/ab --gpu --base-src device-carry/base-src --scratch build-ab --keep --only "$PHASE" -r 2 --md "$OUT/ab-$PHASE.md" 2>&1 |
        tee "$OUT/ab-$PHASE.txt"
    ;;
esac
