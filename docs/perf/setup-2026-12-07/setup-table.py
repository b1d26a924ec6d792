import re,statistics,sys,collections
d=collections.defaultdict(list); rss=collections.defaultdict(list); cre=collections.defaultdict(list)
for l in open(sys.argv[1]):
    m=re.match(r'(\S+) (\S+) (\S+) r\d+: comm-setup: .*median ([\d.]+) ms .*creation alone ([\d.]+)\), RSS per live communicator ([\d.]+) KiB',l)
    if not m: continue
    k=(m.group(1),m.group(2),m.group(3)); d[k].append(float(m.group(4))); cre[k].append(float(m.group(5))); rss[k].append(float(m.group(6)))
print("| scenario | tuned | han | gpurdma before (main) | gpurdma now | now / han | RSS/comm tuned | han | before | now |")
print("|---|---|---|---|---|---|---|---|---|---|")
for sc in ['np2','np4','np4ln2']:
  for how in ['dup','split']:
    def med(c): 
        v=d.get((sc,how,c)); return statistics.median(v) if v else float('nan')
    def r(c):
        v=rss.get((sc,how,c)); return statistics.median(v) if v else float('nan')
    def rng(c):
        v=d.get((sc,how,c)); return f"{min(v):.3f}-{max(v):.3f}"
    print(f"| {sc} {how} | {med('tuned'):.3f} | {med('han'):.3f} | {med('A'):.3f} | {med('B'):.3f} ({rng('B')}) | {med('B')/med('han'):.1f}x | {r('tuned'):.1f} | {r('han'):.1f} | {r('A'):.1f} | {r('B'):.1f} |")
