#!/usr/bin/python3
"""Collective benchmark: osu-compat (and the real OSU benchmark if on PATH or given by
--osu-binary) with gpurdma beside Open MPI's default (tuned) and han, in one run.
MPI_Allreduce by default; --coll picks reduce_scatter, allgather, bcast or reduce
(osu-compat's osu_<coll>, OSU 7.4's method and output), a comma-separated list, or all
five ("all"), each with its own tables, CSV and plots.

Prints a latency table with ratios, writes a CSV and, when matplotlib is present,
a PNG (latency and bus bandwidth against size).

  contrib/bench.py --np 2,4 --max 64M --out results/
  contrib/bench.py --np 2,4 --coll all --repeat 3   # allreduce, reduce_scatter, allgather, bcast, reduce
  contrib/bench.py --np 4 --coll bcast,reduce --osu-binary /path/to/omb/c/mpi/collective/blocking
  contrib/bench.py --np 2,4 --cluster 2x2      # also 2 hosts x 2 ranks on the namespace cluster (root)
  contrib/bench.py --repeat 3                  # each sweep 3 times, configs interleaved; medians
  contrib/bench.py --np 2 --scenarios default,busy,bind-none --osu-defaults
  contrib/bench.py --nonblocking --np 2,4 --cluster 2x2   # MPI_Iallreduce: overlap and pure time
  contrib/bench.py --np 2,4 --configs mpich,mpich-gpurdma   # MPICH's allreduce vs gpurdma's under MPICH

Every run uses Open MPI's default launch (`mpirun -np N`, its own binding and mapping,
no pml override), as users run, unless a named scenario says otherwise:
  default     the default launch on an idle machine (the headline)
  busy        the default launch with one CPU-bound process running beside the job
  bind-none   --bind-to none
  bind-core   --bind-to core
  map-socket  --map-by socket
More ranks than CPUs adds --oversubscribe (mpirun refuses otherwise), named in the label.
--osu-defaults leaves the iteration counts and warm-up to the benchmark (OSU's: 1000
and 200, 100 and 10 above 8 KiB) instead of this script's longer runs.

On a shared or virtual machine one sweep can land in a slow spell that the next
config's sweep misses. --repeat runs every config's sweep N times in rounds (tuned,
han, gpurdma, tuned, ...) and reports each size's median, so a spell hits every config
alike; the CSV keeps the spread (min and max).

--nonblocking measures MPI_Iallreduce instead, with osu-compat's osu_iallreduce (OSU's
method: the pure communication time, then a compute phase as long as it between start and
wait; overlap % = 100 * (1 - (overall - compute) / pure)): gpurdma against libnbc (Open
MPI's MPI_Iallreduce: the same launch with gpurdma at priority 0), with gpurdma's blocking
latency (osu_allreduce, same counts) beside the pure time. OSU's iteration counts (1000
and 200, 100 and 10 above 8 KiB; on the cluster, where a call takes milliseconds, 50 and 5
at every size), 8 B - 16 MiB unless --max/--nb-iters say otherwise. Writes
iallreduce.csv, iallreduce-commands.txt and one iallreduce-*.png per run (overlap %, pure
time).

Message sizes are OSU's: the whole vector for allreduce, reduce_scatter (divided among the
ranks), bcast and reduce; what each rank contributes for allgather (its receive buffer
holds size x ranks). Bus bandwidth follows NCCL's convention: size x 2(n-1)/n (allreduce),
(n-1)/n (reduce_scatter), n-1 (allgather), 1 (bcast, reduce), over the latency. The
files of allreduce keep their names (allreduce.csv, commands.txt); the others' are
COLL.csv and COLL-commands.txt; with more than one collective, collectives.csv holds
them all. gpurdma's ratios for a collective it does not implement measure what it
hands the call to (the previous module).

--ab A[,B] is the latency A/B (contrib/latency_ab.py): two builds of gpurdma (build
directories, or git commits built once into OUT/ab-builds/) and tuned in interleaved
launches, each size's median over --repeat launches (default 5), 8 B - 4 KiB with
-i 20000 -x 2000 unless --max/--ab-iters say otherwise; B defaults to this build:
  contrib/bench.py --ab 7a784c1 --np 2 --scenarios default,bind-none,busy
  contrib/bench.py --ab HEAD~3,build --np 2 --osu-binary /path/to/osu_allreduce
"""
import argparse
import contextlib
import csv
import os
import re
import shutil
import statistics
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("GPURDMA_BUILD", os.path.join(TOP, "build"))

