#!/usr/bin/env python3
"""The same GPT-3 training step in PyTorch, timed beside ours: the GPU check's throughput table.

A GPT-2/GPT-3 model of a preset's shape (token and position embeddings, pre-LayerNorm blocks with
fused QKV, causal attention through scaled_dot_product_attention, a 4C tanh-GELU MLP, a final
LayerNorm and the LM head tied to the token embedding; vocabulary 50257 padded to 50304 as ours),
fp32 weights under bf16 autocast, cross-entropy in fp32, gradient clipping at 1.0 and AdamW (fused
where this torch has it): one full step per iteration on random tokens. Modes:
  eager     attention forced to the flash backend of SDPA where the device has it
  compile   torch.compile of the model (its warm-up steps compile)
The step's FLOPs count as ours does (6 x parameters + 6 x L x C x T per token); MFU against
--peak-flops (the bundle's peak-table entry). Device memory: torch's peak reserved bytes.

Output: one JSON line per run
    {"type":"torch_throughput","mode":...,"preset":...,"batch":B,"seq_len":T,"tokens_per_s":...,
     "ms_per_step":...,"mfu":...,"params":...,"memory_bytes":...,"attention":...,"torch":...,"device":...}
or, when it cannot run (no torch, no CUDA device without --allow-cpu, no torch.compile, out of
memory), one line
    torch-skipped MODE: REASON
and exit status 0 either way, so that the report says why a row is missing. --allow-cpu runs on the
CPU where no CUDA device is visible (the kit's self-test, with Debian's torch), the attention then
written out (torch 1.13 has no scaled_dot_product_attention).
"""
import argparse
import json
import sys
import time
import warnings

PRESETS = {  # name: (layers, channels, heads, context), as model/config.c
    "gpt3-125m": (12, 768, 12, 2048), "gpt3-350m": (24, 1024, 16, 2048),
    "gpt3-760m": (24, 1536, 16, 2048), "gpt3-1.3b": (24, 2048, 16, 2048),
    "gpt3-2.7b": (32, 2560, 32, 2048), "gpt3-6.7b": (32, 4096, 32, 2048),
    "gpt3-13b": (40, 5120, 40, 2048), "d12": (12, 768, 12, 1024),
    "tiny": (2, 64, 4, 256), "small": (4, 128, 4, 256),
}
VOCAB, VOCAB_PADDED = 50257, 50304


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", required=True, choices=sorted(PRESETS))
    ap.add_argument("--context", type=int, help="positions (default: the preset's; at least --seq-len)")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--steps", type=int, default=10, help="timed steps (default 10)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    ap.add_argument("--mode", choices=("eager", "compile"), default="eager")
    ap.add_argument("--peak-flops", type=float, default=0.0, help="FLOP/s of the device, for MFU (0: none)")
    ap.add_argument("--allow-cpu", action="store_true", help="run on the CPU when no CUDA device is visible")
    a = ap.parse_args()
    if a.batch < 1 or a.seq_len < 1 or a.steps < 1 or a.warmup < 1:
        ap.error("--batch, --seq-len, --steps and --warmup must be >= 1")
    return a


def skip(mode, reason):
    print(f"torch-skipped {mode}: {reason}", flush=True)
    sys.exit(0)


def build_model(torch, L, C, NH, context, attention):
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.fc, self.fc_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, NH, C // NH).permute(2, 0, 3, 1, 4)
            y = attention(q, k, v)  # (B, NH, T, HS)
            x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
            return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(VOCAB_PADDED, C), nn.Embedding(context, C)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(C)
            for p in self.parameters():
                if p.dim() == 2:
                    nn.init.normal_(p, std=0.02)

        def forward(self, idx, targets):
            T = idx.shape[1]
            x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
            for b in self.blocks:
                x = b(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)[..., :VOCAB]  # tied head
            return F.cross_entropy(logits.float().reshape(-1, VOCAB), targets.reshape(-1))

    return GPT()


def attention_fn(torch, device):
    """(function, name): SDPA forced to flash on a GPU that has it, else SDPA, else written out."""
    F = torch.nn.functional
    if hasattr(F, "scaled_dot_product_attention"):
        sdpa = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
        if device == "cuda":
            try:
                from torch.nn.attention import SDPBackend, sdpa_kernel
                return sdpa, "sdpa-flash", lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)
            except ImportError:
                pass
        return sdpa, "sdpa", None

    def written_out(q, k, v):
        T = q.shape[-2]
        s = (q @ k.transpose(-1, -2)) * (q.shape[-1] ** -0.5)
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
        return torch.softmax(s.float(), dim=-1).to(q.dtype) @ v
    return written_out, "written out (no scaled_dot_product_attention in torch " + torch.__version__ + ")", None


def main():
    a = parse_args()
    warnings.filterwarnings("ignore")
    try:
        import torch
    except Exception as e:  # no torch, or a broken install
        skip(a.mode, f"no usable torch ({type(e).__name__}: {e})")
    if torch.cuda.is_available():
        device = "cuda"
    elif a.allow_cpu:
        device = "cpu"
    else:
        skip(a.mode, f"torch {torch.__version__} sees no CUDA device")
    if a.mode == "compile" and not hasattr(torch, "compile"):
        skip(a.mode, f"torch.compile needs torch >= 2.0 (torch {torch.__version__} here)")
    L, C, NH, context = PRESETS[a.preset]
    context = max(a.context or context, a.seq_len)
    attend, attention_name, only_flash = attention_fn(torch, device)
    torch.manual_seed(1234)
    try:
        model = build_model(torch, L, C, NH, context, attend).to(device)
        params = sum(p.numel() for p in model.parameters())
        fused = device == "cuda" and "fused" in torch.optim.AdamW.__init__.__code__.co_varnames
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, **({"fused": True} if fused else {}))
        step_model = torch.compile(model) if a.mode == "compile" else model
        x = torch.randint(0, VOCAB, (a.batch, a.seq_len), device=device)
        y = torch.randint(0, VOCAB, (a.batch, a.seq_len), device=device)

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device_type=device, dtype=torch.bfloat16):
                if only_flash is not None and a.mode == "eager":
                    with only_flash():
                        loss = step_model(x, y)
                else:
                    loss = step_model(x, y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            return loss

        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        for _ in range(a.warmup):
            step()
        sync()
        start = time.perf_counter()
        for _ in range(a.steps):
            loss = step()
        sync()
        seconds = (time.perf_counter() - start) / a.steps
        if not torch.isfinite(loss).item():
            skip(a.mode, f"the loss is not finite ({loss.item()})")
    except RuntimeError as e:  # out of memory, a backend that refuses the shape
        skip(a.mode, f"{a.preset} B={a.batch} T={a.seq_len} failed: {str(e).splitlines()[0][:200]}")
    tokens = a.batch * a.seq_len
    flops = (6.0 * params + 6.0 * L * C * a.seq_len) * tokens
    print(json.dumps({
        "type": "torch_throughput", "mode": a.mode, "preset": a.preset, "batch": a.batch, "seq_len": a.seq_len,
        "tokens_per_s": tokens / seconds, "ms_per_step": 1e3 * seconds,
        "mfu": flops / seconds / a.peak_flops if a.peak_flops > 0 else None, "params": params,
        "memory_bytes": torch.cuda.max_memory_reserved() if device == "cuda" else None,
        "attention": attention_name, "adamw": "fused" if fused else "default", "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu", "steps": a.steps,
        "warmup": a.warmup}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
