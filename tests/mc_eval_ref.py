#!/usr/bin/env python3
"""Multiple-choice evaluation files in llm.c's format, written and scored independently of the C
code, for tests/test_mc_eval.sh.

  mc_eval_ref.py write OUT --examples N [--vocab V] [--seed S] [--max-ctx N] [--max-len N]
                                       [--completions K] [--ragged]
      an eval file of random examples (llm.c's write_evalfile layout: a 256 x int32 header, then
      per example 65535, bytes, index, label, completions, the context and each completion as a
      length and tokens, all uint16); --ragged varies the completion count between 2 and K;
      --pattern draws contexts and one completion from the shard's pattern
  mc_eval_ref.py shard OUT --tokens N [--seed S]
      an llm.c token shard of a pattern a small model learns in a few dozen steps (see shard)
  mc_eval_ref.py score MODEL EVAL [--examples N] [--tol X]
      the completion-style scores of llm.c's dev/data/hellaswag.py with tests/torch_gpt_ref.py's
      model on an llm.c model file, as JSON: for acc (least summed loss) and acc_norm (least mean
      loss per completion token), the examples right and the examples whose best two completions
      are within X of each other (a lower precision may rank those either way)
"""
import argparse
import json
import os
import random
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_gpt_ref as ref  # noqa: E402

MAGIC, VERSION = 20240522, 1
PATTERN = 64   # the alphabet of the `shard` data and --pattern examples


def write(args):
    rnd = random.Random(args.seed)
    stream, longest = [], 0
    for idx in range(args.examples):
        k = rnd.randint(2, args.completions) if args.ragged else args.completions
        vocab = PATTERN if args.pattern else args.vocab
        ctx = [rnd.randrange(vocab) for _ in range(rnd.randint(1, args.max_ctx))]
        ends = [[rnd.randrange(vocab) for _ in range(rnd.randint(1, args.max_len))]
                for _ in range(k)]
        label = rnd.randrange(k)
        if args.pattern:
            # The context counts up; one completion goes on counting (the label 6 times in 10,
            # so that a scorer that ignores the labels, or the losses, is found out).
            ctx = pattern_run(rnd, rnd.randrange(PATTERN), len(ctx))
            right = label if rnd.random() < 0.6 else (label + 1) % k
            ends[right] = pattern_run(rnd, ctx[-1] + 1, len(ends[right]))
        ex = [65535, 0, idx, label, k, len(ctx)] + ctx
        for e in ends:
            ex += [len(e)] + e
        ex[1] = 2 * len(ex)
        longest = max(longest, ex[1])
        stream += ex
    header = [MAGIC, VERSION, args.examples, longest] + [0] * 252
    with open(args.out, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack(f"<{len(stream)}H", *stream))


def pattern_run(rnd, start, n):
    return [(start + i) % PATTERN for i in range(n)]


def shard(args):
    """Tokens that count up modulo PATTERN, restarting at random 1 time in 10: what a small model
    learns in a few dozen steps, so that its choices between completions are clear."""
    rnd = random.Random(args.seed)
    x, toks = 0, []
    for _ in range(args.tokens):
        x = rnd.randrange(PATTERN) if rnd.random() < 0.1 else (x + 1) % PATTERN
        toks.append(x)
    with open(args.out, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)))
        f.write(struct.pack(f"<{len(toks)}H", *toks))


def read(path, limit):
    data = open(path, "rb").read()
    h = struct.unpack_from("<256i", data)
    assert h[0] == MAGIC and h[1] == VERSION, (path, h[:2])
    w = np.frombuffer(data[1024:], dtype="<u2").astype(np.int64)
    n = h[2] if limit <= 0 else min(limit, h[2])
    out, k = [], 0
    for i in range(n):
        assert w[k] == 65535 and w[k + 2] == i, (path, i)
        end = k + w[k + 1] // 2
        label, ncomp, nctx = int(w[k + 3]), int(w[k + 4]), int(w[k + 5])
        p = k + 6
        ctx = w[p:p + nctx].tolist()
        p += nctx
        ends = []
        for _ in range(ncomp):
            m = int(w[p])
            ends.append(w[p + 1:p + 1 + m].tolist())
            p += 1 + m
        assert p == end, (path, i)
        out.append((label, ctx, ends))
        k = end
    return out


def score(args):
    model, cfg = ref.load_model(args.model)
    model.eval()
    counts = {"acc": [0, 0], "acc_norm": [0, 0]}   # [right, within tol]
    examples = read(args.eval, args.examples)
    with torch.no_grad():
        for label, ctx, ends in examples:
            rows = [ctx + e for e in ends]
            T = max(len(r) for r in rows)
            idx = torch.zeros((len(rows), T), dtype=torch.long)
            for i, r in enumerate(rows):
                idx[i, :len(r)] = torch.tensor(r)
            logits, _ = model(idx, torch.zeros_like(idx))
            logits = logits[..., :cfg["V"]].double()
            losses = F.cross_entropy(logits[:, :-1].reshape(-1, cfg["V"]), idx[:, 1:].reshape(-1),
                                     reduction="none").view(len(rows), T - 1)
            sums, means = [], []
            for i, e in enumerate(ends):
                s = losses[i, len(ctx) - 1:len(ctx) - 1 + len(e)].sum().item()
                sums.append(s)
                means.append(s / len(e))
            for name, v in (("acc", sums), ("acc_norm", means)):
                order = sorted(range(len(v)), key=lambda j: (v[j], j))
                counts[name][0] += order[0] == label
                counts[name][1] += v[order[1]] - v[order[0]] <= args.tol
    print(json.dumps({"examples": len(examples),
                      "correct": counts["acc"][0], "close": counts["acc"][1],
                      "correct_norm": counts["acc_norm"][0], "close_norm": counts["acc_norm"][1]}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("out")
    w.add_argument("--examples", type=int, required=True)
    w.add_argument("--vocab", type=int, default=512)
    w.add_argument("--seed", type=int, default=1)
    w.add_argument("--max-ctx", type=int, default=12)
    w.add_argument("--max-len", type=int, default=6)
    w.add_argument("--completions", type=int, default=4)
    w.add_argument("--ragged", action="store_true")
    w.add_argument("--pattern", action="store_true",
                   help="contexts that count up, one completion going on (see shard)")
    d = sub.add_parser("shard")
    d.add_argument("out")
    d.add_argument("--tokens", type=int, required=True)
    d.add_argument("--seed", type=int, default=1)
    s = sub.add_parser("score")
    s.add_argument("model")
    s.add_argument("eval")
    s.add_argument("--examples", type=int, default=0)
    s.add_argument("--tol", type=float, default=1e-4)
    a = p.parse_args()
    {"write": write, "shard": shard, "score": score}[a.cmd](a)


if __name__ == "__main__":
    main()
