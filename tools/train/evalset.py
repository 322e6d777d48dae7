#!/usr/bin/env python3
"""Writes the tiny model's held-out evaluation data for glmrun's tests.

    python3 tools/train/evalset.py OUTDIR

OUTDIR/eval.json.gz: 200 arithmetic problems, 100 tool requests (tools, the
question, the expected call, the tool's result and a reference answer) and 50
recall prompts of 130-170 "key: value" lines, all drawn from the items the
training data never contains (data.held_out).
OUTDIR/heldout.txt: plain text from the same held-out stream (chat turns with
their role markers removed), for perplexity.
"""
import gzip
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data  # noqa: E402


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    sets = data.eval_sets()
    with gzip.open(os.path.join(out, "eval.json.gz"), "wt") as f:
        json.dump(sets, f, ensure_ascii=False)
    g = data.Gen(777, "eval")
    special = re.compile("|".join(re.escape(s) for s in data.SPECIAL_TOKENS))
    parts = []
    n = 0
    while n < 120_000:
        t = special.sub("\n", data.text_of(g.sample()))
        t = re.sub(r"\n{2,}", "\n", t).strip()
        parts.append(t)
        n += len(t)
    with open(os.path.join(out, "heldout.txt"), "w") as f:
        f.write("\n\n".join(parts) + "\n")
    print({k: len(v) for k, v in sets.items()}, "heldout chars", n)


if __name__ == "__main__":
    main()
