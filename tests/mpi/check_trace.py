#!/usr/bin/env python3
"""check_trace.py DIR RANKS: the trace files of one job (coll_gpurdma_trace_dir) against
the Chrome trace event format and what gpurdma promises of them.

  - every file is a JSON object with a traceEvents list; every event is metadata ("M")
    or a complete slice ("X") with a name, a numeric ts, a dur >= 0 (a closed slice),
    an integer pid and tid;
  - every stage slice lies inside its call's slice (same rank, communicator, seq);
  - the traced communicator of RANKS ranks has a file per rank, with the same calls;
  - clocks: each rank's offset was measured (error >= 0); on one host, where the
    clocks are the same, each measured offset is within its error bound; and for each
    allreduce or barrier, which no rank can leave before every rank has entered, the
    latest start is no later than the earliest end plus twice the bound.
Prints one line per check that fails; exit 0 when none does.
"""
import collections
import glob
import json
import os
import sys

EPS_US = 0.01  # the files' three decimals


def main(folder, ranks):
    fails = []
    files = sorted(glob.glob(os.path.join(folder, "gpurdma-trace-*.json")))
    if not files:
        print("no trace files in %s" % folder)
        return 1
    by_comm = collections.defaultdict(list)
    for path in files:
        try:
            doc = json.load(open(path))
        except ValueError as e:
            fails.append("%s: not JSON: %s" % (path, e))
            continue
        events = doc.get("traceEvents") if isinstance(doc, dict) else None
        if not isinstance(events, list):
            fails.append("%s: no traceEvents list" % path)
            continue
        calls, stages = {}, []
        for e in events:
            ph = e.get("ph")
            if ph == "M":
                if "name" not in e or "pid" not in e:
                    fails.append("%s: metadata without name or pid: %s" % (path, e))
                continue
            if ph != "X":
                fails.append("%s: event of phase %r (only X and M are written)" % (path, ph))
                continue
            ok = (isinstance(e.get("name"), str) and isinstance(e.get("ts"), (int, float)) and
                  isinstance(e.get("dur"), (int, float)) and isinstance(e.get("pid"), int) and
                  isinstance(e.get("tid"), int))
            if not ok or e["dur"] < 0:
                fails.append("%s: not a closed complete slice: %s" % (path, e))
                continue
            if e.get("cat") == "call":
                calls[e["args"]["seq"]] = e
            else:
                stages.append(e)
        for s in stages:
            c = calls.get(s["args"]["seq"])
            if c is None or c["pid"] != s["pid"]:
                fails.append("%s: stage %s of call %s has no call slice" % (path, s["name"], s["args"]["seq"]))
            elif s["ts"] < c["ts"] - EPS_US or s["ts"] + s["dur"] > c["ts"] + c["dur"] + EPS_US:
                fails.append("%s: stage %s [%.3f, %.3f] outside its call %s [%.3f, %.3f]" %
                             (path, s["name"], s["ts"], s["ts"] + s["dur"], s["args"]["seq"], c["ts"],
                              c["ts"] + c["dur"]))
        other = doc.get("otherData", {})
        by_comm[other.get("communicator")].append((path, other, calls))
    traced = [members for members in by_comm.values() if len(members) == ranks]
    if not traced:
        fails.append("no communicator has a trace file from each of %d ranks: %s" %
                     (ranks, {k: len(v) for k, v in by_comm.items()}))
    for members in traced:
        hosts = {o["host"] for _, o, _ in members}
        errors = [o["clock_error_us"] for _, o, _ in members]
        bound = max(errors)
        for path, o, _ in members:
            if o["clock_error_us"] < 0:
                fails.append("%s: clock offset not measured" % path)
            elif len(hosts) == 1 and abs(o["clock_offset_us"]) > o["clock_error_us"] + EPS_US:
                fails.append("%s: one host, yet offset %.3f us exceeds its bound %.3f us" %
                             (path, o["clock_offset_us"], o["clock_error_us"]))
        seqs = [set(c) for _, _, c in members]
        if any(s != seqs[0] for s in seqs):
            fails.append("%s: the ranks recorded different calls" % members[0][1]["communicator"])
            continue
        checked = 0
        for seq in seqs[0]:
            slices = [c[seq] for _, _, c in members]
            if not (slices[0]["name"].startswith("allreduce") or slices[0]["name"].startswith("barrier")):
                continue
            latest_start = max(s["ts"] for s in slices)
            earliest_end = min(s["ts"] + s["dur"] for s in slices)
            checked += 1
            if latest_start > earliest_end + 2 * bound + EPS_US:
                fails.append("call %d: a rank started %.3f us after another ended (bound %.3f us): clocks apart" %
                             (seq, latest_start - earliest_end, bound))
        if checked == 0:
            fails.append("no allreduce or barrier to check the clocks with")
        print("check_trace: %s: %d ranks, %d calls (%d checked for clock order), offsets %s us, bound %.3f us" %
              (members[0][1]["communicator"], len(members), len(seqs[0]), checked,
               ", ".join("%.3f" % o["clock_offset_us"] for _, o, _ in members), bound))
    for f in fails:
        print("FAIL: " + f)
    return 1 if fails else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__.strip())
        sys.exit(2)
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
