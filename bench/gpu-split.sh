#!/usr/bin/env bash
# Split placements on the H200 machine (through `device`, with the prebuilt
# binaries: carry device-carry/debs and device-carry/bin.tgz as for
# bench/gpu-quick.sh): decode and prompt speed of the Gemma 3 SHAPE (default
# 1b, q4_k_m) all on the GPU, with -ngl N (the last N layers on the GPU), with
# every layer pipelined (attention on the CPU, FFN on the GPU) and all on the
# CPU's 16 threads; and each placement's logits over 64 positions against the
# all-GPU run (KL, top-1). Output: $OUT/split.txt.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
dpkg -i --force-depends device-carry/debs/*.deb >/dev/null 2>&1
tar xf device-carry/bin.tgz -C /tmp || { echo "no device-carry/bin.tgz"; exit 1; }
I=/tmp/bin/infer S=${SHAPE:-1b} M=/tmp/$S.gguf
{
    $I synth --shape $S -o $M >/dev/null 2>&1 || { echo "synth failed"; exit 1; }
    L=$($I info -m $M 2>/dev/null | awk '/^n_layer/ {print $3; exit}')
    H=$(( ${L:-26} / 2 ))
    IDS=$(python3 -c "import random; random.seed(1); print(','.join(str(random.randrange(262144)) for _ in range(64)))")
    run() { # name, then infer's placement flags
        local name=$1; shift
        echo "## $name"
        timeout 120 $I bench -m $M -r 2 -p 512 -n 64 "$@" 2>&1 | tail -2
        local a=("$@"); a=("${a[@]/#--device/--backend}") # (logits names it --backend)
        timeout 120 $I logits -m $M --ids $IDS --out /tmp/lg-$name.bin -t 16 "${a[@]}" 2>&1 | tail -1
    }
    run gpu --device cuda
    run ngl$H --device cuda -ngl $H -t 16
    run ngl0 --device cuda -ngl 0 -t 16
    run pipelined --device cuda --graph pipelined -t 16
    run cpu --device cpu -t 16
    python3 - <<PY
import numpy as np, os
def sm(x): x = x - x.max(1, keepdims=True); e = np.exp(x); return e / e.sum(1, keepdims=True)
a = np.fromfile("/tmp/lg-gpu.bin", dtype=np.float32).reshape(64, -1).astype(np.float64); p = sm(a)
for n in ["ngl$H", "ngl0", "pipelined", "cpu"]:
    f = f"/tmp/lg-{n}.bin"
    if not os.path.exists(f): print(f"{n}: no logits"); continue
    b = np.fromfile(f, dtype=np.float32).reshape(64, -1).astype(np.float64); q = sm(b)
    kl = (p * (np.log(p + 1e-30) - np.log(q + 1e-30))).sum(1)
    print(f"{n} vs all-GPU: KL mean {kl.mean():.2e} max {kl.max():.2e}, top-1 same at {(a.argmax(1) == b.argmax(1)).sum()}/64")
PY
} 2>&1 | tee "$OUT/split.txt"
