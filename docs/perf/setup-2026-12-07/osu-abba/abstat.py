import glob, statistics, sys
d = sys.argv[1] if len(sys.argv) > 1 else '/tmp/ab'
def load(b):
    runs = []
    for f in sorted(glob.glob(f'{d}/{b}-*.txt')):
        r = {}
        for line in open(f):
            p = line.split()
            if len(p) == 2 and p[0].isdigit(): r[int(p[0])] = float(p[1])
        runs.append(r)
    return runs
A, B = load('A'), load('B')
print(f"{'size':>8} {'A median':>9} {'A min-max':>15} {'B median':>9} {'B min-max':>15} {'B/A':>6}  verdict")
for s in sorted(A[0]):
    a = [r[s] for r in A if s in r]; b = [r[s] for r in B if s in r]
    ma, mb = statistics.median(a), statistics.median(b)
    spread = max(max(a) - min(a), max(b) - min(b))
    verdict = 'slower beyond spread' if mb - ma > spread else ''
    print(f"{s:>8} {ma:9.2f} {min(a):7.2f}-{max(a):<7.2f} {mb:9.2f} {min(b):7.2f}-{max(b):<7.2f} {mb/ma:6.2f}  {verdict}")
