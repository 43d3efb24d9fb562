#!/usr/bin/env python3
"""Writes the learnable token stream the trainer comparisons use (tools/trainer_checks.sh): a noisy
counting sequence over 64 of 512 tokens, as llm.c shards (uint16, version 1), so that a wrong
gradient or update shows in the losses within a few steps instead of hiding under a flat curve.

usage: tools/stream_shards.py DIR [TRAIN_TOKENS VAL_TOKENS]
    writes DIR/t_train_000001.bin and DIR/t_val_000000.bin, of 12000 and 1000 tokens by default
    (the GPU check's long-sequence runs use larger ones)
"""
import os
import struct
import sys


def shard(path, n, x):
    toks, t = [], 0
    for _ in range(n):
        x = (x * 1103515245 + 12345) & 0x7fffffff
        r = x >> 8
        t = (t + 1) % 64 if r % 8 else (r >> 3) % 512
        toks.append(t)
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
        f.write(struct.pack("<%dH" % n, *toks))


if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
    print(__doc__.strip())
    sys.exit(0)
if len(sys.argv) not in (2, 4) or sys.argv[1].startswith("-"):
    sys.exit("usage: stream_shards.py DIR [TRAIN_TOKENS VAL_TOKENS] (DIR not an option: found %s)"
             % (sys.argv[1] if len(sys.argv) > 1 else "none"))
sizes = (12000, 1000)
if len(sys.argv) == 4:
    try:
        sizes = (int(sys.argv[2]), int(sys.argv[3]))
    except ValueError:
        sizes = (0, 0)
    if not all(0 < n <= 1 << 24 for n in sizes):
        sys.exit("stream_shards.py: expected token counts in [1, 16777216], found %s %s" % tuple(sys.argv[2:4]))
os.makedirs(sys.argv[1], exist_ok=True)
shard(os.path.join(sys.argv[1], "t_train_000001.bin"), sizes[0], 7)
shard(os.path.join(sys.argv[1], "t_val_000000.bin"), sizes[1], 9)
