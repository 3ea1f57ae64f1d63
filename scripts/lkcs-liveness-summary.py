#!/usr/bin/env python3
"""Summarises the CSV of examples/lkcs_liveness.rs as the Markdown table of
docs/measurements/lkcs-liveness.md: per family, delay model, leader mode and bound kind,
the configurations, those refused (the CLI exits 2), the runs, the failures by kind, the
worst max_overtaken of passed and of failed runs, and the mean over passed runs of messages
per pair divided by 12(|N_i|+1) (the paper's worst case).

Usage: scripts/lkcs-liveness-summary.py runs.csv
"""
import collections
import csv
import sys


def line(name, sel):
    if not sel:
        return
    ran = [r for r in sel if r["outcome"] != "refused"]
    fail = [r for r in ran if r["outcome"] == "failed"]
    passed = [r for r in ran if r["outcome"] == "passed"]
    worst_passed = max([int(r["max_overtaken"]) for r in passed] or [0])
    worst_failed = max([int(r["max_overtaken"]) for r in fail] or [0])
    ratios = [float(r["mean_over_12_closed"]) for r in passed]
    kinds = collections.Counter(r["failure"] for r in fail)
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) or "-"
    share = 100 * len(fail) / max(1, len(ran))
    mean = sum(ratios) / max(1, len(ratios))
    print(
        f"| {name} | {len(sel)} | {len(sel) - len(ran)} | {len(ran)} | "
        f"{len(fail)} ({share:.1f} %) | {kinds} | {worst_passed} | {worst_failed} | {mean:.2f} |"
    )


def main():
    rows = list(csv.DictReader(open(sys.argv[1])))
    print(
        "| subset | configurations | refused | run | failed | kinds | worst max_overtaken, "
        "passed | worst, failed | messages per pair / 12(\\|N_i\\|+1), passed |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for f in ["random", "dense", "torus", "grid", "complete"]:
        line(f"family {f}", [r for r in rows if r["family"] == f])
    for d in ["unit", "uniform:1:12"]:
        line(f"delay {d}", [r for r in rows if r["delay"] == d])
    for l in ["auto", "all", "single"]:
        line(f"leader {l}", [r for r in rows if r["leader"] == l])
    for b in ["uniform", "mixed", "least"]:
        line(f"bounds {b}", [r for r in rows if r["bounds"] == b])
    for l in ["auto", "all", "single"]:
        line(
            f"dense, unit delays, leader {l}",
            [r for r in rows if r["family"] == "dense" and r["delay"] == "unit" and r["leader"] == l],
        )
    line("**all**", rows)


if __name__ == "__main__":
    main()
