"""Latency A/B for contrib/bench.py --ab: two builds of gpurdma and Open MPI's tuned in
the same interleaved launches, so that a change to the small-message path is judged
against the build before it in one command.

A build is given as
  - a build directory (holding component/mca_coll_gpurdma.so or .libs/mca_coll_gpurdma.so),
  - a directory holding mca_coll_gpurdma.so, or
  - a git commit of this repository, built once (autoreconf, configure, make) into
    OUT/ab-builds/<commit> and kept there for the next comparison.

Every round launches each config once over all sizes (the order rotates from round to
round, so a slow spell of the machine does not always hit the same config); each
size's median over the rounds is reported with the ratios, and the spread of the
launches (min and max of the per-launch values), since on a virtual machine one launch
can land in a slow or fast phase that the next misses.
"""
import csv
import os
import shutil
import statistics
import subprocess
import sys

import bench

COMPONENT = "mca_coll_gpurdma.so"


def component_dir(spec, out):
    """(label, directory holding the component) for a build directory, a component
    directory or a commit (built on first use)."""
    for sub in ("component", ".libs", ""):
        d = os.path.join(spec, sub)
        if os.path.isfile(os.path.join(d, COMPONENT)):
            return os.path.basename(os.path.normpath(spec)) or spec, os.path.abspath(d)
    sha = subprocess.run(["git", "-C", bench.TOP, "rev-parse", "--verify", "--quiet", spec + "^{commit}"],
                         capture_output=True, text=True).stdout.strip()
    if not sha:
        raise SystemExit(f"--ab: {spec!r} is neither a build (no {COMPONENT} under it) nor a commit")
    return spec if len(spec) < 12 else sha[:10], build_commit(sha, out)


def build_commit(sha, out):
    """The commit's component, built from its own sources into OUT/ab-builds/<sha>."""
    root = os.path.abspath(os.path.join(out, "ab-builds", sha))
    built = os.path.join(root, "build", "component")
    if os.path.isfile(os.path.join(built, COMPONENT)):
        return built
    print(f"== building {sha[:10]} in {root} (once)", flush=True)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "build"))
    archive = subprocess.Popen(["git", "-C", bench.TOP, "archive", sha], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", root], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise SystemExit(f"git archive {sha} failed")
    build = os.path.join(root, "build")
    for cmd, cwd in ((["autoreconf", "-fi"], root), ([os.path.join(root, "configure"), "-q"], build),
                     (["make", f"-j{os.cpu_count()}"], build)):
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        if done.returncode != 0:
            sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
            raise SystemExit(f"{sha[:10]}: {' '.join(cmd)} failed in {cwd}")
    if not os.path.isfile(os.path.join(built, COMPONENT)):
        raise SystemExit(f"{sha[:10]}: built, but no {built}/{COMPONENT}")
    return built


def launch(binary, np_, on_cluster, scenario, component, priority, args):
    """One launch over all sizes: {size: average latency (us)} and the command. The
    component's directory goes on the command line, which takes precedence over the
    environment's path (bench.mpi_env's: this build's)."""
    pkglibdir = bench.mpi_env()["OMPI_MCA_mca_base_component_path"].split(":")[0]
    rows, cmd, _ = bench.run_osu(binary, np_, "gpurdma" if priority else "tuned", args.min, args.max, args.ab_iters,
                                 args.ab_warmup, args.type,
                                 ["--mca", "mca_base_component_path", f"{pkglibdir}:{component}"] + args.mpirun_arg,
                                 args.timeout, on_cluster, scenario=scenario)
    return rows, cmd


def run(args, runs):
    specs = args.ab.split(",")
    if len(specs) == 1:
        specs.append(bench.BUILD)
    if len(specs) != 2:
        raise SystemExit("--ab wants A[,B]: two builds or commits (B defaults to this build)")
    (name_a, dir_a), (name_b, dir_b) = (component_dir(s, args.out) for s in specs)
    if name_a == name_b:
        name_a, name_b = f"A:{name_a}", f"B:{name_b}"
    configs = [(name_a, dir_a, 100), (name_b, dir_b, 100), ("tuned", dir_b, 0)]
    binary = args.osu_binary or shutil.which("osu_allreduce") or os.path.join(bench.BUILD, "osu-compat",
                                                                              "osu_allreduce")
    os.makedirs(args.out, exist_ok=True)
    print(f"# A = {name_a} ({dir_a})\n# B = {name_b} ({dir_b})\n# benchmark: {binary}, -i {args.ab_iters} "
          f"-x {args.ab_warmup}, {max(1, args.repeat)} rounds")
    samples = {}  # (label, np) -> config -> size -> [latency per launch]
    commands = []
    rounds = max(1, args.repeat)
    for label, np_, on_cluster, scenario in runs:
        with bench.busy_beside(scenario) as busy:
            for k in range(rounds):
                for name, component, priority in configs[k % 3:] + configs[:k % 3]:
                    rows, cmd = launch(binary, np_, on_cluster, scenario, component, priority, args)
                    for size, lat in rows.items():
                        samples.setdefault((label, np_), {}).setdefault(name, {}).setdefault(size, []).append(lat)
                    cmd += bench.BUSY_NOTE if busy else ""
                    if cmd not in commands:
                        commands.append(cmd)
    path = os.path.join(args.out, "latency-ab.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "np", "config", "bytes", "median_us", "min_us", "max_us", "launches"])
        for (label, np_), by_config in samples.items():
            for name, sizes in by_config.items():
                for size, lats in sorted(sizes.items()):
                    w.writerow([label, np_, name, size, f"{statistics.median(lats):.3f}", f"{min(lats):.3f}",
                                f"{max(lats):.3f}", len(lats)])
    for (label, _), by_config in samples.items():
        med = {n: {s: statistics.median(v) for s, v in sizes.items()} for n, sizes in by_config.items()}
        print(f"\n# {label}: average latency (us), median of {rounds} launches each; B/A < 1: B faster")
        print(f"{'bytes':>8}{name_a:>14}{name_b:>14}{'tuned':>10}{'B/A':>8}{'B/tuned':>9}"
              f"{'B launches (min-max)':>24}")
        for size in sorted(med[name_b]):
            a, b, t = med[name_a].get(size), med[name_b][size], med["tuned"].get(size)
            lo, hi = min(by_config[name_b][size]), max(by_config[name_b][size])
            print(f"{size:>8}{a:>14.3f}{b:>14.3f}{t:>10.3f}{b / a:>8.2f}{b / t:>9.2f}{f'{lo:.3f}-{hi:.3f}':>24}")
        smallest = min(med[name_b])
        for name in (name_a, name_b, "tuned"):
            lats = by_config[name][smallest]
            print(f"# {name} at {smallest} B: launches {min(lats):.3f}-{max(lats):.3f} us, "
                  f"max/min {max(lats) / min(lats):.2f}")
    print(f"\nCSV: {path}")
    with open(os.path.join(args.out, "latency-ab-commands.txt"), "w") as f:
        f.write("\n".join(commands) + "\n")
