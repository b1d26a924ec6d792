#!/usr/bin/env python3
"""Medians of run.sh's output by the machine's phase (line hand-over below or above 150 ns)."""
import collections, statistics, sys
out = sys.argv[1]
def phase(h): return "fast" if float(h) < 150 else "slow"
d = collections.defaultdict(list)
for line in open(out + "/barrier.txt"):
    r, _, np_, cfg, v, h = line.split()
    d[(np_, phase(h), cfg)].append(float(v))
print("osu_barrier (us): median [min-max] (launches)")
for np_ in ("np2", "np4"):
    for ph in ("fast", "slow"):
        cells = []
        for cfg in ("tuned", "han", "gpurdma"):
            v = d.get((np_, ph, cfg), [])
            cells.append("%s %s" % (cfg, "%.2f [%.2f-%.2f] (%d)" % (statistics.median(v), min(v), max(v), len(v)) if v else "-"))
        print(np_, ph, " | ".join(cells))
a = collections.defaultdict(list)
for line in open(out + "/allreduce.txt"):
    r, _, size, cfg, v, h = line.split()
    a[(int(size), phase(h), cfg)].append(float(v))
print("osu_allreduce np2 (us): median (launches)")
cfgs = ("tuned", "han", "gpurdma", "gpurdma-nobarrier")
for ph in ("fast", "slow"):
    for size in sorted({k[0] for k in a}):
        cells = []
        for cfg in cfgs:
            v = a.get((size, ph, cfg), [])
            cells.append("%s %s" % (cfg, "%.2f (%d)" % (statistics.median(v), len(v)) if v else "-"))
        print(ph, size, " | ".join(cells))
