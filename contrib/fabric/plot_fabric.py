#!/usr/bin/env python3
"""Plots a gpurdma-fabric run: DIR/sweep.csv -> DIR/sweep.png.

Left: completion time over the ideal (2(n-1)/n x slice / rail bandwidth), one line per
rail setting and in-flight limit, against the message size (a `plan` of several sizes)
or the chunk size (a `sweep`). Middle: PFC pause time (all ports) the same way. Right
(with DIR/steps.csv): when each schedule step of the recommended (sweep) or last size's
best (plan) setting ended on its last rank, beside the ideal's pace.
Usage: plot_fabric.py DIR [TITLE]
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    out = sys.argv[1]
    title = sys.argv[2] if len(sys.argv) > 2 else ""
    rows = []
    with open(os.path.join(out, "sweep.csv")) as f:
        lines = [line for line in f if not line.startswith("#")]
    for r in csv.DictReader(lines):
        if r["ok"] == "1":
            rows.append(r)
    by_size = len({r["size"] for r in rows}) > 1
    series = {}
    for r in rows:
        key = (r["algorithm"], int(r["slots"]))
        x = int(r["size"]) if by_size else int(r["chunk"])
        series.setdefault(key, []).append((x, float(r["time_us"]) / float(r["ideal_us"]), float(r["paused_us"])))
    steps_csv = os.path.join(out, "steps.csv")
    has_steps = os.path.exists(steps_csv)
    fig, axes = plt.subplots(1, 3 if has_steps else 2, figsize=(18 if has_steps else 12, 4.8))
    left, right = axes[0], axes[1]
    for (algorithm, slots), pts in sorted(series.items()):
        pts.sort()
        chunks = [p[0] / 1024 for p in pts]
        style = "-" if algorithm == "hier" else "--" if algorithm.startswith("ring") else ":"
        label = f"{algorithm}, {slots} in flight"
        left.plot(chunks, [p[1] for p in pts], style, marker="o", label=label)
        right.plot(chunks, [p[2] for p in pts], style, marker="o", label=label)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (KiB)" if by_size else "chunk (KiB)")
        ax.grid(True, alpha=0.3)
    left.set_yscale("log")
    left.set_ylabel("completion time / ideal")
    left.axhline(1.0, color="gray", linewidth=0.8)
    right.set_ylabel("PFC pause time, all ports (us)")
    left.legend(fontsize=7)
    if has_steps:
        with open(steps_csv) as f:
            steps = [(int(r["step"]), float(r["done_us"])) for r in csv.DictReader(f)]
        last = max(int(r["size"]) for r in rows)
        best = min((r for r in rows if int(r["size"]) == last), key=lambda r: float(r["time_us"]))
        ideal = float(best["ideal_us"])
        ax = axes[2]
        ax.plot([s[0] for s in steps], [s[1] for s in steps], label="model: step done (last rank)")
        ax.plot([0, len(steps) - 1], [0, ideal], "--", color="gray", label="ideal pace")
        ax.set_xlabel("schedule step (recommended setting)")
        ax.set_ylabel("time (us)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=8)
    fig.tight_layout()
    png = os.path.join(out, "sweep.png")
    fig.savefig(png, dpi=90)
    print(f"plot: {png}")


if __name__ == "__main__":
    main()
