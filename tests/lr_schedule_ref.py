#!/usr/bin/env python3
"""The trainer's learning-rate schedules against PyTorch's own schedulers.

  lr_schedule_ref.py LOG --schedule cosine|linear|constant|wsd|inverse-sqrt --lr X --warmup N
                         --steps N [--final-frac F] [--decay-frac F]
                         [--wsd-style linear|cosine|exponential|minus-sqrt] [--tol T]

Reads the "lr" of every step record of a trainer's JSONL log (step s is logged as s + 1) and
compares it with the learning rate torch.optim.lr_scheduler gives the same step: LinearLR for the
warmup (from lr / warmup up to lr), then CosineAnnealingLR, LinearLR, ConstantLR or, for wsd,
ConstantLR followed by the decay over the last ceil(decay_frac * (steps - warmup)) steps, chained
by SequentialLR. wsd's decay is LinearLR or CosineAnnealingLR; its exponential and minus-sqrt
forms, which torch does not have, are Megatron-LM's coefficients (2 * 0.5^r - 1, 1 - sqrt(r)) in a
LambdaLR, and inverse-sqrt is fairseq's rule in a LambdaLR: lr * sqrt(warmup) / sqrt(updates
done), warmup and updates at least 1, never under the floor lr * final_frac. Exits 1 when any
step differs by more than tol * lr.
"""
import argparse
import json
import math
import sys
import warnings

import torch
from torch.optim import lr_scheduler as S


def reference(a):
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=a.lr)
    after = a.steps - a.warmup
    if a.schedule == "cosine":
        main = [S.CosineAnnealingLR(opt, T_max=after, eta_min=a.lr * a.final_frac)]
    elif a.schedule == "linear":
        main = [S.LinearLR(opt, start_factor=1.0, end_factor=a.final_frac, total_iters=after)]
    elif a.schedule == "constant":
        main = [S.ConstantLR(opt, factor=1.0, total_iters=after)]
    elif a.schedule == "inverse-sqrt":   # counts every update, the warmup's too
        w = max(a.warmup, 1)
        rule = lambda k: max(a.final_frac, math.sqrt(w / max(k + a.warmup, 1)))
        main = [S.LambdaLR(opt, rule)]
    else:
        decay = math.ceil(a.decay_frac * after - 1e-9)
        floor = a.final_frac
        coeff = {"exponential": lambda r: 2 * 0.5 ** r - 1, "minus-sqrt": lambda r: 1 - math.sqrt(r)}
        if a.wsd_style == "linear":
            tail = S.LinearLR(opt, start_factor=1.0, end_factor=floor, total_iters=decay)
        elif a.wsd_style == "cosine":
            tail = S.CosineAnnealingLR(opt, T_max=decay, eta_min=a.lr * floor)
        else:
            c = coeff[a.wsd_style]
            tail = S.LambdaLR(opt, lambda k: floor + (1 - floor) * c(min(k / decay, 1.0)))
        main = [S.ConstantLR(opt, factor=1.0, total_iters=after - decay), tail]
    parts, milestones = main, []
    if a.warmup > 0:
        parts = [S.LinearLR(opt, start_factor=1.0 / a.warmup, end_factor=1.0,
                            total_iters=a.warmup - 1)] + main
        milestones = [a.warmup]
    if a.schedule == "wsd":
        milestones.append(a.warmup + after - math.ceil(a.decay_frac * after - 1e-9))
    sched = S.SequentialLR(opt, parts, milestones) if len(parts) > 1 else parts[0]
    out = []
    for _ in range(a.steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("log")
    p.add_argument("--schedule", required=True,
                   choices=["cosine", "linear", "constant", "wsd", "inverse-sqrt"])
    p.add_argument("--wsd-style", default="linear",
                   choices=["linear", "cosine", "exponential", "minus-sqrt"])
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--warmup", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--final-frac", type=float, default=0.1)
    p.add_argument("--decay-frac", type=float, default=0.2)
    p.add_argument("--tol", type=float, default=1e-7)
    a = p.parse_args()
    got = {}
    for line in open(a.log):
        r = json.loads(line)
        if r.get("type") == "step":
            got[r["step"] - 1] = r["lr"]
    warnings.simplefilter("ignore")   # SequentialLR's notes about step()
    ref = reference(a)
    if sorted(got) != list(range(a.steps)):
        sys.exit(f"{a.log}: expected step records 1..{a.steps}, found {len(got)}")
    worst = max(range(a.steps), key=lambda s: abs(got[s] - ref[s]))
    err = abs(got[worst] - ref[worst]) / a.lr
    name = a.schedule + (f" ({a.wsd_style} decay)" if a.schedule == "wsd" else "")
    print(f"{name}: {a.steps} steps, worst |lr - torch| / lr = {err:.2e} at step {worst} "
          f"(ours {got[worst]:.9g}, torch {ref[worst]:.9g}); first/last "
          f"{got[0]:.6g} .. {got[a.steps - 1]:.6g}")
    sys.exit(0 if err <= a.tol else 1)


if __name__ == "__main__":
    main()
