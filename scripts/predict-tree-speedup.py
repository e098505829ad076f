#!/usr/bin/env python3
"""Predicted speedup of Sequoia trees of 64 and 128 nodes for a target whose verify curve was
measured (grove bench --profile-out), with an acceptance vector (grove calibrate), from grove's own
Sequoia DP (grove tree): speedup = G(n) t(1) / (t(n) + depth x c) for draft costs c per level.
The last column uses the reference curve of issue 33 (t(64)/t(1) 1.05, t(128)/t(1) 1.15).

usage: scripts/predict-tree-speedup.py PROFILE.json ACCEPT.json [--grove PATH] [--draft-ms 0.5,3.5]
"""
import argparse
import json
import re
import subprocess

REFERENCE = {64: 1.05, 128: 1.15}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("profile")
    ap.add_argument("accept")
    ap.add_argument("--grove", default="build/release/tools/grove/grove")
    ap.add_argument("--draft-ms", default="0.5,3.5")
    a = ap.parse_args()
    curve = {c["n"]: c["seconds_median"] * 1e3 for c in json.load(open(a.profile))["curve"]}
    print("| nodes | max depth | depth | G tokens/step | draft ms/level | predicted, measured t(n) "
          "| predicted, reference t(n) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for nodes in (64, 128):
        for max_depth in (0, 12, 8):
            out = subprocess.run([a.grove, "tree", "--accept", a.accept, "--budget", str(nodes),
                                  "--max-depth", str(max_depth)],
                                 capture_output=True, text=True, check=True).stdout
            g = float(re.search(r"G = ([0-9.]+)", out).group(1))
            depth = max((len(l) - len(l.lstrip())) // 2 for l in out.splitlines() if "#" in l)
            for c in (float(x) for x in a.draft_ms.split(",")):
                measured = g * curve[1] / (curve[nodes] + depth * c)
                reference = g * curve[1] / (curve[1] * REFERENCE[nodes] + depth * c)
                print(f"| {nodes} | {max_depth or '-'} | {depth} | {g:.2f} | {c:.1f} | "
                      f"{measured:.2f}x | {reference:.2f}x |")


if __name__ == "__main__":
    main()
