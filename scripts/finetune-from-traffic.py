#!/usr/bin/env python3
"""Issue 32's loop of learning from traffic, end to end: a server records what it answers in a
domain its draft was not trained on, the draft is fine-tuned on that record, and the fine-tuned
draft is swapped into the running server, where tau on held-out requests of the domain is measured
before and after (and on stories, which the draft was trained on, as a control).

The domain: questions about a story ("Q: Why did Mia go to the river?\\nA:"), which the corpus of
the bundled pair (`grove corpus`: stories, arithmetic, Game of 24) never holds. Prompts are
generated here, deterministically; the held-out ones use names and places the recorded ones do
not. Every request is greedy (temperature 0), so the texts are the target's whatever drafts them;
the script checks that the swapped-in draft gives the same texts.

  python3 scripts/finetune-from-traffic.py [--train 400 --held-out 60 --steps 120]
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from importlib import import_module  # noqa: E402

bench = import_module("mixed-workload-bench")

TEMPLATES = [
    "Q: Why did {a} go to the {p}?\nA:",
    "Q: What did {a} find in the {p}?\nA:",
    "Q: Who helped {a} at the {p}?\nA:",
    "Q: How did {a} feel after the {p}?\nA:",
    "Q: What did {a} and {b} do at the {p}?\nA:",
    "Q: Where did {a} meet {b}?\nA:",
]
TRAIN_NAMES = ["Mia", "Tom", "Lily", "Ben", "Sara", "Max", "Anna", "Sam", "Lucy", "Jack"]
TRAIN_PLACES = ["river", "garden", "park", "forest", "market", "beach", "school", "farm"]
HELD_NAMES = ["Nora", "Leo", "Ella", "Finn", "Ruby"]
HELD_PLACES = ["hill", "lake", "village", "castle"]
STORIES = ["Once upon a time", "One day, a little", "There was a small", "The sun was warm and",
           "In a big forest,", "Long ago, a kind"]


def questions(rng, count, names, places):
    out = []
    for _ in range(count):
        a, b = rng.sample(names, 2)
        out.append(rng.choice(TEMPLATES).format(a=a, b=b, p=rng.choice(places)))
    return out


def start_server(grove, target, draft, threads, extra):
    port = bench.free_port()
    cmd = [grove, "serve", "-m", target, "--draft", draft, "--port", str(port), "-t",
           str(threads), "--parallel", "1"] + extra
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return proc, port
        except Exception:
            if proc.poll() is not None:
                sys.exit(f"grove serve exited: {proc.stderr.read()}")
            time.sleep(0.05)
    sys.exit("grove serve did not start")


def answer(port, prompts, n):
    """tau over the prompts (generated / steps), tokens/s, and the texts."""
    tokens = steps = 0
    seconds = 0.0
    texts = []
    for p in prompts:
        body = bench.post(port, {"prompt": p, "max_tokens": n, "temperature": 0})
        tokens += body["timings"]["predicted_n"]
        seconds += body["timings"]["predicted_ms"] / 1e3
        steps += body["grove"]["steps"]
        texts.append(body["choices"][0]["text"])
    return tokens / max(steps, 1), tokens / max(seconds, 1e-9), texts


def swap(port, key, draft):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/admin/drafter",
                                 data=json.dumps({"draft": draft}).encode(),
                                 headers={"Content-Type": "application/json",
                                          "Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.load(r)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grove", default=os.path.join(ROOT, "build/release/tools/grove/grove"))
    ap.add_argument("--target", default=os.path.join(ROOT, "models/grove-base-target.gguf"))
    ap.add_argument("--draft", default=os.path.join(ROOT, "models/grove-base-draft.gguf"))
    ap.add_argument("--train", type=int, default=400, help="recorded requests")
    ap.add_argument("--held-out", type=int, default=60, help="measured requests")
    ap.add_argument("-n", type=int, default=64, help="tokens per request")
    ap.add_argument("--steps", type=int, default=120, help="fine-tuning steps")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--keep", help="keep the record, the run and the tuned draft here")
    a = ap.parse_args()

    work = a.keep or tempfile.mkdtemp(prefix="grove-finetune-")
    os.makedirs(work, exist_ok=True)
    record, run, tuned = (os.path.join(work, x) for x in ("record", "run", "tuned.gguf"))
    for path in (record, run):
        shutil.rmtree(path, ignore_errors=True)
    os.makedirs(record)
    rng = random.Random(1)
    train = questions(rng, a.train, TRAIN_NAMES, TRAIN_PLACES)
    held = questions(rng, a.held_out, HELD_NAMES, HELD_PLACES)

    # 1. A server answers the domain's requests and keeps them (--record).
    start = time.perf_counter()
    proc, port = start_server(a.grove, a.target, a.draft, a.threads, ["--record", record])
    try:
        answer(port, train, a.n)
    finally:
        proc.terminate()
        proc.wait()
    print(f"recorded {a.train} requests in {time.perf_counter() - start:.1f} s into {record}",
          file=sys.stderr)

    # 2. The draft is fine-tuned on the record.
    start = time.perf_counter()
    subprocess.run([a.grove, "train", "--init", a.draft, "--corpus", record, "--tokenizer",
                    a.draft, "-o", run, "--steps", str(a.steps), "--warmup",
                    str(max(1, a.steps // 10)), "--lr", str(a.lr), "--batch", "16", "--seq-len",
                    "128", "--eval-every", str(a.steps), "-t", str(a.threads), "--export", tuned,
                    "--export-type", "q8_0", "--name", "grove-base-draft-tuned"], check=True,
                   stdout=subprocess.DEVNULL)
    print(f"fine-tuned {a.steps} steps in {time.perf_counter() - start:.1f} s: {tuned}",
          file=sys.stderr)

    # 3. One server: held-out requests with the draft, the tuned draft swapped in, the same again.
    key = "finetune-" + str(os.getpid())
    proc, port = start_server(a.grove, a.target, a.draft, a.threads, ["--admin-key", key])
    try:
        before_q = answer(port, held, a.n)
        before_s = answer(port, STORIES, a.n)
        swapped = swap(port, key, tuned)
        after_q = answer(port, held, a.n)
        after_s = answer(port, STORIES, a.n)
    finally:
        proc.terminate()
        proc.wait()
    if before_q[2] != after_q[2] or before_s[2] != after_s[2]:
        sys.exit("the texts changed with the drafter: speculation is not lossless")
    print(f"\nswapped in {swapped['requested']} ({swapped['draft']}); every text unchanged\n")
    print("| requests | drafter | tau | tokens/s |")
    print("|---|---|---:|---:|")
    for name, before, after in (("questions (held out)", before_q, after_q),
                                ("stories (control)", before_s, after_s)):
        print(f"| {name} | base draft | {before[0]:.2f} | {before[1]:.0f} |")
        print(f"| {name} | fine-tuned | {after[0]:.2f} | {after[1]:.0f} |")
        print(f"| {name} | change | {100 * (after[0] / before[0] - 1):+.0f}% | "
              f"{100 * (after[1] / before[1] - 1):+.0f}% |")


if __name__ == "__main__":
    main()