# The blocking collectives --coll chooses between (osu-compat's osu_<name>, OSU's too).
COLLS = ("allreduce", "reduce_scatter", "allgather", "bcast", "reduce")


def busbw_factor(coll, np_):
    """Bytes on the bus per byte of OSU's message size (NCCL's convention)."""
    return {"allreduce": 2 * (np_ - 1) / np_, "reduce_scatter": (np_ - 1) / np_, "allgather": np_ - 1.0,
            "bcast": 1.0, "reduce": 1.0}[coll]


def busbw(coll, size, np_, lat_us):
    return size * busbw_factor(coll, np_) / (lat_us * 1e-6) / 1e9 if lat_us > 0 else 0.0


def mpi_name(coll):
    return "MPI_" + coll.capitalize()


CONFIGS = {
    # name: extra mpirun arguments
    "tuned": ["--mca", "coll_gpurdma_priority", "0"],
    "han": ["--mca", "coll_gpurdma_priority", "0", "--mca", "coll_han_priority", "100"],
    "gpurdma": ["--mca", "coll_gpurdma_priority", "100"],
}


# MPICH (built by configure when it finds mpicc.mpich): osu-compat built against MPICH,
# launched by mpiexec.mpich (Hydra's default launch: no binding), with MPICH's own
# allreduce or with gpurdma's through libgpurdma_pmpi.so. name: preload gpurdma?
MPICH_CONFIGS = {
    "mpich": False,
    "mpich-gpurdma": True,
}


# name: (extra mpirun arguments, run a CPU-bound process beside the job?)
SCENARIOS = {
    "default": ([], False),
    "busy": ([], True),
    "bind-none": (["--bind-to", "none"], False),
    "bind-core": (["--bind-to", "core"], False),
    "map-socket": (["--map-by", "socket"], False),
}


BUSY_NOTE = "  # with: sh -c 'while :; do :; done' running"


@contextlib.contextmanager
def busy_beside(scenario):
    """The busy scenario: one CPU-bound process beside the job, as on a node where something
    else is awake, for as long as the block runs. Yields whether there is one."""
    busy = subprocess.Popen(["sh", "-c", "while :; do :; done"]) if SCENARIOS[scenario][1] else None
    try:
        yield busy is not None
    finally:
        if busy:
            busy.kill()
            busy.wait()


def cores():
    """Cores, not hardware threads: Open MPI's default slots per host."""
    try:
        out = subprocess.run(["lscpu", "-p=CORE,SOCKET"], capture_output=True, text=True, check=True).stdout
        return max(1, len({l for l in out.splitlines() if l and not l.startswith("#")}))
    except (OSError, subprocess.CalledProcessError):
        return os.cpu_count()


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


def launcher(np_, cluster, scenario):
    # On the namespace cluster, contrib/cluster.sh adds the launch options (rsh agent,
    # hostfile, interfaces, pml ob1 with btl tcp between hosts).
    if cluster:
        return [os.path.join(TOP, "contrib", "cluster.sh"), "run"]
    return ["mpirun"] + (["--oversubscribe"] if np_ > cores() else []) + SCENARIOS[scenario][0]


def mpich_command(np_, config):
    """The launch of an MPICH config: (command prefix, environment, the benchmark binary:
    osu-compat's osu_allreduce built against MPICH)."""
    env = dict(os.environ)
    if MPICH_CONFIGS[config]:
        env["LD_PRELOAD"] = os.path.join(BUILD, ".libs", "libgpurdma_pmpi.so")
    return ["mpiexec.mpich", "-n", str(np_)], env, os.path.join(BUILD, "osu-compat", "osu_allreduce_mpich")


