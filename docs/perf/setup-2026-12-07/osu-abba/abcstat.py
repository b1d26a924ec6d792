import glob,statistics,sys
d=sys.argv[1]
def load(b):
    runs=[]
    for f in sorted(glob.glob(f'{d}/{b}-*.txt')):
        r={}
        for l in open(f):
            p=l.split()
            if len(p)==2 and p[0].isdigit(): r[int(p[0])]=float(p[1])
        runs.append(r)
    return runs
R={b:load(b) for b in 'ABC'}
print(f"{'size':>8} {'A med':>7} {'A min':>6} {'B med':>7} {'B min':>6} {'C med':>7} {'C min':>6}  B/A  C/A")
for s in sorted(R['A'][0]):
    v={b:[r[s] for r in R[b] if s in r] for b in 'ABC'}
    m={b:statistics.median(v[b]) for b in 'ABC'}
    print(f"{s:>8} {m['A']:7.2f} {min(v['A']):6.2f} {m['B']:7.2f} {min(v['B']):6.2f} {m['C']:7.2f} {min(v['C']):6.2f}  {m['B']/m['A']:.2f} {m['C']/m['A']:.2f}")
