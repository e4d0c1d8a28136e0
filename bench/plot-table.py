#!/usr/bin/env python3
"""issue 39's table as plots, from a `bench/device table` log (table.txt): infer and llama.cpp
side by side, t/s against depth (pp512, tg128) and batched decode's aggregate t/s against the
sequences. usage: bench/plot-table.py OUT.png TABLE.txt [TITLE]"""
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

DEPTH = re.compile(r"\|\s*(pp512|tg128)(?: @ d(\d+))?\s*\|\s*([0-9.]+) ±")
INFER_B = re.compile(r"\|\s*cuda\s*\|.*\|\s*(\d+)\s*\|\s*tg128\s*\|\s*([0-9.]+) ±")
LLAMA_B = re.compile(r"^\|\s*128\s*\|\s*128\s*\|\s*(\d+)\s*\|\s*\d+\s*\|\s*[0-9.]+\s*\|\s*[0-9.]+\s*\|\s*[0-9.]+\s*\|\s*([0-9.]+)\s*\|")


def parse(path):
    depth = {"infer": {}, "llama.cpp": {}}
    batch = {"infer": {}, "llama.cpp": {}}
    side = "infer"
    for line in open(path):
        if re.match(r"\[[0-9:]+\] llama-bench ", line):
            side = "llama.cpp"
        if re.match(r"\[[0-9:]+\] infer bench --batch", line):
            side = "batch"
        m = DEPTH.search(line)
        if m and side != "batch":
            depth[side].setdefault(m.group(1), {})[int(m.group(2) or 0)] = float(m.group(3))
        m = INFER_B.search(line)
        if m:
            batch["infer"][int(m.group(1))] = float(m.group(2))
        m = LLAMA_B.search(line)
        if m:
            batch["llama.cpp"][int(m.group(1))] = float(m.group(2))
    return depth, batch


def main():
    out, path = sys.argv[1], sys.argv[2]
    title = sys.argv[3] if len(sys.argv) > 3 else "Llama 8B shape, Q4_K_M"
    depth, batch = parse(path)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for test, ax in zip(("pp512", "tg128"), axes):
        for eng, rows in depth.items():
            pts = rows.get(test, {})
            if pts:
                d = sorted(pts)
                ax.plot(d, [pts[x] for x in d], marker="o", label=eng)
        ax.set_title(f"{title}: {test} against depth")
        ax.set_xlabel("depth (positions already in the cache)")
        ax.set_ylabel("tokens/s")
        ax.legend()
    ax = axes[2]
    for eng, pts in batch.items():
        if pts:
            b = sorted(pts)
            ax.plot(b, [pts[x] for x in b], marker="o", label=eng)
    ax.set_xscale("log", base=2)
    ax.set_title("batched decode, aggregate")
    ax.set_xlabel("sequences")
    ax.set_ylabel("tokens/s")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=100)


if __name__ == "__main__":
    main()