def run_osu(binary, np_, config, lo, hi, iters, warmup, dtype, extra_mpirun, timeout, cluster=False,
            memcpy_ref=False, scenario="default"):
    counts = [] if iters is None else ["-i", str(iters), "-x", str(warmup)]
    if config in MPICH_CONFIGS:
        prefix, env, binary = mpich_command(np_, config)
    else:
        prefix = launcher(np_, cluster, scenario) + ["-np", str(np_)] + CONFIGS[config] + extra_mpirun
        env = mpi_env()
    cmd = (prefix + [binary, "-m", f"{lo}:{hi}"] + counts + ["-T", dtype, "-f"]
           + (["--memcpy-ref"] if memcpy_ref else []))
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        sys.stderr.write(out.stdout + out.stderr)
        raise RuntimeError(f"{' '.join(cmd)} exited {out.returncode}")
    rows = {}
    memcpy_gbps = None
    for line in out.stdout.splitlines():
        f = line.split()
        if len(f) >= 2 and f[0].isdigit():
            rows[int(f[0])] = float(f[1])
        m = re.match(r"# memcpy reference: (\d+) bytes at ([\d.]+) GB/s", line)
        if m:
            memcpy_gbps = (int(m.group(1)), float(m.group(2)))
    return rows, " ".join(cmd), memcpy_gbps


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--np", default="2,4", help="comma-separated rank counts (default 2,4)")
    ap.add_argument("--scenarios", default="default",
                    help="comma-separated launch scenarios for every --np: " + ", ".join(SCENARIOS) +
                         " (default: default, Open MPI's default launch)")
    ap.add_argument("--osu-defaults", action="store_true",
                    help="OSU's own iteration counts and warm-up (one run per config over all sizes)")
    ap.add_argument("--min", type=parse_size, default=8)
    ap.add_argument("--max", type=parse_size, default=None, help="largest size (default 64M; 16M with --nonblocking)")
    ap.add_argument("--split", type=parse_size, default=1 << 20,
                    help="sizes above this run with --large-iters (default 1M)")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--small-split", type=parse_size, default=64 << 10,
                    help="sizes up to this run with --small-iters on one host (default 64K)")
    ap.add_argument("--small-iters", type=int, default=2000,
                    help="iterations for small sizes on one host, where a call takes microseconds and 200 "
                         "samples left ratios varying from run to run (default 2000); the cluster's calls "
                         "take milliseconds, so it uses --iters throughout")
    ap.add_argument("--large-iters", type=int, default=10)
    ap.add_argument("--configs", default="tuned,han,gpurdma",
                    help="of tuned, han, gpurdma (Open MPI) and mpich, mpich-gpurdma (MPICH, default launch)")
    ap.add_argument("--type", default="mpi_float")
    ap.add_argument("--out", default=os.path.join(TOP, "results"))
    ap.add_argument("--mpirun-arg", action="append", default=[],
                    help="extra mpirun argument (repeatable), e.g. --mpirun-arg=--hostfile=h")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds of every config's sweep, interleaved; each size's median is reported (default 1)")
    ap.add_argument("--nonblocking", action="store_true",
                    help="MPI_Iallreduce with osu_iallreduce (OSU's overlap method): gpurdma against libnbc, with "
                         "gpurdma's blocking latency beside; iallreduce.csv and iallreduce-*.png")
    ap.add_argument("--nb-iters", type=int, default=None,
                    help="with --nonblocking: iterations at every size (warm-up a tenth) instead of OSU's counts "
                         f"({NB_CLUSTER_ITERS} on the cluster)")
    ap.add_argument("--nb-probes", type=int, default=0,
                    help="with --nonblocking: MPI_Test calls in each compute phase (osu_iallreduce -t; default 0, "
                         "OSU's default: none)")
    ap.add_argument("--cluster", default="",
                    help="HOSTSxRANKS, e.g. 2x2: also run on the namespace cluster (contrib/cluster.sh, root)")
    ap.add_argument("--ab", default="",
                    help="A[,B]: latency A/B of two builds (directories or commits; B: this build) beside tuned")
    ap.add_argument("--ab-iters", type=int, default=20000, help="with --ab: iterations per size (default 20000)")
    ap.add_argument("--ab-warmup", type=int, default=2000, help="with --ab: warm-up per size (default 2000)")
    ap.add_argument("--osu-binary", default="",
                    help="with --ab: the osu_allreduce to run (default: one on PATH, else osu-compat's); otherwise "
                         "the real OSU benchmark run beside osu-compat's (default: osu_<coll> on PATH): a binary "
                         "(one collective), or a directory holding osu_<coll> for each")
    ap.add_argument("--real-osu-only", action="store_true",
                    help="run the real OSU benchmark only (--osu-binary or on PATH), not osu-compat beside it: "
                         "half the time")
    ap.add_argument("--coll", default="allreduce",
                    help="the collective(s): " + ", ".join(COLLS) + ", a comma-separated list of them, or all "
                         "(default allreduce)")
    args = ap.parse_args()
    args.colls = list(COLLS) if args.coll == "all" else [c for c in args.coll.split(",") if c]
    for coll in args.colls:
        if coll not in COLLS:
            ap.error(f"unknown collective {coll!r}: one of {', '.join(COLLS)} or all")
    if not args.colls:
        ap.error("--coll wants at least one collective")
    if args.colls != ["allreduce"] and (args.ab or args.nonblocking):
        ap.error("--ab and --nonblocking measure MPI_Allreduce/MPI_Iallreduce only (no --coll)")
    if args.osu_binary and not args.ab and len(args.colls) > 1 and not os.path.isdir(args.osu_binary):
        ap.error("with more than one collective, --osu-binary must be a directory holding osu_<coll>")
    if args.ab:
        if args.max is None:
            args.max = 4096
        if args.repeat == 1:
            args.repeat = 5
    for config in args.configs.split(","):
        if config not in CONFIGS and config not in MPICH_CONFIGS:
            ap.error(f"unknown config {config!r}")
        if config in MPICH_CONFIGS and (args.cluster or args.nonblocking or args.scenarios != "default"):
            ap.error("the MPICH configs run the default launch on this host only (no --cluster, "
                     "--nonblocking or --scenarios)")
    if args.max is None:
        args.max = (16 if args.nonblocking else 64) << 20
    # Runs: (label, ranks, on the cluster?, scenario)
    runs = []
    for scenario in args.scenarios.split(","):
        if scenario not in SCENARIOS:
            ap.error(f"unknown scenario {scenario!r}: one of {', '.join(SCENARIOS)}")
        for n in (int(x) for x in args.np.split(",") if x):
            label = f"np={n}" + ("" if scenario == "default" else f" {scenario}")
            label += " oversubscribed" if n > cores() else ""
            runs.append((label, n, False, scenario))
    cluster_hosts = 0
    if args.cluster:
        m = re.fullmatch(r"(\d+)x(\d+)", args.cluster)
        if not m:
            ap.error("--cluster wants HOSTSxRANKS, e.g. 2x2")
        if os.geteuid() != 0:
            ap.error("--cluster needs root (network namespaces)")
        cluster_hosts, per_host = int(m.group(1)), int(m.group(2))
        os.environ["GPURDMA_CLUSTER_ID"] = os.environ.get("GPURDMA_CLUSTER_ID", "2")
        os.environ["GPURDMA_CLUSTER_SLOTS"] = str(per_host)
        os.environ["GPURDMA_CLUSTER_TIMEOUT"] = str(args.timeout)
        subprocess.run([os.path.join(TOP, "contrib", "cluster.sh"), "up", str(cluster_hosts)], check=True)
        runs.append((f"cluster {cluster_hosts}x{per_host}", cluster_hosts * per_host, True, "default"))
    print(machine(), flush=True)
    try:
        if args.ab:
            import latency_ab  # pylint: disable=import-outside-toplevel
            latency_ab.run(args, runs)
        else:
            if args.nonblocking:
                bench_nonblocking(args, runs)
            else:
                results = []
                for coll in args.colls:
                    results += bench_all(args, runs, coll)
                if len(args.colls) > 1:
                    write_collectives_csv(args, results)
    finally:
        if cluster_hosts:
            subprocess.run([os.path.join(TOP, "contrib", "cluster.sh"), "down"], check=False)
    print("\n" + machine() + " (after the runs)")


