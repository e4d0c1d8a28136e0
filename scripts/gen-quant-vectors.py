#!/usr/bin/env python3
"""Test vectors for ggml's quantized block formats (tests/test_quant.c).

For every type, a few rows of random floats (fixed seed, varied scales, row
lengths 256, 512, an odd number of blocks and 2048 for the k-quants; awkward
blocks: all zero, constant, all positive, outliers) are quantized by an
independent implementation, and the blocks dequantized by the gguf package:

  - gguf's own quantizer where it has one (q4_0, q4_1, q5_0, q5_1, q8_0, mxfp4);
  - otherwise ggml's C reference quantizer (quantize_row_*_ref in
    ggml-quants.c), compiled from ggml's source and called through ctypes;
    without it those rows are skipped;
  - and one row of random but valid blocks (random bytes, sane scales) per type.

When ggml is given, gguf's quantized bytes and dequantized floats are also
checked against ggml's own functions.

Output: tests/data/quant/<type>.bin, little-endian:
  "IQV1", u32 ggml type, u32 row count, then per row:
  u32 n, u32 flags, [f32 input[n] if flags & 1], u8 blocks[n/blck*size], f32 expect[n]
flags: 1 input present and blocks = reference quantization of it,
       2 that quantizer is ggml's C reference, 4 it is gguf's, 8 random blocks.

Usage:
  pip install gguf numpy
  pip download --no-binary :all: --no-deps llama-cpp-python -d /tmp/lcp && tar/unzip it
  GGML_SRC=/tmp/lcp/llama_cpp_python-*/vendor/llama.cpp/ggml scripts/gen-quant-vectors.py
GGML_SRC is the ggml folder (with src/ggml-quants.c); the script compiles
ggml-quants.c alone with cc -O2 (no -march, so no FMA changes ggml's float
arithmetic) plus stubs for the few ggml functions it links to but the row
functions never call. GGML_QUANTS_LIB may name such a library instead.
The committed vectors were made with gguf 0.19.0 and llama-cpp-python 0.3.36.
"""
import ctypes
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants
from gguf.constants import GGML_QUANT_SIZES

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "quant")

# type -> (file name, gguf quantizes it, offsets of f16 scales in a block)
TYPES = {
    T.Q4_0: ("q4_0", True, [0]),
    T.Q4_1: ("q4_1", True, [0, 2]),
    T.Q5_0: ("q5_0", True, [0]),
    T.Q5_1: ("q5_1", True, [0, 2]),
    T.Q8_0: ("q8_0", True, [0]),
    T.MXFP4: ("mxfp4", True, []),
    T.Q2_K: ("q2_K", False, [80, 82]),
    T.Q3_K: ("q3_K", False, [108]),
    T.Q4_K: ("q4_K", False, [0, 2]),
    T.Q5_K: ("q5_K", False, [0, 2]),
    T.Q6_K: ("q6_K", False, [208]),
    T.Q8_K: ("q8_K", False, []),
}

F_INPUT, F_GGML, F_GGUF, F_RANDOM = 1, 2, 4, 8


STUBS = r"""
#include <stdlib.h>
#include <stddef.h>
void ggml_abort(const char *file, int line, const char *fmt, ...) { abort(); }
size_t ggml_row_size(int type, long long n) { abort(); }
const char *ggml_type_name(int type) { return "?"; }
size_t ggml_type_size(int type) { abort(); }
"""


def load_ggml():
    path = os.environ.get("GGML_QUANTS_LIB")
    src = os.environ.get("GGML_SRC")
    if not path and src:
        tmp = tempfile.mkdtemp()
        stubs = os.path.join(tmp, "stubs.c")
        with open(stubs, "w") as f:
            f.write(STUBS)
        path = os.path.join(tmp, "libggmlq.so")
        subprocess.run(["cc", "-O2", "-fPIC", "-shared", "-I" + os.path.join(src, "include"),
                        "-I" + os.path.join(src, "src"), os.path.join(src, "src", "ggml-quants.c"), stubs,
                        "-o", path, "-lm"], check=True)
    if not path:
        print("neither GGML_SRC nor GGML_QUANTS_LIB set: k-quant reference rows skipped", file=sys.stderr)
        return None
    return ctypes.CDLL(path)


