#!/usr/bin/env python3
"""infer / llama.cpp on the GPU, one bar per shape and test, from a bench/data/gpu-*.csv
(columns shape,test,infer,llama; '#' lines are comments).  usage: plot-gpu.py CSV PNG"""
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

src, png = sys.argv[1], sys.argv[2]
rows = [r for r in csv.DictReader(l for l in open(src) if not l.startswith("#"))]
title = next((l[2:].strip() for l in open(src) if l.startswith("#")), src)
labels = [f"{r['shape']}\n{r['test']}" for r in rows]
ratio = [float(r["infer"]) / float(r["llama"]) for r in rows]
fig, ax = plt.subplots(figsize=(max(10, 0.95 * len(rows)), 4))
bars = ax.bar(range(len(rows)), ratio, color=["#3a7" if x >= 1 else "#c55" for x in ratio])
ax.axhline(1.0, color="black", linewidth=0.8)
for b, x in zip(bars, ratio):
    ax.text(b.get_x() + b.get_width() / 2, x + 0.02, f"{x:.2f}x", ha="center", fontsize=8)
ax.set_xticks(range(len(rows)), labels, fontsize=7)
ax.set_ylabel("infer / llama.cpp (t/s)")
ax.set_title(title, fontsize=8)
fig.tight_layout()
fig.savefig(png, dpi=120)
