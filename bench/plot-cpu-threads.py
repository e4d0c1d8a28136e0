#!/usr/bin/env python3
"""t/s against threads, infer and llama.cpp, from bench/compare-llamacpp output
(the tables `bench/device cpu` collects).
usage: bench/plot-cpu-threads.py MATRIX.txt OUT.png [TITLE]"""
import re, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

def parse(path):
    data, cur = {}, None  # (model, test) -> engine -> {threads: t/s}
    for line in open(path):
        m = re.match(r"(synth-\S+|\S+\.gguf) \(.*?, (\d+) threads", line)
        if m:
            cur = (m.group(1).replace("synth-", "").replace(".gguf", ""), int(m.group(2)))
            continue
        m = re.match(r"\| (infer|llama\.cpp) \| (\S+)( @ d\d+)? \| ([\d.]+)", line)
        if m and cur and not m.group(3):
            data.setdefault((cur[0], m.group(2)), {}).setdefault(m.group(1), {})[cur[1]] = float(m.group(4))
    return data

def main():
    data = parse(sys.argv[1])
    keys = sorted(data)
    fig, axes = plt.subplots(2, (len(keys) + 1) // 2, figsize=(4 * ((len(keys) + 1) // 2), 7), squeeze=False)
    for ax, key in zip(axes.T.flat, keys):
        for eng, style in (("llama.cpp", "o--"), ("infer", "s-")):
            pts = sorted(data[key].get(eng, {}).items())
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=eng)
        ax.set_xscale("log", base=2)
        ax.set_xticks([1, 2, 4, 8, 16])
        ax.set_xticklabels(["1", "2", "4", "8", "16"])
        ax.set_title(f"{key[0]} {key[1]}", fontsize=10)
        ax.set_xlabel("threads")
        ax.set_ylabel("t/s")
        ax.legend(fontsize=8)
    for ax in axes.T.flat[len(keys):]:
        ax.axis("off")
    if len(sys.argv) > 3:
        fig.suptitle(sys.argv[3], fontsize=11)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=90)

main()
