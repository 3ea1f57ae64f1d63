#!/usr/bin/env python3
"""Pools the rounds of scripts/net-bench-plain.sh per build (plain, channel): nodes/ceiling,
nodes pairs/s and the ceiling's pairs/s, median (least-greatest).

usage: scripts/net-bench-plain.py DIR   (DIR holds plain-N.log and channel-N.log)
"""
import glob, re, statistics as st, sys
cases = ["gcs l=1 k=2", "gcs l=2 k=3", "maekawa (mutex)", "cdc (mutex)"]
def rows(path):
    out = {}
    for line in open(path):
        m = re.match(r"^\| (\w+)\s+\| (.+?)\s+\|\s+(\d+) \|\s+(\d+) \|\s+(\d+) \|\s+([\d.]+) \|\s+([\d.]+) \|", line)
        if m:
            sysname, case, n, rnd, pairs, wall, rate = m.groups()
            out[(sysname, case, int(rnd))] = float(rate)
    return out
def fmt(v):
    return f"{st.median(v):.3f} ({min(v):.3f}–{max(v):.3f})"
res = {}
out_dir = sys.argv[1] if len(sys.argv) > 1 else "target/net-bench-plain"
for build in ["plain", "channel"]:
    for path in sorted(glob.glob(f"{out_dir}/{build}-*.log")):
        r = rows(path)
        for case in cases:
            for rnd in (1, 2, 3):
                if ("nodes", case, rnd) in r and ("ceiling", case, rnd) in r:
                    res.setdefault((build, case, "ratio"), []).append(r[("nodes", case, rnd)] / r[("ceiling", case, rnd)])
                    res.setdefault((build, case, "rate"), []).append(r[("nodes", case, rnd)])
                    res.setdefault((build, case, "ceil"), []).append(r[("ceiling", case, rnd)])
print("| case | rounds | nodes/ceiling, plain | nodes/ceiling, channel | ÷ | nodes pairs/s, plain | nodes pairs/s, channel | ÷ | ceiling pairs/s, plain | ceiling pairs/s, channel |")
print("|---|---:|---|---|---:|---|---|---:|---|---|")
for case in cases:
    p, h = res.get(("plain", case, "ratio"), []), res.get(("channel", case, "ratio"), [])
    if not p or not h: continue
    pr, hr = res[("plain", case, "rate")], res[("channel", case, "rate")]
    pc, hc = res[("plain", case, "ceil")], res[("channel", case, "ceil")]
    print(f"| {case} | {len(p)}/{len(h)} | {fmt(p)} | {fmt(h)} | {st.median(h)/st.median(p):.2f} | "
          f"{st.median(pr):,.0f} ({min(pr):,.0f}–{max(pr):,.0f}) | {st.median(hr):,.0f} ({min(hr):,.0f}–{max(hr):,.0f}) | {st.median(hr)/st.median(pr):.2f} | "
          f"{st.median(pc):,.0f} ({min(pc):,.0f}–{max(pc):,.0f}) | {st.median(hc):,.0f} ({min(hc):,.0f}–{max(hc):,.0f}) |")
