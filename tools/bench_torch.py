#!/usr/bin/python3
"""PyTorch eager baseline for `make bench-cpu`: the same GPT (tests/torch_gpt_ref.py's model), the
same shape, forward + backward + AdamW on random tokens, tokens/s. Run with Debian's torch.
usage: tools/bench_torch.py [--preset-shape L C NH] [--batch B] [--seq T] [--steps N]"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from torch_gpt_ref import GPT  # noqa: E402  (the reference model, built from nn.Module pieces)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--channels", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--steps", type=int, default=2)
    a = p.parse_args()
    torch.manual_seed(0)
    V, Vp = 50257, 50304
    model = GPT(max(a.seq, 1024), V, a.layers, a.heads, a.channels, Vp)
    with torch.no_grad():   # GPT-2's initialisation, so the loss starts near log(V)
        for name, param in model.named_parameters():
            if param.dim() >= 2:
                torch.nn.init.normal_(param, std=0.02)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    idx = torch.randint(0, V, (a.batch, a.seq))
    tgt = torch.randint(0, V, (a.batch, a.seq))
    best = float("inf")
    for step in range(a.steps + 1):   # step 0 warms up
        t0 = time.time()
        opt.zero_grad(set_to_none=True)
        _, loss = model(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dt = time.time() - t0
        print(f"step {step}: loss {loss.item():.4f} {dt * 1e3:.0f} ms", flush=True)
        if step > 0:
            best = min(best, dt)
    print(f"result: torch {torch.__version__} eager, {torch.get_num_threads()} threads: "
          f"{a.batch * a.seq / best:.1f} tokens/s (best step {best * 1e3:.0f} ms)")
    print(f'{{"bench":"torch","tokens_per_s":{a.batch * a.seq / best:.2f},"step_ms":{best * 1e3:.1f}}}')


if __name__ == "__main__":
    main()
