#!/usr/bin/python3
"""Checks a tools/bench_collectives JSONL: 4 ops x SIZES points of finite positive times over P
ranks on TRANSPORT, and one fit per op over those points (finite alpha and beta where P >= 2).

    tests/check_collectives.py JSONL P TRANSPORT SIZES [CSV]
"""
import json
import math
import sys

path, P, transport, sizes = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
rows = [json.loads(l) for l in open(path)]
pts = [r for r in rows if r["type"] == "collective"]
fits = [r for r in rows if r["type"] == "fit"]
assert len(pts) == 4 * sizes and len(fits) == 4, (len(pts), len(fits))
assert all(r["P"] == P and r["transport"] == transport and r["seconds"] > 0 and
           math.isfinite(r["busbw_gbs"]) for r in pts), pts[:2]
assert sorted(f["op"] for f in fits) == ["all_gather", "all_reduce", "reduce_scatter", "send_recv"]
assert all(f["points"] == sizes and f["P"] == P and f["transport"] == transport for f in fits), fits
if P >= 2:
    assert all(math.isfinite(f["alpha_s"]) and math.isfinite(f["beta_s_per_byte"]) for f in fits), fits
if len(sys.argv) > 5:
    assert len(open(sys.argv[5]).read().splitlines()) == 4 * sizes + 1
print("ok: %d points, %d fits, %d ranks on %s" % (len(pts), len(fits), P, transport))
