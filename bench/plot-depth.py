#!/usr/bin/env python3
"""t/s against depth for the 8B Q4_K_M shape on the GPU, from `bench/device deep` logs
(lines "FILE pp512 @D base|new SETTING:  T/S ± ..."): base and new under the default
setting, one line each per log. usage: bench/plot-depth.py OUT.png LABEL=LOG [LABEL=LOG ...]
(a LABEL of "base" takes the log's base rows, any other its new rows)."""
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

ROW = re.compile(r"synth-llama-8b-q4_k_m\.gguf (pp512|tg64) @(\d+) (base|new) -:\s+([0-9.]+)")


def rows(path, side):
    got = {}
    for line in open(path):
        m = ROW.search(line)
        if m and m.group(3) == side:
            got.setdefault(m.group(1), {})[int(m.group(2))] = float(m.group(4))
    return got


def main():
    out, series = sys.argv[1], [a.split("=", 1) for a in sys.argv[2:]]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for test, ax in zip(("pp512", "tg64"), axes):
        for label, paths in series:
            pts = {}
            for path in paths.split(","):
                pts.update(rows(path, "base" if label.startswith("base") else "new").get(test, {}))
            if pts:
                d = sorted(pts)
                ax.plot(d, [pts[x] for x in d], marker="o", label=label)
        ax.set_title(f"Llama 8B shape, Q4_K_M: {test}")
        ax.set_xlabel("depth (positions already in the cache)")
        ax.set_ylabel("tokens/s")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle("infer on one H100 (bench/device deep), 2026-12-05")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
