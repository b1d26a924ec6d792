# Creation + first 4 KiB allreduce per communicator (median over 6 interleaved launches
# of 50 communicators each; the slowest rank per communicator): setup-bench-runs.txt.
import collections, re, statistics
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

d = collections.defaultdict(list)
for line in open("setup-bench-runs.txt"):
    m = re.match(r"(\S+) (\S+) (\S+) r\d+: comm-setup: .*median ([\d.]+) ms", line)
    if m:
        d[(m.group(1), m.group(2), m.group(3))].append(float(m.group(4)))
scen = [(s, h) for s in ("np2", "np4", "np4ln2") for h in ("dup", "split")]
cfgs = [("tuned", "tuned"), ("han", "han"), ("A", "gpurdma before"), ("B", "gpurdma now")]
fig, ax = plt.subplots(figsize=(9, 4))
w = 0.2
for i, (c, label) in enumerate(cfgs):
    ys = [statistics.median(d[(s, h, c)]) * 1e3 for s, h in scen]
    ax.bar([x + (i - 1.5) * w for x in range(len(scen))], ys, w, label=label)
ax.set_xticks(range(len(scen)))
ax.set_xticklabels([f"{s} {h}" for s, h in scen])
ax.set_yscale("log")
ax.set_ylabel("create + first 4 KiB allreduce (us)")
ax.set_title("One communicator's cost, AMD EPYC 2 cores (np4ln2: logical nodes 2)")
ax.legend()
fig.tight_layout()
fig.savefig("setup-time.png", dpi=110)