def machine():
    """Which machine a table came from: the CPU model, and how long one cache line takes
    to go from CPU 0 to CPU 1 right now (contrib/line-roundtrip). Some VMs switch between
    a fast and a slow phase of it, seconds each (docs/PERFORMANCE.md), so it is printed
    before and after the runs."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    text = f"# machine: {model}, {os.cpu_count()} CPUs"
    probe = os.path.join(BUILD, "contrib", "line-roundtrip")
    if (os.cpu_count() or 1) >= 2 and os.access(probe, os.X_OK):
        try:
            out = subprocess.run([probe, "0", "1", "200000"], capture_output=True, text=True, timeout=60).stdout.split()
            # "... one hand-over 65.4 ns"
            if len(out) >= 2 and out[-1] == "ns":
                text += f"; one cache-line hand-over CPU 0 -> 1 now: {out[-2]} ns (contrib/line-roundtrip 0 1)"
        except (OSError, subprocess.TimeoutExpired):
            pass
    return text


def real_osu(args, coll):
    """The real OSU benchmark for coll: --osu-binary (a binary, or a directory holding
    osu_<coll>), else osu_<coll> on PATH; None if there is none."""
    name = f"osu_{coll}"
    if args.osu_binary:
        path = os.path.join(args.osu_binary, name) if os.path.isdir(args.osu_binary) else args.osu_binary
        if not os.access(path, os.X_OK):
            raise SystemExit(f"--osu-binary: {path} is not an executable")
        return path
    return shutil.which(name)


def bench_all(args, runs, coll="allreduce"):
    """One collective's sweeps: every config interleaved in rounds, each size's median.
    Prints its tables, writes its CSV, commands and plots; returns its results, each
    led by the collective's name."""
    binaries = [("osu-compat", os.path.join(BUILD, "osu-compat", f"osu_{coll}"))]
    real = real_osu(args, coll)
    if real:
        binaries.append(("osu", real))
        if args.real_osu_only:
            binaries = binaries[1:]
    elif args.real_osu_only:
        raise SystemExit(f"--real-osu-only: no osu_{coll} (give --osu-binary)")
    all_configs = args.configs.split(",")
    if coll != "allreduce" and any(c in MPICH_CONFIGS for c in all_configs):
        # osu-compat is built against MPICH for allreduce only, and libgpurdma_pmpi.so
        # replaces MPI_Allreduce only.
        print(f"# {coll}: the MPICH configs are allreduce only; skipped")
        all_configs = [c for c in all_configs if c not in MPICH_CONFIGS]
        if not all_configs:
            return []
    os.makedirs(args.out, exist_ok=True)
    results = []  # (bench, label, np, config, size, median latency_us, min, max)
    commands = []
    memcpy = {}  # label -> (bytes, median GB/s), measured by osu-compat's rank 0 in the same run
    for bench, binary in binaries:
        # The real OSU benchmark is Open MPI's: MPICH runs take osu-compat's MPICH build.
        configs = [c for c in all_configs if bench == "osu-compat" or c not in MPICH_CONFIGS]
        for label, np_, on_cluster, scenario in runs:
            samples = {c: {} for c in configs}  # config -> size -> [latency per round]
            copies = []
            small_iters = args.iters if on_cluster else args.small_iters
            bands = ((args.min, min(args.max, args.small_split), small_iters),
                     (max(args.min, args.small_split * 2), min(args.max, args.split), args.iters),
                     (args.split * 2, args.max, args.large_iters))
            if args.osu_defaults:
                bands = ((args.min, args.max, None),)
            with busy_beside(scenario) as busy:
                for _ in range(max(1, args.repeat)):
                    for config in configs:
                        for lo, hi, iters in bands:
                            if lo > hi:
                                continue
                            ref = (bench == "osu-compat" and config == configs[0]
                                   and (lo > args.split or iters is None))
                            r, cmd, mc = run_osu(binary, np_, config, lo, hi, iters,
                                                 None if iters is None else max(1, iters // 10), args.type,
                                                 args.mpirun_arg, args.timeout, on_cluster, ref, scenario)
                            if mc:
                                copies.append(mc)
                            for size, lat in r.items():
                                samples[config].setdefault(size, []).append(lat)
                            if busy:
                                cmd += BUSY_NOTE
                            if cmd not in commands:
                                commands.append(cmd)
            if copies:
                memcpy[label] = (copies[0][0], statistics.median(gbps for _, gbps in copies))
            for config in configs:
                for size, lats in sorted(samples[config].items()):
                    results.append((bench, label, np_, config, size, statistics.median(lats), min(lats), max(lats)))

    csv_path = os.path.join(args.out, f"{coll}.csv")
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["benchmark", "run", "np", "config", "bytes", "latency_us", "busbw_GBps", "latency_min_us",
                    "latency_max_us", "rounds"])
        for bench, label, np_, config, size, lat, lo, hi in results:
            w.writerow([bench, label, np_, config, size, f"{lat:.2f}", f"{busbw(coll, size, np_, lat):.3f}",
                        f"{lo:.2f}", f"{hi:.2f}", max(1, args.repeat)])

    configs = all_configs
    # Ratios against gpurdma under the same MPI: Open MPI's, else MPICH's.
    base = "gpurdma" if "gpurdma" in configs else "mpich-gpurdma" if "mpich-gpurdma" in configs else None
    table = {}
    for bench, label, np_, config, size, lat, _, _ in results:
        table.setdefault((bench, label, np_), {}).setdefault(size, {})[config] = lat
    for (bench, label, np_), sizes in table.items():
        rounds = f", median of {args.repeat} rounds" if args.repeat > 1 else ""
        ratios = f"; ratio = other / {base} (>1: {base} faster)" if base else ""
        print(f"\n# {bench} {coll}, {args.type}, {label}: average latency (us){rounds}{ratios}")
        shown = [c for c in configs if any(c in row for row in sizes.values())]
        width = {c: max(12, len(c) + 2) for c in shown}
        others = [c for c in shown if c != base]
        ratio_width = {c: max(16, len(c) + len(str(base)) + 3) for c in others}
        head = f"{'bytes':>10}" + "".join(f"{c:>{width[c]}}" for c in shown)
        if base in shown:
            head += "".join(f"{c + '/' + base:>{ratio_width[c]}}" for c in others)
        print(head)
        for size in sorted(sizes):
            row = sizes[size]
            line = f"{size:>10}" + "".join(f"{row.get(c, float('nan')):>{width[c]}.2f}" for c in shown)
            if base in shown and row.get(base):
                line += "".join(f"{row.get(c, float('nan')) / row[base]:>{ratio_width[c]}.2f}" for c in others)
            print(line)
        if label in memcpy and base in shown:
            mbytes, gbps = memcpy[label]
            at = 16 << 20
            if at in sizes and sizes[at].get(base):
                bw = busbw(coll, at, np_, sizes[at][base])
                print(f"# {base} bus bandwidth at 16 MiB: {bw:.2f} GB/s; memcpy ({mbytes} bytes, rank 0, "
                      f"same run{', median' if args.repeat > 1 else ''}): {gbps:.2f} GB/s; ratio {bw / gbps:.2f}")
    print(f"\nCSV: {csv_path}")
    commands_name = "commands.txt" if coll == "allreduce" else f"{coll}-commands.txt"
    with open(os.path.join(args.out, commands_name), "w") as f:
        f.write("\n".join(commands) + "\n")
    plot_all(args, coll, configs, table)
    return [(coll,) + r for r in results]


