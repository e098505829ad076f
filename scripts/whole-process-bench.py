#!/usr/bin/env python3
"""The speedup a user sees (issue 30): whole `grove run` processes timed from outside, paired.

For each token count and thread count, runs plain decoding of the target (`grove run -m TARGET`)
and the default speculative run (`grove run`, the bundled pair with `--spec auto`) alternately,
REPS times each, at temperature 0 with --ignore-eos (both produce exactly N tokens), and prints the
median wall time of each with its range and the ratio of the medians. Load, prefill, every
measurement and exit are included: what a script that calls grove per request sees.

Three cache states can be timed:
  warm     the user's cache (auto's verify curves, packed weights) as runs leave it: a private
           cache directory, filled by one untimed run before the timed ones and by the timed runs
           themselves (what a user who has run grove once before sees);
  settled  a private cache directory primed by 10 untimed 512-token runs first, so auto's curve
           is measured to the sizes its trees use (what a user who has run grove for a while sees:
           measuring is paid from 5% of the decoding time summed over runs);
  cold     an empty cache directory for every process (a first run on a new machine or model:
           it measures the verify curve's first sizes, packs the weights and keeps both).

usage: scripts/whole-process-bench.py [--grove PATH] [--tokens 1,16,128,512] [--threads 1,2]
                                      [--reps 7] [--cache warm,settled,cold] [--prompt TEXT]
                                      [--draft DRAFT]
--draft: what the speculative run drafts with instead of run's default (the bundled draft mixed
with suffix drafting), e.g. models/grove-base-draft.gguf for the draft model alone.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(cmd, env):
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr.decode()[-2000:]}")
    return seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grove", default=os.path.join(ROOT, "build/release/tools/grove/grove"))
    ap.add_argument("--target", default=os.path.join(ROOT, "models/grove-base-target.gguf"))
    ap.add_argument("--tokens", default="1,16,128,512")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--cache", default="warm,settled,cold")
    ap.add_argument("--prompt", default="Once upon a time")
    ap.add_argument("--draft", default="", help="--draft of the speculative run (default: run's)")
    a = ap.parse_args()
    if not os.access(a.grove, os.X_OK):
        sys.exit(f"no grove binary at {a.grove} (build it, or pass --grove)")

    scratch = tempfile.mkdtemp(prefix="grove-whole-process-")
    print(f"grove: {a.grove}\nplain: run -m {os.path.basename(a.target)}; speculative: run "
          f"({'--draft ' + a.draft if a.draft else 'bundled pair'}, --spec auto); prompt {a.prompt!r}, --temp 0 --ignore-eos, "
          f"{a.reps} paired runs each, wall time of the whole process\n")
    print("| cache | threads | tokens | plain s (median, range) | speculative s (median, range) "
          "| speedup |")
    print("|---|---:|---:|---|---|---:|")
    try:
        for cache in a.cache.split(","):
            for threads in [int(t) for t in a.threads.split(",")]:
                for n in [int(t) for t in a.tokens.split(",")]:
                    common = ["run", "-p", a.prompt, "-n", str(n), "--temp", "0", "--ignore-eos",
                              "-t", str(threads), "--no-display-prompt"]
                    plain_cmd = [a.grove] + common + ["-m", a.target]
                    spec_cmd = [a.grove] + common + (["--draft", a.draft] if a.draft else [])
                    env = dict(os.environ)
                    warm_dir = os.path.join(scratch, f"{cache}-{threads}")
                    if cache in ("warm", "settled"):
                        env["GROVE_CACHE_DIR"] = warm_dir
                        timed(spec_cmd, env)  # untimed: what a run before left
                    if cache == "settled" and not os.path.exists(warm_dir + "/.primed"):
                        prime = [a.grove, "run", "-p", a.prompt, "-n", "512", "--temp", "0",
                                 "--ignore-eos", "-t", str(threads), "--no-display-prompt"] + (
                                     ["--draft", a.draft] if a.draft else [])
                        for _ in range(10):
                            timed(prime, env)
                        open(warm_dir + "/.primed", "w").close()
                    plain, spec = [], []

                    def run(cmd, times, rep, which):
                        if cache != "cold":
                            times.append(timed(cmd, env))
                            return
                        # A directory of its own for each cold process (neither finds what the
                        # other kept), removed at once: kept files of tens of MB piling up as
                        # dirty pages would slow later runs' writes.
                        cold_dir = os.path.join(scratch, f"cold-{threads}-{n}-{rep}-{which}")
                        times.append(timed(cmd, dict(env, GROVE_CACHE_DIR=cold_dir)))
                        shutil.rmtree(cold_dir, ignore_errors=True)

                    for rep in range(a.reps):
                        # Alternate which goes first, so neither always runs on a cooler machine.
                        if rep % 2 == 0:
                            run(plain_cmd, plain, rep, "plain")
                            run(spec_cmd, spec, rep, "spec")
                        else:
                            run(spec_cmd, spec, rep, "spec")
                            run(plain_cmd, plain, rep, "plain")
                    mp, ms = statistics.median(plain), statistics.median(spec)
                    print(f"| {cache} | {threads} | {n} | {mp:.3f} ({min(plain):.3f}-{max(plain):.3f})"
                          f" | {ms:.3f} ({min(spec):.3f}-{max(spec):.3f}) | {mp / ms:.2f}x |",
                          flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
