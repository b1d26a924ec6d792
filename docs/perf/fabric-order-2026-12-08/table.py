#!/usr/bin/env python3
"""Markdown table of run.sh's output: per cluster, job and size, the time as a multiple
of the bandwidth bound (lowest-highest over the seeds) and the PFC pause time (us, all
ports summed), for each topology (known: nodes in fabric order; unknown: rank order) and
QPs per rail peer. Usage: table.py OUT_FILE [OUT_FILE...]"""
import collections
import sys


def main():
    cells = collections.defaultdict(dict)  # key -> seed -> (x bound, pause)
    for path in sys.argv[1:]:
        for line in open(path):
            v = dict(tok.split('=', 1) for tok in line.split() if '=' in tok)
            if 'time_us' not in v:
                continue
            key = (v['cluster'], v['job'], int(v['size']), v['topology'], int(v['qps']))
            cells[key][v['seed']] = (float(v['time_us']) / float(v['ideal_us']), float(v['pfc_pause_us']))
    rows = sorted({k[:3] for k in cells}, key=lambda r: (r[0], r[1] != 'alone', r[2]))
    cols = [('known', 2), ('known', 1), ('unknown', 2), ('unknown', 1)]
    head = ['cluster', 'job', 'size'] + [
        f'{t}, {q} QP{"s" if q > 1 else ""}{" (defaults)" if (t, q) == ("known", 2) else ""}' for t, q in cols]
    print('| ' + ' | '.join(head) + ' |')
    print('|' + '---|' * len(head))
    for r in rows:
        out = [r[0], 'alone' if r[1] == 'alone' else 'second job', f'{r[2] >> 20} MiB']
        for t, q in cols:
            got = list(cells.get(r + (t, q), {}).values())
            if not got:
                out.append('-')
                continue
            x = [g[0] for g in got]
            p = [g[1] for g in got]
            out.append(f'{min(x):.2f}-{max(x):.2f}x, pause {min(p):.0f}-{max(p):.0f} us ({len(got)} seeds)')
        print('| ' + ' | '.join(out) + ' |')


if __name__ == '__main__':
    main()
