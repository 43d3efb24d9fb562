#!/usr/bin/env python3
"""Recomputes the crossover exercise of attention/README.md from the per-rank formulas of
attention2d.md (generalised to pq x pkv) and Ring's, and compares with build/explain --crossover.

    python3 explain/crossover_check.py EXPLAIN NH HS

For P = 2..16, T = P (one token per rank), B = 1, 4-byte elements: the busiest rank of the best
mesh of ATTENTION2D against Ring, forward and forward + backward. Exit 0 when the tool's last line
names the same two P; 1 with a one-line message otherwise.
"""
import subprocess
import sys


def attention2d(pq, pkv, nh, hs):
    s, l = hs * nh, nh   # one shard (Tl = 1 token, C = NH*HS) and one LSE shard
    fwd = bwd = 0
    for i in range(pq * pkv):
        moves = i != i // pq + pkv * (i % pq)
        f = 2 * s * moves + (pkv - 1) * s + 2 * (pq - 1) * s + (pkv - 1) * (s + l)
        b = ((pkv - 1) * (2 * s + 2 * l) + 2 * s * moves + 2 * (pq - 1) * s + (pkv - 1) * s
             + 2 * (pq - 1) * s + 2 * s * moves)
        fwd, bwd = max(fwd, f), max(bwd, f + b)
    return 4 * fwd, 4 * bwd


def main():
    explain, nh, hs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    first = [0, 0]
    for p in range(2, 17):
        best = [min(attention2d(pq, p // pq, nh, hs)[k] for pq in range(1, p + 1) if p % pq == 0)
                for k in (0, 1)]
        s = nh * hs
        ring = [4 * 2 * (p - 1) * s, 4 * (2 * (p - 1) * s + 2 * (p - 1) * s + 2 * p * s)]
        for k in (0, 1):
            if not first[k] and best[k] < ring[k]:
                first[k] = p
    want = "from P = %d (forward), P = %d (forward + backward)" % tuple(first)
    out = subprocess.run([explain, "--crossover", "--heads", str(nh), "--head-size", str(hs)],
                         capture_output=True, text=True, check=False)
    last = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    if out.returncode != 0 or not last.endswith(want):
        print("error: explain --crossover --heads %d --head-size %d: expected '... %s', found '%s'"
              % (nh, hs, want, last), file=sys.stderr)
        return 1
    print("crossover NH=%d HS=%d: %s" % (nh, hs, want))
    return 0


if __name__ == "__main__":
    sys.exit(main())
