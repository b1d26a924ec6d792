#!/usr/bin/python3
"""osu_allreduce np 2 in the fast phase: tuned, han, gpurdma with and without its barrier."""
import collections, statistics, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
out = sys.argv[1]
a = collections.defaultdict(list)
for line in open(out + "/allreduce.txt"):
    r, _, size, cfg, v, h = line.split()
    if float(h) < 150:
        a[(int(size), cfg)].append(float(v))
sizes = sorted({k[0] for k in a})
cfgs = ("tuned", "han", "gpurdma", "gpurdma-nobarrier")
fig, ax = plt.subplots(figsize=(7, 3.5))
w = 0.2
for i, cfg in enumerate(cfgs):
    ax.bar([x + (i - 1.5) * w for x in range(len(sizes))], [statistics.median(a[(s, cfg)]) for s in sizes], w, label=cfg)
ax.set_xticks(range(len(sizes)))
ax.set_xticklabels([str(s) for s in sizes])
ax.set_xlabel("bytes")
ax.set_ylabel("us (median of launches)")
ax.set_title("osu_allreduce np 2, fast phase (AMD EPYC VM, 2 cores)")
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(out + "/osu_allreduce_np2.png", dpi=100)
