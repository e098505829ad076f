#!/usr/bin/env python3
"""Writes the mixed workload of issue 32 into bench/workload/ (one prompt per line, the order
serve-bench sends them in; "\\n" in a line stands for a line break): deterministic for a seed, so
the files in the repository are what this script writes.

  python3 scripts/mixed-workload.py [--seed 32] [--out bench/workload]

Classes, for the bundled base pair (stories, word problems and Game of 24 thoughts: its corpus
holds all three; it follows no instructions, so the issue's copy- ("repeat the story with the names
changed") and JSON classes need a pair that does):
  stories.txt        48 distinct story openings, each asked once
  repeated.txt        6 openings, each asked 4 times (interleaved): a client that resends
  near-repeated.txt   6 openings, each asked 4 times with another name each time
  arithmetic.txt     24 word problems in the corpus's four forms with new numbers, each ending at
                     "Solution:" (the model writes the steps, copying names and numbers)
  game24.txt         24 "Possible next steps" prompts as a tree-of-thought search sends them (grove
                     tot's propose format): for each of 4 hands, the hand's, then 5 of the
                     3-number states its natural steps reach
  mixed.txt          12 of each of the above, shuffled
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


ITEMS = ["apples", "stones", "shells", "coins", "books", "balls", "cups", "flowers", "seeds", "pens"]
BOXES = ["boxes", "bags", "baskets", "jars", "buckets"]


def word_problem(rng):
    """One problem in a form of src/train/corpus_arithmetic.cc, up to its "Solution:" line."""
    name = rng.choice(NAMES)
    friend = rng.choice([n for n in NAMES if n != name])
    he = "She" if name in GIRLS else "He"
    items = rng.choice(ITEMS)
    form = rng.randrange(4)
    if form == 0:
        a, b = rng.randint(5, 60), rng.randint(2, 40)
        c = rng.randint(1, a + b)
        text = (f"{name} has {a} {items}. {he} buys {b} more {items} and then gives {c} {items} "
                f"to {friend}. How many {items} does {name} have now?")
    elif form == 1:
        a, b, c = rng.randint(2, 12), rng.randint(2, 15), rng.randint(1, 30)
        text = (f"{name} has {a} {rng.choice(BOXES)}. Each one holds {b} {items}. {he} also has "
                f"{c} loose {items}. How many {items} does {name} have in all?")
    elif form == 2:
        each, friends, kept = rng.randint(2, 12), rng.randint(2, 9), rng.randint(1, 20)
        text = (f"{name} has {each * friends + kept} {items}. {he} keeps {kept} and shares the "
                f"rest equally among {friends} friends. How many {items} does each friend get?")
    else:
        n, price = rng.randint(2, 9), rng.randint(2, 15)
        paid = (n * price // 10 + 1 + rng.randint(0, 5)) * 10
        text = (f"{name} buys {n} {items} at the market. Each costs {price} coins. {he} pays "
                f"with {paid} coins. How much change does {he.lower()} get?")
    return f"Problem: {text}\\nSolution:"


HANDS = [(4, 9, 10, 13), (1, 4, 8, 8), (2, 3, 5, 12), (3, 3, 8, 8), (1, 5, 5, 5), (2, 7, 7, 10)]


def natural_steps(numbers):
    """The states one natural step (a + b, a * b, b - a > 0, b / a whole) leads to, in the order
    src/tasks/game24.cc lists the steps, without repeats."""
    states = []
    for i in range(len(numbers)):
        for j in range(i + 1, len(numbers)):
            a, b = sorted((numbers[i], numbers[j]))
            results = [a + b, a * b] + ([b - a] if b > a else []) + ([b // a] if b % a == 0 else [])
            rest = [n for k, n in enumerate(numbers) if k not in (i, j)]
            for r in results:
                state = tuple(sorted(rest + [r]))
                if state not in states:
                    states.append(state)
    return states


def propose_prompt(numbers):
    return "Input: " + " ".join(map(str, sorted(numbers))) + "\\nPossible next steps:\\n"


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
    arithmetic = []
    while len(arithmetic) < 24:
        p = word_problem(rng)
        if p not in arithmetic:
            arithmetic.append(p)
    game24 = []
    for hand in rng.sample(HANDS, 4):
        game24.append(propose_prompt(hand))
        game24 += [propose_prompt(state) for state in rng.sample(natural_steps(list(hand)), 5)]
    mixed = stories[:12] + repeated[:12] + near[:12] + arithmetic[:12] + game24[:12]
    rng.shuffle(mixed)
    os.makedirs(args.out, exist_ok=True)
    for name, lines in [("stories", stories), ("repeated", repeated), ("near-repeated", near),
                        ("arithmetic", arithmetic), ("game24", game24), ("mixed", mixed)]:
        with open(os.path.join(args.out, name + ".txt"), "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
