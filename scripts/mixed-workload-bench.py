#!/usr/bin/env python3
"""Issue 32's mixed workload against each drafter, as a client sees it: for every class of
bench/workload/ (scripts/mixed-workload.py) and every drafter, a fresh `grove serve` answers the
class's requests one after another (one client, temperature 0 unless --temp); the table gives tokens/s over the
whole class (wall clock, from the first request sent to the last answer), its ratio to plain
serving and to the best single drafter (of the medians, and paired: the median of the rounds'
ratios), and tau from the responses' timings; then where the
server's verifying thread spent its time (/metrics), and tau of the repeated class by the number
of times a request had been served before.

  python3 scripts/mixed-workload-bench.py [--reps 3] [-n 96] [--threads 2]

Medians over --reps fresh servers, the drafters taking turns round by round. Nothing here changes outputs: every response's text is
checked against plain serving's.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.load(r)


def serve_class(grove, target, draft, prompts, n, threads, temperature, policy):
    """Answers `prompts` in order on a fresh server; returns (seconds, tokens, taus, texts)."""
    port = free_port()
    cmd = [grove, "serve", "-m", target, "--draft", draft, "--port", str(port), "-t",
           str(threads), "--parallel", "1"] + (["--policy", policy] if policy else [])
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except Exception:
                if proc.poll() is not None:
                    sys.exit(f"grove serve --draft {draft} exited: {proc.stderr.read()}")
                time.sleep(0.05)
        start = time.perf_counter()
        tokens, taus, texts = 0, [], []
        for p in prompts:
            body = post(port, {"prompt": p, "max_tokens": n, "temperature": temperature,
                               "seed": 1})
            t = body["timings"]
            tokens += t["predicted_n"]
            steps = body["grove"]["steps"]
            taus.append(t["predicted_n"] / steps if steps else 1.0)
            texts.append(body["choices"][0]["text"])
        seconds = time.perf_counter() - start
        split = {}
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("grove_round_seconds_total{part="):
                    split[line.split('"')[1]] = float(line.split()[-1])
        return seconds, tokens, taus, texts, split
    finally:
        proc.terminate()
        proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grove", default=os.path.join(ROOT, "build/release/tools/grove/grove"))
    ap.add_argument("--target", default=os.path.join(ROOT, "models/grove-base-target.gguf"))
    ap.add_argument("--draft", default=os.path.join(ROOT, "models/grove-base-draft.gguf"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("-n", type=int, default=96)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--temp", type=float, default=0.0,
                    help="temperature of every request (seed 1: the same text whatever drafts)")
    ap.add_argument("--classes", default="stories,repeated,near-repeated,arithmetic,game24,mixed")
    ap.add_argument("--policy", default="",
                    help="grove serve --policy of every server (default: the server's own)")
    args = ap.parse_args()
    drafters = [("plain", "none"), ("draft model", args.draft), ("suffix", "suffix"),
                ("mixture", args.draft + "+suffix")]
    print(f"grove serve, {args.target}, one client, -n {args.n}, temperature {args.temp}, "
          f"{args.threads} threads, policy {args.policy or 'the default'}, median of {args.reps} "
          f"fresh servers\n")
    print("| class | requests | drafter | tokens/s | min-max | vs plain | vs best single | paired "
          "| tau |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    repeated_taus, splits = {}, {}
    for cls in args.classes.split(","):
        with open(os.path.join(ROOT, "bench/workload", cls + ".txt")) as f:
            # One prompt per line; "\\n" in a line is a line break (scripts/mixed-workload.py).
            prompts = [line.rstrip("\n").replace("\\n", "\n") for line in f if line.strip()]
        rates, taus, plain_texts = {}, {}, None
        # Rounds of every drafter in turn: this machine's speed drifts over minutes, and a drift
        # between one drafter's servers and the next's would land on their ratio.
        for _ in range(args.reps):
            for label, draft in drafters:
                seconds, tokens, t, texts, split = serve_class(args.grove, args.target, draft,
                                                               prompts, args.n, args.threads,
                                                               args.temp, args.policy)
                splits.setdefault((cls, label), split)
                if plain_texts is None:
                    plain_texts = texts
                elif texts != plain_texts:
                    sys.exit(f"{cls}, {label}: a response differs from plain serving's")
                rates.setdefault(label, []).append(tokens / seconds)
                taus.setdefault(label, t)
                if cls == "repeated":
                    repeated_taus.setdefault(label, t)
        plain = statistics.median(rates["plain"])
        best_label = max(("draft model", "suffix"), key=lambda l: statistics.median(rates[l]))
        best = statistics.median(rates[best_label])
        for label, _ in drafters:
            med = statistics.median(rates[label])
            tau = statistics.mean(taus[label])
            # paired: the median over rounds of the ratio to the best single drafter's rate in the
            # same round, which a drift of the machine's speed between rounds does not move.
            paired = statistics.median(a / b for a, b in zip(rates[label], rates[best_label]))
            print(f"| {cls} | {len(prompts)} | {label} | {med:.0f} | {min(rates[label]):.0f}-"
                  f"{max(rates[label]):.0f} | {med / plain:.2f}x | "
                  f"{'' if label == 'plain' else f'{med / best:.2f}x'} | "
                  f"{'' if label == 'plain' else f'{paired:.2f}x'} | {tau:.2f} |")
    print("\nwhere the server's verifying thread spent each class (the first of the reps; the "
          "drafts of the\nbatched policy's lane run on its own thread, so draft time shows as "
          "waiting only where it was not overlapped)")
    print("| class | drafter | waiting for drafts | target forward | rest (accept, stream) |")
    print("|---|---|---:|---:|---:|")
    for (cls, label), split in splits.items():
        total = sum(split.values()) or 1.0
        print(f"| {cls} | {label} | " + " | ".join(
            f"{100 * split.get(k, 0.0) / total:.1f}%" for k in ("draft_wait", "forward", "other"))
            + " |")
    if repeated_taus:
        print("\ntau of the repeated class by the times the request had been served before "
              "(mean over its 6 prompts)")
        print("| drafter | " + " | ".join(f"served {k} before" for k in range(4)) + " |")
        print("|---|" + "---:|" * 4)
        for label, t in repeated_taus.items():
            if label == "plain":
                continue
            by_round = [statistics.mean(t[6 * k:6 * k + 6]) for k in range(4)]
            print(f"| {label} | " + " | ".join(f"{x:.2f}" for x in by_round) + " |")


if __name__ == "__main__":
    main()
