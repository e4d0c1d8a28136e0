#!/usr/bin/env python3
"""The FFN's sparsity from `infer bench-walk --sparsity N -o json`: left, the share of the
sum of the features' contributions |act| |down| held by the top K% of features, by |gate . x|
(what the walk takes) and by contribution (the best any K can hold), mean over the layers;
right, per layer, the share of features that holds 50%, 90% and 99% of it.
usage: plot-sparsity.py JSON PNG [TITLE]"""
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

d = json.load(open(sys.argv[1]))
title = sys.argv[3] if len(sys.argv) > 3 else f"FFN sparsity, {d['positions']} positions, {d['features']} features a layer"
ks, layers = d["ks"], d["layers"]
L = len(layers)
gate = [100 * sum(l["gate_mass"][i] for l in layers) / L for i in range(len(ks))]
best = [100 * sum(l["contrib_mass"][i] for l in layers) / L for i in range(len(ks))]
fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
a.plot([0] + ks, [0] + best, "o-", label="top K by contribution (the best K)")
a.plot([0] + ks, [0] + gate, "s-", label="top K by |gate . x| (the walk)")
a.plot([0, 100], [0, 100], ":", color="gray", label="no concentration")
a.set_xlabel("K (% of the layer's features)")
a.set_ylabel("share of sum |act| |down| (%)")
a.legend(fontsize=8)
a.grid(alpha=0.3)
for qi, q in enumerate(("50%", "90%", "99%")):
    b.plot(range(L), [100 * l["need"][qi] for l in layers], "o-", label=f"{q} of the sum")
b.set_xlabel("layer")
b.set_ylabel("features needed, largest first (%)")
b.set_ylim(0, 100)
b.legend(fontsize=8)
b.grid(alpha=0.3)
fig.suptitle(title, fontsize=9)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
