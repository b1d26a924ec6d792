#!/usr/bin/python3
"""Allreduce benchmark: osu-compat (and the real osu_allreduce if on PATH) with
gpurdma beside Open MPI's default (tuned) and han, in one run.

Prints a latency table with ratios, writes a CSV and, when matplotlib is present,
a PNG (latency and bus bandwidth against size).

  contrib/bench.py --np 2,4 --max 64M --out results/
"""
import argparse
import csv
import os
import re
import shutil
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("GPURDMA_BUILD", os.path.join(TOP, "build"))

CONFIGS = {
    # name: extra mpirun arguments
    "tuned": ["--mca", "coll_gpurdma_priority", "0"],
    "han": ["--mca", "coll_gpurdma_priority", "0", "--mca", "coll_han_priority", "100"],
    "gpurdma": ["--mca", "coll_gpurdma_priority", "100"],
}


def parse_size(text):
    m = re.fullmatch(r"(\d+)([KMG]?)", text.strip().upper())
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {text!r}")
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]


def mpi_env():
    env = dict(os.environ)
    pkglibdir = subprocess.run(["ompi_info", "--parsable", "--path", "pkglibdir"], capture_output=True,
                               text=True, check=True).stdout.strip().split(":", 2)[-1]
    env["OMPI_MCA_mca_base_component_path"] = f"{pkglibdir}:{BUILD}/component"
    if os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    return env


def run_osu(binary, np_, config, lo, hi, iters, warmup, dtype, extra_mpirun, timeout):
    cmd = (["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(np_), "--mca", "pml", "ob1"]
           + CONFIGS[config] + extra_mpirun
           + [binary, "-m", f"{lo}:{hi}", "-i", str(iters), "-x", str(warmup), "-T", dtype, "-f"])
    out = subprocess.run(cmd, env=mpi_env(), capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        sys.stderr.write(out.stdout + out.stderr)
        raise RuntimeError(f"{' '.join(cmd)} exited {out.returncode}")
    rows = {}
    for line in out.stdout.splitlines():
        f = line.split()
        if len(f) >= 2 and f[0].isdigit():
            rows[int(f[0])] = float(f[1])
    return rows, " ".join(cmd)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--np", default="2,4", help="comma-separated rank counts (default 2,4)")
    ap.add_argument("--min", type=parse_size, default=8)
    ap.add_argument("--max", type=parse_size, default=64 << 20)
    ap.add_argument("--split", type=parse_size, default=1 << 20,
                    help="sizes above this run with --large-iters (default 1M)")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--large-iters", type=int, default=10)
    ap.add_argument("--configs", default="tuned,han,gpurdma")
    ap.add_argument("--type", default="mpi_float")
    ap.add_argument("--out", default=os.path.join(TOP, "results"))
    ap.add_argument("--mpirun-arg", action="append", default=[],
                    help="extra mpirun argument (repeatable), e.g. --mpirun-arg=--hostfile=h")
    ap.add_argument("--timeout", type=int, default=900)
    args = ap.parse_args()

    binaries = [("osu-compat", os.path.join(BUILD, "osu-compat", "osu_allreduce"))]
    real = shutil.which("osu_allreduce")
    if real:
        binaries.append(("osu", real))
    configs = args.configs.split(",")
    os.makedirs(args.out, exist_ok=True)
    results = []  # (bench, np, config, size, latency_us)
    commands = []
    for bench, binary in binaries:
        for np_ in [int(x) for x in args.np.split(",")]:
            for config in configs:
                rows = {}
                for lo, hi, iters in ((args.min, min(args.max, args.split), args.iters),
                                      (args.split * 2, args.max, args.large_iters)):
                    if lo > hi:
                        continue
                    r, cmd = run_osu(binary, np_, config, lo, hi, iters, max(1, iters // 10), args.type,
                                     args.mpirun_arg, args.timeout)
                    rows.update(r)
                    commands.append(cmd)
                for size, lat in sorted(rows.items()):
                    results.append((bench, np_, config, size, lat))

    csv_path = os.path.join(args.out, "allreduce.csv")
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["benchmark", "np", "config", "bytes", "latency_us", "busbw_GBps"])
        for bench, np_, config, size, lat in results:
            busbw = size * 2 * (np_ - 1) / np_ / (lat * 1e-6) / 1e9 if lat > 0 else 0
            w.writerow([bench, np_, config, size, f"{lat:.2f}", f"{busbw:.3f}"])

    table = {}
    for bench, np_, config, size, lat in results:
        table.setdefault((bench, np_), {}).setdefault(size, {})[config] = lat
    for (bench, np_), sizes in table.items():
        print(f"\n# {bench} allreduce, {args.type}, np={np_}: average latency (us); ratio = other / gpurdma"
              " (>1: gpurdma faster)")
        head = f"{'bytes':>10}" + "".join(f"{c:>12}" for c in configs)
        others = [c for c in configs if c != "gpurdma"]
        if "gpurdma" in configs:
            head += "".join(f"{c + '/gpurdma':>16}" for c in others)
        print(head)
        for size in sorted(sizes):
            row = sizes[size]
            line = f"{size:>10}" + "".join(f"{row.get(c, float('nan')):>12.2f}" for c in configs)
            if "gpurdma" in configs and row.get("gpurdma"):
                line += "".join(f"{row.get(c, float('nan')) / row['gpurdma']:>16.2f}" for c in others)
            print(line)
    print(f"\nCSV: {csv_path}")
    with open(os.path.join(args.out, "commands.txt"), "w") as f:
        f.write("\n".join(commands) + "\n")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no plot; apt-get install python3-matplotlib)")
        return
    for (bench, np_), sizes in table.items():
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
        for config in configs:
            xs = [s for s in sorted(sizes) if config in sizes[s]]
            lat = [sizes[s][config] for s in xs]
            bw = [s * 2 * (np_ - 1) / np_ / (l * 1e-6) / 1e9 for s, l in zip(xs, lat)]
            a1.plot(xs, lat, marker="o", ms=3, label=config)
            a2.plot(xs, bw, marker="o", ms=3, label=config)
        for a, t in ((a1, "latency (us)"), (a2, "bus bandwidth (GB/s)")):
            a.set_xscale("log", base=2)
            a.set_yscale("log")
            a.set_xlabel("message size (bytes)")
            a.set_ylabel(t)
            a.grid(True, which="both", alpha=0.3)
            a.legend()
        fig.suptitle(f"MPI_Allreduce {args.type}, np={np_} ({bench})")
        png = os.path.join(args.out, f"allreduce-{bench}-np{np_}.png")
        fig.tight_layout()
        fig.savefig(png, dpi=90)
        print(f"plot: {png}")


if __name__ == "__main__":
    main()