def plot_all(args, coll, configs, table):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no plot; apt-get install python3-matplotlib)")
        return
    for (bench, label, np_), sizes in table.items():
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
        for config in configs:
            xs = [s for s in sorted(sizes) if config in sizes[s]]
            lat = [sizes[s][config] for s in xs]
            bw = [busbw(coll, s, np_, l) for s, l in zip(xs, lat)]
            a1.plot(xs, lat, marker="o", ms=3, label=config)
            a2.plot(xs, bw, marker="o", ms=3, label=config)
        for a, t in ((a1, "latency (us)"), (a2, "bus bandwidth (GB/s)")):
            a.set_xscale("log", base=2)
            a.set_yscale("log")
            a.set_xlabel("message size (bytes)" + (" per rank" if coll == "allgather" else ""))
            a.set_ylabel(t)
            a.grid(True, which="both", alpha=0.3)
            a.legend()
        fig.suptitle(f"{mpi_name(coll)} {args.type}, {label} ({bench})")
        png = os.path.join(args.out, f"{coll}-{bench}-{label.replace('=', '').replace(' ', '-')}.png")
        fig.tight_layout()
        fig.savefig(png, dpi=90)
        plt.close(fig)
        print(f"plot: {png}")


def write_collectives_csv(args, results):
    """--coll with more than one collective: every collective's rows in one CSV."""
    path = os.path.join(args.out, "collectives.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["collective", "benchmark", "run", "np", "config", "bytes", "latency_us", "busbw_GBps",
                    "latency_min_us", "latency_max_us", "rounds"])
        for coll, bench, label, np_, config, size, lat, lo, hi in results:
            w.writerow([coll, bench, label, np_, config, size, f"{lat:.2f}", f"{busbw(coll, size, np_, lat):.3f}",
                        f"{lo:.2f}", f"{hi:.2f}", max(1, args.repeat)])
    print(f"\nCSV (all collectives): {path}")


