#!/usr/bin/env python3
"""Markdown tables of `grove bench --spec -o json` runs: one row per drafter and tree, with τ,
tokens/s (median ± sd of the repetitions), the speedup over plain decoding in the same run, the
acceptance by depth (for a chain: the share of steps that accepted at least d tokens), and the
step's time split.

    python3 scripts/drafter-sweep-table.py build/sweep/bench-t0.json [more.json ...]
"""
import json
import os
import sys


def table(path):
    with open(path) as f:
        bench = json.load(f)
    for run in bench["runs"]:
        plain = run["plain"]
        print(f"\n{path}: {run['threads']} thread(s), plain "
              f"{plain['tps_median']:.1f} ± {plain['tps_sd']:.1f} t/s\n")
        print("| drafter | tree | τ | t/s | speedup | acceptance by depth | step ms | draft fwd "
              "| verify fwd | tree+verification+cache+other | greedy |")
        print("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|")
        for p in run["plans"]:
            s = p["split"]
            step = s["step_ms"] or 1e-12
            rest = s["tree_building_ms"] + s["verification_ms"] + s["cache_ms"] + s["other_ms"]
            depth = " ".join(f"{a:.2f}" for a in p["acceptance_by_depth"])
            same = p["greedy_identical"]
            print(f"| {os.path.basename(p['draft'])} | {p['spec']} | {p['tau']:.2f} "
                  f"| {p['tps_median']:.1f} ± {p['tps_sd']:.1f} | {p['speedup_median']:.2f}x "
                  f"| {depth} | {s['step_ms']:.3f} | {100 * s['draft_forward_ms'] / step:.0f}% "
                  f"| {100 * s['verify_forward_ms'] / step:.0f}% | {100 * rest / step:.0f}% "
                  f"| {'n/a' if same is None else ('identical' if same else 'DIFFERS')} |")


for arg in sys.argv[1:]:
    table(arg)
