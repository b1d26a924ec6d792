#!/usr/bin/env python3
"""table.py RESULTS: medians per np, size and config of run.sh's lines, the on/base and
off/base ratios, and the same over the fast-phase launches only (hand-over < 150 ns)."""
import collections
import statistics
import sys

rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
data = collections.defaultdict(list)
fast = collections.defaultdict(list)
for r, np, size, cfg, v, h in rows:
    data[(int(np), int(size), cfg)].append(float(v))
    if float(h) < 150:
        fast[(int(np), int(size), cfg)].append(float(v))
rounds = len({r[0] for r in rows})
print("rounds: %d" % rounds)
print("| np | size | base | on | off | on/base | off/base | on/base, fast phase (n) |")
print("|---|---|---|---|---|---|---|---|")
for np in sorted({k[0] for k in data}):
    for size in sorted({k[1] for k in data if k[0] == np}):
        m = {c: statistics.median(data[(np, size, c)]) for c in ("base", "on", "off")}
        fb, fo = fast[(np, size, "base")], fast[(np, size, "on")]
        f = "%.2f (%d, %d)" % (statistics.median(fo) / statistics.median(fb), len(fb), len(fo)) if fb and fo else "-"
        print("| %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %s |" %
              (np, size, m["base"], m["on"], m["off"], m["on"] / m["base"], m["off"] / m["base"], f))
