#!/usr/bin/env python3
"""Kernel times from an `ncu --metrics gpu__time_duration.sum` log: each kernel (name and
grid) with its count, total and mean microseconds, largest total first.  usage: ncu-summary.py LOG [N]"""
import collections, re, sys

tot, cnt, name, allt = collections.defaultdict(float), collections.Counter(), None, 0.0
for line in open(sys.argv[1], errors="replace"):
    # (template kernels print as "void k_mv<8, 8>(mv_desc, const unsigned char *) (432, 1, 1)x(128, 1, 1), ...")
    m = re.match(r"\s+(?:void )?([\w:]+(?:<[^>]*>)?)(?:\(.*?\))? \((\d+), (\d+), (\d+)\)x\((\d+), (\d+), (\d+)\)", line)
    if m:
        name = f"{m.group(1)} grid {m.group(2)}x{m.group(3)}"
    m2 = re.match(r"\s+gpu__time_duration.sum\s+(\S+)\s+([\d.,]+)", line)
    if m2 and name:
        v = float(m2.group(2).replace(",", "")) * {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1, "us": 1, "msecond": 1e3, "ms": 1e3, "s": 1e6, "second": 1e6}.get(m2.group(1), 1)
        tot[name] += v; cnt[name] += 1; allt += v; name = None
print(f"kernels {sum(cnt.values())}, total {allt:.0f} us")
for k in sorted(tot, key=lambda k: -tot[k])[: int(sys.argv[2]) if len(sys.argv) > 2 else 25]:
    print(f"{tot[k]:9.1f} us {cnt[k]:5d} x {tot[k] / cnt[k]:7.2f} us  {k}")
