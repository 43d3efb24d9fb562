"""Runs of one configuration under --muon-fp32-matmul-prec medium, high and highest (their
log.jsonl files, in that order): step 1's loss alike (no update before it), every later step's
different in each pair (the precision reaches the Newton-Schulz GEMMs), and every step within
BOUND relative of each other's (the precisions differ by rounding, not by training differently).

usage: check_muon_precisions.py BOUND MEDIUM_LOG HIGH_LOG HIGHEST_LOG
"""
import json
import sys


def losses(path):
    return [r["loss"] for r in map(json.loads, open(path)) if r["type"] == "step"]


bound, runs = float(sys.argv[1]), [losses(p) for p in sys.argv[2:5]]
n = len(runs[0])
assert n >= 2 and all(len(r) == n and r[0] == runs[0][0] for r in runs), runs
for i in range(3):
    for j in range(i):
        a, b = runs[i], runs[j]
        assert all(x != y for x, y in zip(a[1:], b[1:])), ("steps alike", i, j, a, b)
        worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
        assert worst < bound, ("apart by %.3g" % worst, i, j, a, b)
print("step %d: medium %.8f, high %.8f, highest %.8f" % ((n,) + tuple(r[-1] for r in runs)))
