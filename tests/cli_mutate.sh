#!/usr/bin/env bash
# Mutated fixtures through `infer logits`, as a user's damaged files would
# come: every numeric or list field of each family's config.json set to
# hostile values (0, -1, huge, fractional, a string, null, a list), GGUF
# files converted from the fixtures with header fields overwritten, truncated
# and byte-flipped. Each run must end with status 0 or 1 -- never a signal,
# a sanitizer report or a hang (20 s) -- and a refusal is one line naming the
# problem. In the sanitizer build allocations above 8 GB fail
# (max_allocation_size_mb), as a machine without that memory would.
# usage: cli_mutate.sh INFER_BIN FIXTURES_DIR
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
exec python3 - "$1" "$2" <<'EOF'
import json, os, random, shutil, struct, subprocess, sys, tempfile
from concurrent.futures import ThreadPoolExecutor

infer, fixtures = sys.argv[1], sys.argv[2]
env = dict(os.environ, ASAN_OPTIONS="max_allocation_size_mb=8192:allocator_may_return_null=1:detect_leaks=1",
           UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
tmp = tempfile.mkdtemp()
rng = random.Random(11)
fails, runs = [], 0


def logits(path, what):
    out = os.path.join(os.path.dirname(path) if os.path.isfile(path) else path, "logits.bin")
    try:
        r = subprocess.run([infer, "logits", "-m", path, "--ids", "1,2,3", "--out", out, "-t", "1"], capture_output=True,
                           text=True, errors="replace", timeout=20, env=env)
    except subprocess.TimeoutExpired:
        return f"{what}: hung (20 s)"
    err = r.stderr.strip()
    if r.returncode not in (0, 1):
        return f"{what}: exit {r.returncode}: {err[-600:]}"
    if "Sanitizer" in err or "runtime error" in err:
        return f"{what}: {err[-600:]}"
    if r.returncode == 1 and (not err or len(err.splitlines()) != 1):
        return f"{what}: the refusal is not one line: {err[-300:]!r}"
    return None


VALUES = [0, -1, 1, False, True, 65, 4096, 2**31 - 1, 2**31, 65537, 1e30, 0.5, "x", None, [], [1, 2]]
jobs = []
fams = sorted(f for f in os.listdir(fixtures) if os.path.isfile(os.path.join(fixtures, f, "config.json")))
for fam in fams:
    src = os.path.join(fixtures, fam)
    cfg = json.load(open(os.path.join(src, "config.json")))
    keys = [k for k, v in cfg.items() if isinstance(v, (int, float, list)) and not isinstance(v, bool)]
    for k in rng.sample(keys, min(len(keys), 8)):
        for v in rng.sample(VALUES, 4):
            d = os.path.join(tmp, f"{fam}-{len(jobs)}")
            os.makedirs(d)
            for f in os.listdir(src):
                if f != "config.json" and not f.startswith("ref"):
                    os.symlink(os.path.join(src, f), os.path.join(d, f))
            c = dict(cfg)
            c[k] = v
            json.dump(c, open(os.path.join(d, "config.json"), "w"))
            jobs.append((d, f"{fam}: config.json {k} = {v!r}"))

# GGUF files: converted from three fixtures, then damaged
for fam in ("llama", "gemma3", "qwen3_moe"):
    g = os.path.join(tmp, f"{fam}.gguf")
    if subprocess.run([infer, "convert", os.path.join(fixtures, fam), g, "--type", "q8_0"], capture_output=True).returncode:
        fails.append(f"{fam}: convert failed")
        continue
    data = open(g, "rb").read()
    n_kv = struct.unpack("<Q", data[16:24])[0]
    for i in range(24):
        b = bytearray(data)
        kind = i % 3
        if kind == 0:  # a 4- or 8-byte field in the header (counts, lengths, types, dims) overwritten
            off = rng.randrange(8, min(len(b) - 8, 4096))
            b[off:off + 8] = struct.pack("<Q", rng.choice([0, 1, 2**31, 2**32 - 1, 2**63 - 1, 2**64 - 1, 65537 * 4096]))
            what = f"{fam}.gguf: 8 bytes at {off} overwritten"
        elif kind == 1:
            cut = rng.randrange(0, len(b))
            b = b[:cut]
            what = f"{fam}.gguf: truncated at {cut}"
        else:
            for _ in range(8):
                off = rng.randrange(0, len(b))
                b[off] ^= 1 << rng.randrange(8)
            what = f"{fam}.gguf: 8 bits flipped"
        p = os.path.join(tmp, f"{fam}-{i}.gguf")
        open(p, "wb").write(bytes(b))
        jobs.append((p, what))

with ThreadPoolExecutor(2) as ex:
    for r in ex.map(lambda j: logits(*j), jobs):
        runs += 1
        if r:
            fails.append(r)
for f in fails:
    print("FAILED:", f)
print(f"cli_mutate: {runs} mutated files, {len(fails)} failed")
shutil.rmtree(tmp)
sys.exit(1 if fails else 0)
EOF