def ggml_quantize(lib, name, x):
    blck, size = GGML_QUANT_SIZES[TYPE_OF[name]]
    out = np.zeros(len(x) // blck * size, dtype=np.uint8)
    f = getattr(lib, f"quantize_row_{name}_ref")
    f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    x = np.ascontiguousarray(x, dtype=np.float32)
    f(x.ctypes.data, out.ctypes.data, len(x))
    return out


def ggml_dequantize(lib, name, blocks, n):
    y = np.zeros(n, dtype=np.float32)
    f = getattr(lib, f"dequantize_row_{name}")
    f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    blocks = np.ascontiguousarray(blocks)
    f(blocks.ctypes.data, y.ctypes.data, n)
    return y


TYPE_OF = {v[0]: k for k, v in TYPES.items()}


def input_rows(rng, blck):
    """Float rows: lengths 256, 512 and an odd number of blocks, varied scales."""
    odd = 7 * blck if blck == 32 else 3 * blck
    rows = [rng.standard_normal(256).astype(np.float32) * np.float32(0.02)]
    r = rng.standard_normal(512).astype(np.float32) * np.float32(3.0)
    r[rng.integers(0, 512, 4)] *= 40  # outliers
    rows.append(r)
    r = rng.standard_normal(odd).astype(np.float32)
    nb = odd // blck
    r *= np.repeat(10.0 ** rng.uniform(-4, 2, nb), blck).astype(np.float32)  # per-block scale
    r[0:blck] = 0  # all-zero block
    r[blck:2 * blck] = np.float32(0.75)  # constant block
    r[2 * blck:3 * blck] = np.abs(r[2 * blck:3 * blck]) + np.float32(0.1)  # all positive
    rows.append(r)
    if blck == 256:  # more groups for the k-quants' scale searches to decide on
        rows.append(rng.standard_normal(2048).astype(np.float32) * np.float32(0.05))
    return rows


def random_blocks(rng, t, nblocks):
    """Random bytes with finite, sane scales (f16 fields, mxfp4 exponent, q8_K f32)."""
    name, _, f16_offsets = TYPES[t]
    _, size = GGML_QUANT_SIZES[t]
    b = rng.integers(0, 256, (nblocks, size), dtype=np.uint8)
    for off in f16_offsets:
        v = (rng.uniform(1e-4, 0.1, nblocks) * rng.choice([-1, 1], nblocks)).astype(np.float16)
        b[:, off:off + 2] = v.view(np.uint8).reshape(nblocks, 2)
    if t == T.MXFP4:
        b[:, 0] = rng.integers(100, 140, nblocks)
    if t == T.Q8_K:
        b[:, 0:4] = rng.uniform(1e-4, 0.1, nblocks).astype(np.float32).view(np.uint8).reshape(nblocks, 4)
    return b.reshape(-1)


def dequantize(t, blocks, n):
    if t == T.Q8_K:  # gguf has no q8_K: d (f32) * q, the same single product as ggml
        b = blocks.reshape(-1, GGML_QUANT_SIZES[t][1])
        d = b[:, 0:4].copy().view(np.float32)
        q = b[:, 4:4 + 256].view(np.int8).astype(np.float32)
        return (d * q).reshape(-1)
    return quants.dequantize(blocks, t).reshape(-1).astype(np.float32)


def main():
    lib = load_ggml()
    rng = np.random.default_rng(20261129)
    os.makedirs(OUT, exist_ok=True)
    total = 0
    for t, (name, gguf_quantizes, _) in TYPES.items():
        blck, size = GGML_QUANT_SIZES[t]
        rows = []  # (flags, input or None, blocks)
        for x in input_rows(rng, blck):
            if gguf_quantizes:
                q = quants.quantize(x, t).reshape(-1)
                if lib is not None:
                    g = ggml_quantize(lib, name, x)
                    if not np.array_equal(g, q):
                        print(f"{name}: gguf and ggml quantizers differ in {np.sum(g != q)} bytes", file=sys.stderr)
                rows.append((F_INPUT | F_GGUF, x, q))
            elif lib is not None:
                rows.append((F_INPUT | F_GGML, x, ggml_quantize(lib, name, x)))
        nb_rand = 512 // blck if blck == 256 else 256 // blck
        rows.append((F_RANDOM, None, random_blocks(rng, t, nb_rand)))

        path = os.path.join(OUT, f"{name}.bin")
        with open(path, "wb") as f:
            f.write(b"IQV1" + struct.pack("<II", int(t), len(rows)))
            for flags, x, q in rows:
                n = len(q) // size * blck
                y = dequantize(t, q, n)
                if lib is not None:
                    yg = ggml_dequantize(lib, name, q, n)
                    assert np.array_equal(yg.view(np.uint32), y.view(np.uint32)), f"{name}: gguf != ggml dequantize"
                f.write(struct.pack("<II", n, flags))
                if x is not None:
                    f.write(x.astype("<f4").tobytes())
                f.write(q.astype(np.uint8).tobytes())
                f.write(y.astype("<f4").tobytes())
        total += os.path.getsize(path)
        print(f"{path}: {len(rows)} rows")
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()
