#!/usr/bin/env python3
"""trace-plot.py DIR [OUT.png] [--merged OUT.json] [--last N]

Merges the trace files of one job (coll_gpurdma_trace_dir: gpurdma-trace-*.json, one per
communicator and process) into one Chrome / Perfetto trace (--merged; open it in
ui.perfetto.dev or chrome://tracing), and draws the ranks' calls and stages over time
(OUT.png, with python3-matplotlib): one row per rank and track, calls as outlined bars,
stages filled by kind. --last N draws only the last N calls of the traced communicator.
"""
import glob
import json
import os
import sys

COLORS = {"node reduce-scatter": "#4c72b0", "exchanges (rail)": "#dd8452", "node all-gather": "#55a868",
          "GPU copies": "#c44e52"}


def load(folder):
    events = []
    for path in sorted(glob.glob(os.path.join(folder, "gpurdma-trace-*.json"))):
        events.extend(json.load(open(path))["traceEvents"])
    return events


def main(argv):
    args = list(argv[1:])
    merged = last = None
    if "--merged" in args:
        i = args.index("--merged")
        merged = args[i + 1]
        del args[i:i + 2]
    if "--last" in args:
        i = args.index("--last")
        last = int(args[i + 1])
        del args[i:i + 2]
    if not args:
        print(__doc__.strip())
        return 2
    events = load(args[0])
    if not events:
        print("trace-plot: no gpurdma-trace-*.json in %s" % args[0])
        return 1
    if merged:
        with open(merged, "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ns"}, f)
        print("trace-plot: %d events -> %s" % (len(events), merged))
    if len(args) < 2:
        return 0
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("trace-plot: python3-matplotlib is missing: no picture (the merged trace is written)")
        return 0
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    slices = [e for e in events if e["ph"] == "X"]
    if last:
        seqs = sorted({e["args"]["seq"] for e in slices if e["cat"] == "call"})[-last:]
        slices = [e for e in slices if e["args"]["seq"] in seqs]
    t0 = min(e["ts"] for e in slices)
    rows = sorted({(e["pid"], e["tid"] % 8 if e["cat"] == "stage" else 0) for e in slices})
    row_of = {r: i for i, r in enumerate(rows)}
    fig, ax = plt.subplots(figsize=(11, 0.35 * len(rows) + 1.5))
    for e in slices:
        track = e["tid"] % 8 if e["cat"] == "stage" else 0
        y = row_of[(e["pid"], track)]
        x, w = (e["ts"] - t0) / 1e3, e["dur"] / 1e3
        if e["cat"] == "call":
            ax.barh(y, w, left=x, height=0.8, fill=False, edgecolor="black", linewidth=0.6)
        else:
            kind = names.get((e["pid"], e["tid"]), "").split(": ")[-1]
            ax.barh(y, w, left=x, height=0.8, color=COLORS.get(kind, "#8c8c8c"), edgecolor="none")
    labels = []
    for pid, track in rows:
        kind = "calls" if track == 0 else [v for (p, t), v in names.items() if p == pid and t % 8 == track]
        labels.append("rank %d %s" % (pid, kind if isinstance(kind, str) else kind[0].split(": ")[-1]))
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ms (rank 0's clock; each rank's offset measured at set-up)")
    ax.set_title("gpurdma trace: calls (outlined) and their stages")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLORS.values()]
    ax.legend(handles, COLORS.keys(), fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(args[1], dpi=110)
    print("trace-plot: %d slices -> %s" % (len(slices), args[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