# --nonblocking: osu_iallreduce's columns (OSU's names, all there with -f) -> CSV fields.
NB_COLUMNS = {"Overall(us)": "overall_us", "Compute(us)": "compute_us", "Coll. Init(us)": "init_us",
              "MPI_Test(us)": "test_us", "MPI_Wait(us)": "wait_us", "Pure Comm.(us)": "pure_us",
              "Min Comm.(us)": "pure_min_us", "Max Comm.(us)": "pure_max_us", "Overlap(%)": "overlap_pct"}
# Open MPI's MPI_Iallreduce is libnbc's: the launch without gpurdma (priority 0), as "tuned" above.
NB_CONFIGS = {"libnbc": CONFIGS["tuned"], "gpurdma": CONFIGS["gpurdma"]}
BLOCKING = "gpurdma-blocking"  # gpurdma's MPI_Allreduce, for the pure time's target
NB_TARGET_FROM = 64 << 10  # the targets hold from 64 KiB
NB_PURE_SLACK = 1.10  # gpurdma's pure time: at most its blocking latency + 10%
NB_CLUSTER_ITERS = 50  # iterations at every size on the namespace cluster (warm-up a tenth)


def osu_table(stdout):
    """An OSU-format output's rows by size, each {column name: value}, named by its '# Size' line."""
    names, rows = None, {}
    for line in stdout.splitlines():
        if line.startswith("# Size"):
            names = re.split(r"\s{2,}", line.strip())[1:]
        elif names and line[:1].isdigit():
            f = line.split()
            rows[int(f[0])] = {n: float(v) for n, v in zip(names, f[1:]) if re.fullmatch(r"[\d.]+", v)}
    return rows


