#!/usr/bin/env python3
"""Kernel times from an `ncu --metrics gpu__time_duration.sum[,dram__bytes_read.sum]` log: each kernel (name and
grid) with its count, total and mean microseconds (and mean DRAM bytes read with the rate they make), largest total
first.  usage: ncu-summary.py LOG [N]"""
import collections, re, sys

tot, cnt, byt, name, allt = collections.defaultdict(float), collections.Counter(), collections.defaultdict(float), None, 0.0
unit_t = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1, "us": 1, "msecond": 1e3, "ms": 1e3, "s": 1e6, "second": 1e6}
unit_b = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9, "B": 1}
for line in open(sys.argv[1], errors="replace"):
    # (template kernels print as "void k_mv<8, 8>(mv_desc, const unsigned char *) (432, 1, 1)x(128, 1, 1), ...")
    m = re.match(r"\s+(?:void )?([\w:]+(?:<[^>]*>)?)(?:\(.*?\))? \((\d+), (\d+), (\d+)\)x\((\d+), (\d+), (\d+)\)", line)
    if m:
        name = f"{m.group(1)} grid {m.group(2)}x{m.group(3)}"
    m3 = re.match(r"\s+dram__bytes_read.sum\s+(\S+)\s+([\d.,]+)", line)
    if m3 and name:
        byt[name] += float(m3.group(2).replace(",", "")) * unit_b.get(m3.group(1), 1)
    m2 = re.match(r"\s+gpu__time_duration.sum\s+(\S+)\s+([\d.,]+)", line)
    if m2 and name:
        v = float(m2.group(2).replace(",", "")) * unit_t.get(m2.group(1), 1)
        tot[name] += v; cnt[name] += 1; allt += v
print(f"kernels {sum(cnt.values())}, total {allt:.0f} us")
for k in sorted(tot, key=lambda k: -tot[k])[: int(sys.argv[2]) if len(sys.argv) > 2 else 25]:
    b = f"  {byt[k] / cnt[k] / 1e6:8.2f} MB {byt[k] / tot[k] / 1e3:6.0f} GB/s" if byt[k] else ""
    print(f"{tot[k]:9.1f} us {cnt[k]:5d} x {tot[k] / cnt[k]:7.2f} us{b}  {k}")
