#!/usr/bin/env python3
"""Writes the mixed workload of issue 32 into bench/workload/ (one prompt per line, the order
serve-bench sends them in): deterministic for a seed, so the files in the repository are what
this script writes.

  python3 scripts/mixed-workload.py [--seed 32] [--out bench/workload]

Classes, for the bundled story pair (a story model: it neither follows instructions nor does
arithmetic, so the copy-, JSON- and Game-of-24 classes of the issue need a pair that does):
  stories.txt        48 distinct story openings, each asked once
  repeated.txt        6 openings, each asked 4 times (interleaved): a client that resends
  near-repeated.txt   6 openings, each asked 4 times with another name each time
  mixed.txt          16 of each of the above, shuffled
"""
import argparse
import os
import random

NAMES = ["Lily", "Tom", "Sara", "Ben", "Mia", "Jack", "Anna", "Max", "Zoe", "Sam", "Lucy", "Tim"]
PLACES = ["park", "garden", "beach", "forest", "kitchen", "school", "lake", "farm"]
THINGS = ["ball", "kite", "book", "box", "hat", "key", "boat", "drum"]
COLOURS = ["red", "blue", "green", "yellow", "big", "small", "shiny", "old"]
PATTERNS = [
    "Once upon a time, there was a little girl named {name}.",
    "{name} went to the {place} with {their} mom.",
    "{name} had a {colour} {thing}. {They} liked to play with it every day.",
    "One day, {name} found a {colour} {thing} in the {place}.",
    "It was a sunny day, and {name} wanted to go to the {place}.",
    "{name} and {friend} were best friends. They liked to play at the {place}.",
]
GIRLS = {"Lily", "Sara", "Mia", "Anna", "Zoe", "Lucy"}


def opening(rng, name=None, pattern=None):
    name = name or rng.choice(NAMES)
    pattern = pattern or rng.choice(PATTERNS)
    return pattern.format(name=name, place=rng.choice(PLACES), thing=rng.choice(THINGS),
                          colour=rng.choice(COLOURS),
                          friend=rng.choice([n for n in NAMES if n != name]),
                          their="her" if name in GIRLS else "his",
                          They="She" if name in GIRLS else "He")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=32)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "bench",
                                                  "workload"))
    args = ap.parse_args()
    rng = random.Random(args.seed)
    stories = []
    while len(stories) < 48:
        s = opening(rng)
        if s not in stories:
            stories.append(s)
    asked = [s for s in (opening(rng) for _ in range(40)) if s not in stories][:6]
    repeated = [s for _ in range(4) for s in asked]
    near = []
    bases = [(rng.choice(PATTERNS), random.Random(args.seed + i)) for i in range(6)]
    for round_ in range(4):
        for pattern, base_rng in bases:
            # The same words each time (the same draws), another name.
            state = base_rng.getstate()
            near.append(opening(base_rng, name=NAMES[(round_ * 5 + len(near)) % len(NAMES)],
                                pattern=pattern))
            base_rng.setstate(state)
    mixed = stories[:16] + repeated[:16] + near[:16]
    rng.shuffle(mixed)
    os.makedirs(args.out, exist_ok=True)
    for name, lines in [("stories", stories), ("repeated", repeated), ("near-repeated", near),
                        ("mixed", mixed)]:
        with open(os.path.join(args.out, name + ".txt"), "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
