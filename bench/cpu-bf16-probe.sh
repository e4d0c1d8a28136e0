#!/usr/bin/env bash
# 1B BF16 decode on the device machine's CPU at 8 and 16 threads, the AMX-BF16
# kernel against the AVX-512 row kernel (INFER_NO_AMX=1), two rounds, and
# bench/streams.c's read bandwidth: is a slow BF16 decode cell the kernel or
# the machine? Through `device` (debs carried): bash bench/cpu-bf16-probe.sh
set -u
OUT=${OUT:-/tmp/out}
[ -d device-carry/debs ] && dpkg -i device-carry/debs/*.deb >/dev/null 2>&1
cmake -S . -B /tmp/ic -DCMAKE_BUILD_TYPE=Release -DINFER_CUDA=OFF >/dev/null && cmake --build /tmp/ic -j16 --target infer_cli >/dev/null 2>&1
I=/tmp/ic/infer
$I synth --shape 1b --type bf16 -o /tmp/b.gguf >/dev/null 2>&1
{
for r in 1 2; do for t in 8 16; do for e in INFER_X=0 INFER_NO_AMX=1; do
  echo "$e t=$t: $(env $e $I bench -m /tmp/b.gguf -t $t -p 0 -n 64 -r 1 2>&1 | tail -1)"
done; done; done
cc -O2 -pthread bench/streams.c -o /tmp/streams && /tmp/streams 2>&1 | tail -5
} 2>&1 | tee $OUT/bf16.txt
