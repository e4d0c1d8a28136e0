# shellcheck shell=bash disable=SC2034
# The steps bench/device's subcommands share (sourced by bench/device; the
# working directory is the repository's root): installing the carried Debian
# packages, taking infer from the carried binaries or building it for sm_90,
# building llama.cpp from the carried sdist, making the synthetic models,
# and the dry run (DRY=1: every command printed instead of run).
#
# The device machine has no network: what it needs comes in device-carry/
# (gitignored; scripts/device-carry.sh makes most of it, `bench/device pack`
# the prebuilt binaries):
#   device-carry/debs/           libcjson, libmicrohttpd (Debian packages)
#   device-carry/llama-full.tgz  llama.cpp from the llama-cpp-python sdist (CPU builds)
#   device-carry/llama-cuda.tgz  the same file (the CUDA builds read this name)
#   device-carry/llama-cuda-bin.tgz  llama-bench, llama-batched-bench and llama-server built here for sm_90
#                                (`bench/device pack-llama`; shared libraries, ~30 MB): no build there
#   device-carry/fixtures/hf     a copy of ../shared/fixtures/hf (the parity tests)
#   device-carry/vocab/          a few of llama.cpp's ggml-vocab-*.gguf (tokenize, serve)
#   device-carry/bin.tgz         infer, its tests and bench programs built on the development machine
#   device-carry/before.tgz      `git archive REV` of an earlier tree (cpu-compare BEFORE)
#   device-carry/base-src/       the base's source for bench/ab (ab)

OUT=${OUT:-/tmp/out}
DRY=${DRY:-0}
J=$(nproc)
CARRY=device-carry
SYNTH=/tmp/synth # (the synthetic models: synth-SHAPE-TYPE.gguf, synth-ARCH-SHAPE-TYPE.gguf)
LOG=$OUT/log.txt # (build output and whatever else is not a figure)
LCP_VERSION=$(sed -n 's/^LCP_VERSION = "\(.*\)"/\1/p' bench/compare-llamacpp)
exec 9>&1 # (the dry run prints here: past every pipe and redirection of the command it stands for)

# ---------------------------------------------------------------- running

# x CMD...: runs CMD; in a dry run prints it (quoted where needed) and succeeds.
x() {
    if [ "$DRY" = 1 ]; then
        local a s=
        for a in "$@"; do
            if [[ $a =~ ^[][A-Za-z0-9_./:=,@%+-]+$ ]]; then s+=" $a"; else s+=" ${a@Q}"; fi
        done
        echo "+${s}" >&9
        return 0
    fi
    "$@" 9>&-
}

# have PATH: the file is there (in a dry run: as if it were).
have() { [ "$DRY" = 1 ] || [ -e "$1" ]; }

# same A B: the two files are byte for byte equal (a dry run prints the comparison).
same() { x cmp -s "$1" "$2"; }