def run_table(cmd, timeout):
    out = subprocess.run(cmd, env=mpi_env(), capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        sys.stderr.write(out.stdout + out.stderr)
        raise RuntimeError(f"{' '.join(cmd)} exited {out.returncode}")
    return osu_table(out.stdout)


def nb_counts(args, on_cluster):
    """osu_iallreduce's -i/-x: none (OSU's own counts) on one host; on the cluster, where a
    call takes milliseconds, NB_CLUSTER_ITERS at every size; --nb-iters everywhere."""
    iters = args.nb_iters or (NB_CLUSTER_ITERS if on_cluster else None)
    return [] if iters is None else ["-i", str(iters), "-x", str(max(1, iters // 10))]


def nb_probes(args):
    """osu_iallreduce's -t for --nb-probes (its blocking reference takes none)."""
    return ["-t", str(args.nb_probes)] if args.nb_probes else []


def bench_nonblocking(args, runs):
    binaries = [("osu-compat", os.path.join(BUILD, "osu-compat", "osu_iallreduce"))]
    real = shutil.which("osu_iallreduce")
    if real:
        binaries.append(("osu", real))
    blocking = os.path.join(BUILD, "osu-compat", "osu_allreduce")
    os.makedirs(args.out, exist_ok=True)
    samples = {}  # (bench, label, np) -> size -> config -> [row per round]
    commands = []
    for bench, binary in binaries:
        for label, np_, on_cluster, scenario in runs:
            key = (bench, label, np_)
            launch = launcher(np_, on_cluster, scenario) + ["-np", str(np_)]
            sweep = ["-m", f"{args.min}:{args.max}", "-T", args.type, "-f"] + nb_counts(args, on_cluster)
            jobs = [(c, launch + mca + args.mpirun_arg + [binary] + sweep + nb_probes(args))
                    for c, mca in NB_CONFIGS.items()]
            jobs.append((BLOCKING, launch + CONFIGS["gpurdma"] + args.mpirun_arg + [blocking] + sweep))
            with busy_beside(scenario) as busy:
                for _ in range(max(1, args.repeat)):
                    for config, cmd in jobs:  # interleaved rounds, as the blocking sweeps
                        for size, row in run_table(cmd, args.timeout).items():
                            samples.setdefault(key, {}).setdefault(size, {}).setdefault(config, []).append(row)
                        line = " ".join(cmd) + (BUSY_NOTE if busy else "")
                        if line not in commands:
                            commands.append(line)
    # Each size's median over the rounds, column by column.
    table = {key: {size: {c: {n: statistics.median(r[n] for r in rows) for n in rows[0]}
                          for c, rows in configs.items()}
                   for size, configs in sizes.items()}
             for key, sizes in samples.items()}
    write_nonblocking_csv(args, samples, table)
    with open(os.path.join(args.out, "iallreduce-commands.txt"), "w") as f:
        f.write("\n".join(commands) + "\n")
    print_nonblocking(args, table)
    plot_nonblocking(args, table)


def write_nonblocking_csv(args, samples, table):
    path = os.path.join(args.out, "iallreduce.csv")
    fields = list(NB_COLUMNS.values())
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["benchmark", "run", "np", "config", "bytes"] + fields
                   + ["overlap_pct_min", "overlap_pct_max", "gpurdma_blocking_us", "test_calls", "rounds"])
        for (bench, label, np_), sizes in table.items():
            for size in sorted(sizes):
                blocking = sizes[size].get(BLOCKING, {}).get("Avg Latency(us)")
                for config in NB_CONFIGS:
                    row = sizes[size].get(config)
                    if row is None:
                        continue
                    overlaps = [r["Overlap(%)"] for r in samples[(bench, label, np_)][size][config]]
                    w.writerow([bench, label, np_, config, size]
                               + [f"{row[n]:.2f}" if n in row else "" for n in NB_COLUMNS]
                               + [f"{min(overlaps):.2f}", f"{max(overlaps):.2f}",
                                  "" if blocking is None else f"{blocking:.2f}", args.nb_probes, max(1, args.repeat)])
    print(f"\nCSV: {path}")


def nb_target(size, row):
    """The issue's targets at one size: '' below 64 KiB, else 'met' or what is missed."""
    if size < NB_TARGET_FROM or not {"gpurdma", "libnbc", BLOCKING} <= row.keys():
        return ""
    missed = []
    if row["gpurdma"]["Pure Comm.(us)"] > NB_PURE_SLACK * row[BLOCKING]["Avg Latency(us)"]:
        missed.append("pure > blocking+10%")
    if row["gpurdma"]["Overlap(%)"] < row["libnbc"]["Overlap(%)"]:
        missed.append("overlap < libnbc")
    return ", ".join(missed) or "met"


def print_nonblocking(args, table):
    nan = float("nan")
    for (bench, label, _), sizes in table.items():
        rounds = f", median of {args.repeat} rounds" if args.repeat > 1 else ""
        probes = f", {args.nb_probes} MPI_Test calls in each compute phase" if args.nb_probes else ""
        print(f"\n# {bench} iallreduce, {args.type}, {label}: OSU's method{probes}, times in us{rounds}")
        print(f"# target from {NB_TARGET_FROM >> 10} KiB: gpurdma pure <= {NB_PURE_SLACK:.2f} x gpurdma blocking,"
              " gpurdma overlap >= libnbc's")
        print(f"{'bytes':>10}{'gpurdma pure':>14}{'libnbc pure':>13}{'gpurdma blk':>13}{'pure/blk':>10}"
              f"{'gpurdma ovl%':>14}{'libnbc ovl%':>13}  target")
        for size in sorted(sizes):
            row = sizes[size]
            g, l, b = (row.get(c, {}) for c in ("gpurdma", "libnbc", BLOCKING))
            pure, blk = g.get("Pure Comm.(us)", nan), b.get("Avg Latency(us)", nan)
            print(f"{size:>10}{pure:>14.2f}{l.get('Pure Comm.(us)', nan):>13.2f}{blk:>13.2f}"
                  f"{pure / blk if blk else nan:>10.2f}{g.get('Overlap(%)', nan):>14.2f}"
                  f"{l.get('Overlap(%)', nan):>13.2f}  {nb_target(size, row)}")


def plot_nonblocking(args, table):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no plot; apt-get install python3-matplotlib)")
        return
    for (bench, label, _), sizes in table.items():
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))

        def series(config, column):
            xs = [s for s in sorted(sizes) if column in sizes[s].get(config, {})]
            return xs, [sizes[s][config][column] for s in xs]

        for config in NB_CONFIGS:
            a1.plot(*series(config, "Overlap(%)"), marker="o", ms=3, label=config)
            a2.plot(*series(config, "Pure Comm.(us)"), marker="o", ms=3, label=f"{config} pure (Iallreduce+Wait)")
        xs, blk = series(BLOCKING, "Avg Latency(us)")
        a2.plot(xs, blk, marker="s", ms=3, color="black", label="gpurdma blocking (Allreduce)")
        a2.plot(xs, [NB_PURE_SLACK * v for v in blk], ls="--", color="grey", label="blocking + 10% (target)")
        a1.set_ylim(-2, 102)
        a1.set_ylabel("overlap (%)")
        a2.set_yscale("log")
        a2.set_ylabel("time (us)")
        for a in (a1, a2):
            a.axvline(NB_TARGET_FROM, ls=":", color="grey")
            a.set_xscale("log", base=2)
            a.set_xlabel("message size (bytes)")
            a.grid(True, which="both", alpha=0.3)
            a.legend(fontsize=8)
        probes = f", -t {args.nb_probes}" if args.nb_probes else ""
        fig.suptitle(f"MPI_Iallreduce {args.type}, {label} ({bench}, OSU's method{probes})")
        png = os.path.join(args.out, f"iallreduce-{bench}-{label.replace('=', '').replace(' ', '-')}.png")
        fig.tight_layout()
        fig.savefig(png, dpi=90)
        print(f"plot: {png}")


if __name__ == "__main__":
    main()
