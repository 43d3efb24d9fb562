#!/usr/bin/env python3
"""Compares two runs of build/generate (--logits-out logits, --print ids tokens).

usage: generate_logits_check.py NAME V LOGITS_A LOGITS_B REL [TOKENS_A TOKENS_B]

Passes when both files hold the same number of steps and max |A - B| <= REL x max |B| over them.
With the token files, the tokens must be equal too, except at a step where B's two largest logits
are closer than twice that bound: there the bound allows either token, so the comparison stops
there (and says so) instead of failing.
"""
import array
import sys


def load(path):
    a = array.array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    return a


def tokens(path):
    """The tokens of a --print ids file in decode order: round by round over the sequences
    still generating, as build/generate decodes them."""
    with open(path) as f:
        seqs = [line.split()[1:] for line in f]
    out = []
    for r in range(max(map(len, seqs), default=0)):
        out += [s[r] for s in seqs if r < len(s)]
    return out


def main():
    if len(sys.argv) not in (6, 8):
        sys.exit(__doc__.split("\n\n")[1])
    name, V, rel = sys.argv[1], int(sys.argv[2]), float(sys.argv[5])
    a, b = load(sys.argv[3]), load(sys.argv[4])
    steps = len(b) // V
    if len(a) != len(b) or steps == 0 or len(b) % V:
        print("  FAIL  %s: %d vs %d logits (V = %d)" % (name, len(a), len(b), V))
        return 1
    scale = max(abs(x) for x in b)
    bound = rel * scale
    if len(sys.argv) == 8:
        ta, tb = tokens(sys.argv[6]), tokens(sys.argv[7])
        if len(ta) != steps or len(tb) != steps:
            print("  FAIL  %s: %d and %d tokens for %d steps" % (name, len(ta), len(tb), steps))
            return 1
        for step, (x, y) in enumerate(zip(ta, tb)):
            if x == y:
                continue
            row = sorted(b[step * V:(step + 1) * V])
            if row[-1] - row[-2] > 2 * bound:
                print("  FAIL  %s: token %s != %s at step %d, whose margin %.3g > 2 x bound %.3g"
                      % (name, x, y, step, row[-1] - row[-2], bound))
                return 1
            print("  note  %s: near tie at step %d; compared up to it" % (name, step))
            steps = step + 1
            break
    diff = max(abs(x - y) for x, y in zip(a[:steps * V], b[:steps * V]))
    ok = diff <= bound
    print("  %s  %s: %d steps, max |logit diff| %.3g <= %g x max |logit| %.3g = %.3g"
          % ("ok  " if ok else "FAIL", name, steps, diff, rel, scale, bound))
    return 0 if ok else 1


sys.exit(main())