# a setting of SETS / INFER_SETS ("-": none; NAME=V,NAME2=V2: both) as env(1)'s arguments
set_env() { local v=${1#-}; echo "${v//,/ }"; }

log() { echo "[$(date +%T)] $*"; }
die() { log "$*"; exit 1; }

# ---------------------------------------------------------------- the machine

# strays: kills the benchmark programs an earlier call left running (names as the kernel keeps them: 15
# characters). A call cut at its time limit ends the script, not always its children: on a machine still warm
# from it, a llama-bench of 16 threads went on beside the next call's figures (2026-12-06: infer's CPU decode
# read 0.4x there, 1.5x on a machine to itself). Only orphans (their parent gone, so init's): a program that
# something still runs is not a stray (run here beside a test suite, a name alone had killed its server).
strays() {
    local p
    [ "$DRY" = 1 ] && return 0
    p=$(pgrep -d, -P 1 -x 'llama-bench|llama-batched-b|llama-server|llama-cli|infer|test_cuda|test_batch|bench_cuda_ops') || return 0
    log "stray processes from an earlier call, killed: $(ps -o pid=,comm=,etime= -p "$p" | tr -s ' \n' ' ')"
    kill -9 ${p//,/ } 2>/dev/null
    sleep 1
}

install_debs() { # (once a run)
    [ -n "${DEBS_DONE:-}" ] && return 0
    DEBS_DONE=1
    [ "$DRY" = 1 ] || [ -d $CARRY/debs ] || return 0
    x dpkg -i --force-depends $CARRY/debs/*.deb >/dev/null 2>&1
    return 0
}

gpu_name() { x nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; }

# cpu_info: the CPU's model, cores, threads a core and NUMA nodes (its AVX-512 and AMX flags to the log)
cpu_info() {
    grep -o 'avx512[a-z_]*\|amx[a-z_]*' /proc/cpuinfo 2>/dev/null | sort -u | tr '\n' ' ' >>"$LOG"
    lscpu | grep -E "Model name|^CPU\(s\)|Thread|NUMA node\(s\)"
}

# The tests look for the fixtures where they were built: /work/shared and /work/main.
link_fixtures() {
    x mkdir -p /work/shared/fixtures
    x ln -sfn "$PWD/$CARRY/fixtures/hf" /work/shared/fixtures/hf
    [ -e /work/main ] || x ln -s "$PWD" /work/main
}

# NCCL as PyTorch's wheel has it there (the engine opens it at run time); NVLink multicast never
nccl_env() {
    local lib
    lib=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib', 'libnccl.so.2'))" 2>/dev/null)
    [ -n "$lib" ] && [ -f "$lib" ] && export INFER_NCCL_LIB=$lib
    export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
}

# ---------------------------------------------------------------- infer

# build_infer DIR "TARGETS" [CMAKE_ARGS...]: a release build of this tree (of SRC=DIR: another) with
# CUDA for sm_90 where nvcc is, unless -DINFER_CUDA=OFF; prints CMake's "infer:" lines (the CUDA
# layer's architecture)
build_infer() {
    local dir=$1 targets=$2
    shift 2
    x cmake -S "${SRC:-.}" -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" 2>&1 | { grep "infer:" || true; }
    x cmake --build "$dir" -j"$J" --target $targets >/dev/null 2>>"$LOG"
}

# infer_bins "TARGETS": infer and the programs named, as I (infer), TESTS (test_*) and BIN
# (bench_*): the carried binaries (device-carry/bin.tgz, `bench/device pack`) with PREBUILT=1,
# or when PREBUILT is unset and they are carried; else built here (for sm_90) in build/.
infer_bins() {
    install_debs
    if [ "${PREBUILT:-}" = 1 ] || { [ -z "${PREBUILT:-}" ] && [ -f $CARRY/bin.tgz ]; }; then
        log "prebuilt infer ($CARRY/bin.tgz)"
        have $CARRY/bin.tgz || die "no $CARRY/bin.tgz"
        x tar xf $CARRY/bin.tgz -C /tmp || die "$CARRY/bin.tgz: unreadable"
        link_fixtures
        I=/tmp/bin/infer TESTS=/tmp/bin BIN=/tmp/bin
    else
        log "build infer (for sm_90 where nvcc is): $1"
        build_infer build "$1" -DINFER_SHARED="$PWD/$CARRY" || die "build failed ($LOG)"
        I=build/infer TESTS=build/tests BIN=build
    fi
}

# ---------------------------------------------------------------- llama.cpp

# build_llama cpu|cuda "TARGETS" [CMAKE_ARGS...]: llama.cpp from the carried sdist (llama-full.tgz,
# GGML_NATIVE; llama-cuda.tgz, GGML_CUDA for sm_90), its programs in $LLAMA (a folder);
# llama-server in TARGETS builds the server too.
build_llama() {
    local kind=$1 targets=$2 srv=OFF src
    shift 2
    [[ " $targets " == *" llama-server "* ]] && srv=ON
    if [ "$kind" = cpu ]; then
        src=/tmp/lcp
        x mkdir -p $src && x tar xf $CARRY/llama-full.tgz -C $src || return 1
        x cmake -S $src/llama.cpp -B /tmp/lcp/build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
            -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=$srv "$@" >/dev/null 2>>"$LOG" &&
            x cmake --build /tmp/lcp/build --target $targets -j"$J" >/dev/null 2>>"$LOG"
    elif [ -f $CARRY/llama-cuda-bin.tgz ]; then # (bench/device pack-llama: built on the development machine)
        log "llama.cpp's CUDA programs from $CARRY/llama-cuda-bin.tgz"
        x mkdir -p /tmp/lcp/build-cuda && x tar xzf $CARRY/llama-cuda-bin.tgz -C /tmp/lcp/build-cuda
    else
        src=/tmp/lcp-cuda
        x mkdir -p $src && x tar xf $CARRY/llama-cuda.tgz -C $src || return 1
        x cmake -S $src/llama.cpp -B /tmp/lcp/build-cuda -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
            -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=$srv "$@" >/dev/null 2>>"$OUT/llama-build.txt" &&
            x cmake --build /tmp/lcp/build-cuda --target $targets -j"$J" >/dev/null 2>>"$OUT/llama-build.txt"
    fi
}
llama_dir() { [ "$1" = cpu ] && echo /tmp/lcp/build/bin || echo /tmp/lcp/build-cuda/bin; }

# ---------------------------------------------------------------- synthetic models

# spec_parts [ARCH:]SHAPE[:TYPE]: S_ARCH (gemma3 unless named), S_SHAPE, S_TYPE (q4_k_m unless named)
spec_parts() {
    local p
    IFS=: read -r -a p <<<"$1"
    S_ARCH=gemma3 S_SHAPE=${p[0]} S_TYPE=q4_k_m
    case ${#p[@]} in
    2) S_TYPE=${p[1]} ;;
    3) S_ARCH=${p[0]} S_SHAPE=${p[1]} S_TYPE=${p[2]} ;;
    esac
}

# synth_path SPEC: the file of [ARCH:]SHAPE[:TYPE]
synth_path() {
    spec_parts "$1"
    [ "$S_ARCH" = gemma3 ] && echo "$SYNTH/synth-$S_SHAPE-$S_TYPE.gguf" || echo "$SYNTH/synth-$S_ARCH-$S_SHAPE-$S_TYPE.gguf"
}

# synth SPEC [INFER]: `infer synth` of the spec (random weights: speed does not depend on the
# values), unless made already; its path on stdout. SYNTH_TIME=1: its time and peak memory to stderr.
synth() {
    local f t=()
    f=$(synth_path "$1")
    spec_parts "$1"
    mkdir -p $SYNTH
    if [ "$DRY" = 1 ] || [ ! -s "$f" ]; then
        if [ "${SYNTH_TIME:-0}" = 1 ]; then
            [ -x /usr/bin/time ] && t=(/usr/bin/time -f "synth: %e s, max RSS %M KB")
            x "${t[@]}" "${2:-$I}" synth --arch "$S_ARCH" --shape "$S_SHAPE" --type "$S_TYPE" -o "$f" 2>&1 | tail -2 >&2
        else
            x "${2:-$I}" synth --arch "$S_ARCH" --shape "$S_SHAPE" --type "$S_TYPE" -o "$f" >>"$LOG" 2>&1
        fi || { log "synth $1 failed" >&2; return 1; }
    fi
    echo "$f"
}

# synth_bg SPEC...: all of them made side by side in the background; SYNTH_PID waits for them
synth_bg() {
    local s
    ( for s in "$@"; do synth "$s" >/dev/null & done; wait ) &
    SYNTH_PID=$!
}

# ---------------------------------------------------------------- logits

# random_ids N: N token ids of Gemma 3's vocabulary, always the same
random_ids() { python3 -c "import random; random.seed(1); print(','.join(str(random.randrange(262144)) for _ in range(${1:-64})))"; }

# logits_kl N REF NAME=FILE...: each file's N rows of logits against REF's: max error over REF's RMS,
# KL(ref || file) mean and max, and how often the top-1 token is the same
logits_kl() {
    x python3 - "$@" <<'EOF'
import os, sys
import numpy as np
n, ref = int(sys.argv[1]), sys.argv[2]
def sm(x): x = x - x.max(1, keepdims=True); e = np.exp(x); return e / e.sum(1, keepdims=True)
a = np.fromfile(ref, dtype=np.float32).reshape(n, -1).astype(np.float64); p = sm(a)
for arg in sys.argv[3:]:
    name, f = arg.split("=", 1)
    if not os.path.exists(f): print(f"{name}: no logits"); continue
    b = np.fromfile(f, dtype=np.float32).reshape(n, -1).astype(np.float64); q = sm(b)
    kl = (p * (np.log(p + 1e-30) - np.log(q + 1e-30))).sum(1)
    rel = np.abs(a - b).max() / np.sqrt((a * a).mean())
    print(f"{name}, {n} positions: max error {rel:.2e} of the RMS, KL mean {kl.mean():.2e} max {kl.max():.2e}, "
          f"top-1 same at {(a.argmax(1) == b.argmax(1)).sum()}/{n}")
EOF
}
