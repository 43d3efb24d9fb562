#!/usr/bin/python3
"""Independent PyTorch (CPU, fp32) reference of the GPT-2 model and its AdamW (or Muon) training.

Reads an llm.c model file (version 3, fp32) and a batch file, computes logits, loss,
parameter gradients and `--steps` AdamW steps on that same batch, then either writes
them (--write) in the results format or compares them against the C program's results
(--results).  Run with Debian's torch: /usr/bin/python3 tests/torch_gpt_ref.py --help

Metric per tensor: max|c - ref| / max(max|ref|, 1e-30); losses: |c - ref| / |ref|.
Exit status: 0 all within tolerance, 1 some comparison failed, 2 bad input file/arguments.
The key third of qkvb has an exactly-zero gradient (softmax ignores a per-query constant), so in
fp32 it is rounding noise that AdamW turns into small updates: for it we check that both gradients
are ~0 and compare only the q and v thirds of the final qkvb (see compare()). Under rotary
positions (header[11] theta) the key bias is rotated by each key's position and its gradient is
defined, so the gradient of qkvb is compared whole; but the slow pairs of a head barely turn over
a short sequence (at theta 500000, head size 8, pair 3 by 5e-5 rad per position), so their
gradients are nearly 0 too, and the final key bias is left out as before.

The block's form (Llama's where not 0; all three are 0 in llm.c's and every earlier file):
  header[15] norm: 0 LayerNorm (weight and bias), 1 RMSNorm, y = x / sqrt(mean(x^2) + eps) *
             weight over the last dimension, no bias: ln1b, ln2b and lnfb then have 0 elements.
  header[16] mlp: 0 GELU (tanh approximation): fcw (L, F, C), fcb (L, F), fcprojw (L, C, F);
             1 SwiGLU: fcw (L, 2F, C), fcb (L, 2F), h = x fcw^T + fcb, a = silu(h[:F]) * h[F:]
             (F gate columns, then F up columns), out = a fcprojw^T + fcprojb, fcprojw (L, C, F).
  header[17] ffn_hidden: F, the MLP's hidden width; 0 means 4C (GPT's).
  header[18] no_linear_bias: 1 for linear layers without biases (qkvb, attprojb, fcb, fcprojb
             have 0 elements); 0 (GPT's) with them.
  header[19] untied_classifier: 1 for a classifier of its own, a 17th tensor `classifier` (Vp, C)
             after lnfb: logits = lnf(x) classifier^T; 0 (GPT's, llm.c's): logits = lnf(x) wte^T
             and the 17th tensor has 0 elements.
  header[20] the norms' epsilon as fp32 bits (Qwen2's 1e-6); 0 means 1e-5.
  header[21] qkv_bias: 1 when qkvb is present under header[18] = 1 (Qwen2's block: the qkv
             projection's bias alone); 0 otherwise.
  header[22] qk_norm: 1 for QK-norm (Megatron-LM's --qk-layernorm, Qwen3's block): every query
             head, and every key head, normalised over its hs channels by the block's norm
             before the rotary embedding; tensors 18-21 qnormw, qnormb, knormw, knormb (L, hs)
             (the biases only under LayerNorm), 0 elements without it.
Tensors with 0 elements (wpe under rotary positions, the norm biases under RMSNorm) are not
compared (they are listed as such).
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MODEL_MAGIC, MODEL_VERSION = 20240326, 3
BATCH_MAGIC, BATCH_VERSION = 20261101, 1
RESULTS_MAGIC, RESULTS_VERSION = 20261102, 1
HEADER_BYTES = 256 * 4

# The 17 parameter tensors in file order: llm.c's 16, then the untied classifier (0 elements when
# tied).  (Weight-decayed ones are the matrices/embeddings.)
NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
         "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb", "classifier",
         "qnormw", "qnormb", "knormw", "knormb"]
DECAYED = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw", "classifier"}


def die(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def read_file(path, what):
    """Returns (header int32[256], body bytes); exits 2 if the file is too short."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        die(f"{what} file {path}: {e}")
    if len(data) < HEADER_BYTES:
        die(f"{what} file {path}: {len(data)} bytes, shorter than the {HEADER_BYTES}-byte header")
    return np.frombuffer(data[:HEADER_BYTES], dtype="<i4").copy(), data[HEADER_BYTES:]


def check_header(path, what, h, magic, version):
    if h[0] != magic:
        die(f"{what} file {path}: header[0] (magic) expected {magic}, found {h[0]}")
    if h[1] != version:
        extra = " (version 5 = bf16 weights is not supported; use fp32 version 3)" if what == "model" and h[1] == 5 else ""
        die(f"{what} file {path}: header[1] (version) expected {version}, found {h[1]}{extra}")


def param_sizes(maxT, V, L, NH, C, Vp, KV=0, rope=0, norm=0, mlp=0, ffn=0, nobias=0, untied=0,
                qkvbias=0, qknorm=0):
    W = C + 2 * (KV or NH) * (C // NH)  # the qkv projection: 3C, narrower under GQA
    Fh = ffn or 4 * C  # the MLP's hidden width (header[17]; 0: 4C)
    Fw = 2 * Fh if mlp == 1 else Fh  # the MLP's first layer: gate and up columns under SwiGLU
    nb = 0 if norm == 1 else C  # a norm's bias: none under RMSNorm
    lb = 0 if nobias else 1  # the linear layers' biases (header[18])
    qb = 1 if lb or qkvbias else 0  # the qkv projection's (header[21])
    # no position table under rotary positions
    return {"wte": Vp * C, "wpe": 0 if rope else maxT * C, "ln1w": L * C, "ln1b": L * nb,
            "qkvw": L * W * C, "qkvb": L * W * qb, "attprojw": L * C * C, "attprojb": L * C * lb,
            "ln2w": L * C, "ln2b": L * nb, "fcw": L * Fw * C, "fcb": L * Fw * lb,
            "fcprojw": L * C * Fh, "fcprojb": L * C * lb, "lnfw": C, "lnfb": nb,
            "classifier": Vp * C if untied else 0,
            # QK-norm (header[22]): a weight (and a LayerNorm's bias) of hs per layer, each kind
            "qnormw": L * (C // NH) * qknorm, "qnormb": L * (C // NH) * qknorm * (norm == 0),
            "knormw": L * (C // NH) * qknorm, "knormb": L * (C // NH) * qknorm * (norm == 0)}


# ----------------------------------------------------------------------------- model
ROPE_SCALINGS = {0: "none", 1: "linear", 2: "yarn", 3: "llama3"}  # header[12]


def rope_inv_freq(hs, theta, scaling=(0, 0.0, 0)):
    """float64 (hs/2) frequencies and the amplitude of Hugging Face's rope types (transformers'
    modeling_rope_utils: default, linear, yarn with beta_fast 32 and beta_slow 1, llama3 with
    low_freq_factor 1 and high_freq_factor 4), written from that code, vectorised."""
    kind, factor, orig = scaling
    inv = 1.0 / float(theta) ** (torch.arange(0, hs, 2, dtype=torch.float64) / hs)
    if kind == 1:
        return inv / factor, 1.0
    if kind == 2:
        def corr_dim(rot):
            return hs * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(theta))
        low, high = max(math.floor(corr_dim(32)), 0), min(math.ceil(corr_dim(1)), hs - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(hs // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
        extrapolation = 1 - ramp
        amplitude = 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0
        return inv / factor * (1 - extrapolation) + inv * extrapolation, amplitude
    if kind == 3:
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > orig / 1.0, inv / factor, inv)
        smooth = (orig / wavelen - 1.0) / (4.0 - 1.0)
        medium = (wavelen >= orig / 4.0) & (wavelen <= orig / 1.0)
        return torch.where(medium, (1 - smooth) * scaled / factor + smooth * scaled, scaled), 1.0
    return inv, 1.0


def rope_cos_sin(pos, hs, theta, scaling=(0, 0.0, 0)):
    """fp32 cos, sin (B, 1, T, hs/2) of the angles pos * f_i (f_i = theta^(-2i/hs) or its scaling,
    header[12..14]), times the scaling's amplitude, computed in float64."""
    inv, amplitude = rope_inv_freq(hs, theta, scaling)
    angle = pos.to(torch.float64)[..., None] * inv
    return ((amplitude * angle.cos()).float().unsqueeze(1),
            (amplitude * angle.sin()).float().unsqueeze(1))


def rope_rotate(x, cs):
    """Rotary embeddings, GPT-NeoX's half-split layout: pair (i, i + hs/2) of each head turned."""
    cos, sin = cs
    half = x.shape[-1] // 2
    x0, x1 = x[..., :half], x[..., half:]
    return torch.cat([x0 * cos - x1 * sin, x1 * cos + x0 * sin], dim=-1)


class CausalSelfAttention(nn.Module):
    def __init__(self, C, NH, window=0, KV=0, bias=True, qkv_bias=True, qk_norm=None):
        super().__init__()
        # QK-norm: (norm, eps) of the block's norm over a head's hs channels; None: none
        self.q_norm = make_norm(C // NH, *qk_norm) if qk_norm else None
        self.k_norm = make_norm(C // NH, *qk_norm) if qk_norm else None
        self.NH = NH
        self.KV = KV or NH  # key/value heads: grouped-query attention when fewer than NH
        self.window = window  # 0: causal; W: a query at t sees only keys t-W+1 .. t
        self.qkv = nn.Linear(C, C + 2 * self.KV * (C // NH), bias=qkv_bias)
        self.proj = nn.Linear(C, C, bias=bias)

    def forward(self, x, same_doc=None, rope=None):
        B, T, C = x.shape
        hs = C // self.NH
        q, k, v = self.qkv(x).split([C, self.KV * hs, self.KV * hs], dim=2)
        # heads are contiguous slices of hs channels: (B, T, heads, hs) -> (B, heads, T, hs)
        q = q.view(B, T, self.NH, hs).transpose(1, 2)
        k, v = (t.view(B, T, self.KV, hs).transpose(1, 2) for t in (k, v))
        if self.q_norm is not None:  # QK-norm: every head over its channels, before the rotation
            q, k = self.q_norm(q), self.k_norm(k)
        if rope is not None:  # rotary positions: queries and keys turned, values not
            q, k = rope_rotate(q, rope), rope_rotate(k, rope)
        # grouped-query attention: query head h reads key/value head h // (NH // KV)
        k, v = (t.repeat_interleave(self.NH // self.KV, dim=1) for t in (k, v))
        if self.window or same_doc is not None:
            # the causal mask, under a sliding window the band 0 <= t - s < W of it, and under
            # document masking only the pairs of one document (same_doc: (B, 1, T, T))
            t = torch.arange(T)
            band = t[:, None] - t[None, :] >= 0
            if self.window:
                band = band & (t[:, None] - t[None, :] < self.window)
            if same_doc is not None:
                band = band & same_doc
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            y = F.softmax(att.masked_fill(~band, float("-inf")), dim=-1) @ v
        elif hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch < 2.0: explicit causal attention
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
            att = F.softmax(att.masked_fill(future, float("-inf")), dim=-1)
            y = att @ v
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x^2, last dim) + eps) * weight (header[15] = 1): no mean, no bias."""
    def __init__(self, C, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(C))
        self.bias = None  # (ln1b, ln2b and lnfb have 0 elements)

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


def make_norm(C, norm, eps=1e-5):
    return RMSNorm(C, eps=eps) if norm == 1 else nn.LayerNorm(C, eps=eps)


class MLP(nn.Module):
    def __init__(self, C, mlp=0, ffn=0, bias=True):
        super().__init__()
        self.swiglu = mlp == 1  # header[16]: 0 GELU, 1 SwiGLU
        self.hidden = ffn or 4 * C  # header[17]: F (0: 4C)
        self.fc = nn.Linear(C, 2 * self.hidden if self.swiglu else self.hidden, bias=bias)
        self.proj = nn.Linear(self.hidden, C, bias=bias)

    def forward(self, x):
        h = self.fc(x)
        if self.swiglu:  # F gate columns, then F up columns
            gate, up = h.split([self.hidden, self.hidden], dim=-1)
            return self.proj(F.silu(gate) * up)
        return self.proj(F.gelu(h, approximate="tanh"))


class Block(nn.Module):
    def __init__(self, C, NH, window=0, KV=0, norm=0, mlp=0, ffn=0, bias=True, qkv_bias=True, eps=1e-5,
                 qk_norm=False):
        super().__init__()
        self.ln1 = make_norm(C, norm, eps)
        self.attn = CausalSelfAttention(C, NH, window, KV, bias, qkv_bias,
                                        (norm, eps) if qk_norm else None)
        self.ln2 = make_norm(C, norm, eps)
        self.mlp = MLP(C, mlp, ffn, bias)

    def forward(self, x, same_doc=None, rope=None):
        x = x + self.attn(self.ln1(x), same_doc, rope)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, maxT, V, L, NH, C, Vp, window=0, window_every=0, KV=0, rope=0,
                 rope_scaling=(0, 0.0, 0), norm=0, mlp=0, ffn=0, nobias=0, untied=0, eps=1e-5,
                 qkvbias=0, qknorm=0):
        super().__init__()
        self.rope_scaling = rope_scaling  # (kind, factor, original context): header[12..14]
        self.V = V
        self.hs = C // NH
        self.rope = rope  # rotary positions' theta (header[11]); 0: the learned table wpe
        self.wte = nn.Embedding(Vp, C)
        self.wpe = None if rope else nn.Embedding(maxT, C)
        # banded layers: l % window_every == 0 (header[8] window, header[9] window_every);
        # KV: the key/value heads (header[10]; 0: one per head); norm, mlp, ffn: header[15..17];
        # nobias: header[18]; eps: header[20]; qkvbias: header[21]
        self.blocks = nn.ModuleList([Block(C, NH, window if window and l % window_every == 0 else 0, KV,
                                           norm, mlp, ffn, not nobias, not nobias or qkvbias == 1, eps,
                                           qknorm == 1)
                                     for l in range(L)])
        self.lnf = make_norm(C, norm, eps)
        # untied: header[19], the classifier's own (Vp, C) matrix; None: tied to wte
        self.classifier = nn.Parameter(torch.zeros(Vp, C)) if untied else None
        self.boundary = 0  # document masking's boundary token (the batch file's header[4]; 0: none)
        self.reset_positions = False  # positions within documents (header[5]; Megatron's --reset-position-ids)

    def forward(self, idx, targets):
        T = idx.shape[1]
        pos = torch.arange(T).expand_as(idx)
        if self.reset_positions:  # minus the position of the latest boundary at or before it (0: none)
            start = torch.where(idx == self.boundary, pos, torch.zeros_like(pos))
            pos = pos - torch.cummax(start, dim=1).values
        x = self.wte(idx) if self.rope else self.wte(idx) + self.wpe(pos)
        rope = rope_cos_sin(pos, self.hs, self.rope, self.rope_scaling) if self.rope else None
        same_doc = None
        if self.boundary:  # document masking: a document begins at each boundary token
            doc = torch.cumsum(idx == self.boundary, dim=1)  # (B, T) document number
            same_doc = (doc[:, :, None] == doc[:, None, :]).unsqueeze(1)
        for blk in self.blocks:
            x = blk(x, same_doc, rope)
        head = self.wte.weight if self.classifier is None else self.classifier
        logits = self.lnf(x) @ head.t()  # the LM head over all Vp rows
        loss = F.cross_entropy(logits[..., :self.V].reshape(-1, self.V), targets.reshape(-1))
        return logits, loss

    def groups(self):
        """name -> list of nn.Parameter whose concatenation (flattened) is that file tensor
        (empty for a 0-element one: wpe under rotary positions, the norm biases under RMSNorm, the
        linear biases without them)."""
        bl = self.blocks

        def some(ps):
            return [p for p in ps if p is not None]
        return {"wte": [self.wte.weight], "wpe": [self.wpe.weight] if self.wpe else [],
                "ln1w": [b.ln1.weight for b in bl], "ln1b": some(b.ln1.bias for b in bl),
                "qkvw": [b.attn.qkv.weight for b in bl], "qkvb": some(b.attn.qkv.bias for b in bl),
                "attprojw": [b.attn.proj.weight for b in bl], "attprojb": some(b.attn.proj.bias for b in bl),
                "ln2w": [b.ln2.weight for b in bl], "ln2b": some(b.ln2.bias for b in bl),
                "fcw": [b.mlp.fc.weight for b in bl], "fcb": some(b.mlp.fc.bias for b in bl),
                "fcprojw": [b.mlp.proj.weight for b in bl], "fcprojb": some(b.mlp.proj.bias for b in bl),
                "lnfw": [self.lnf.weight], "lnfb": some([self.lnf.bias]),
                "classifier": some([self.classifier]),
                "qnormw": some(b.attn.q_norm and b.attn.q_norm.weight for b in bl),
                "qnormb": some(b.attn.q_norm and b.attn.q_norm.bias for b in bl),
                "knormw": some(b.attn.k_norm and b.attn.k_norm.weight for b in bl),
                "knormb": some(b.attn.k_norm and b.attn.k_norm.bias for b in bl)}


def flat(tensors):
    if not tensors:
        return np.zeros(0, dtype=np.float32)
    return torch.cat([t.detach().reshape(-1) for t in tensors]).numpy().astype(np.float32)


# ----------------------------------------------------------------------------- inputs
def load_model(path):
    h, body = read_file(path, "model")
    check_header(path, "model", h, MODEL_MAGIC, MODEL_VERSION)
    maxT, V, L, NH, C, Vp = (int(v) for v in h[2:8])
    for i, (n, v) in enumerate(zip(["maxT", "V", "L", "NH", "C", "Vp"], [maxT, V, L, NH, C, Vp])):
        if v <= 0:
            die(f"model file {path}: header[{i + 2}] ({n}) must be > 0, found {v}")
    if Vp < V:
        die(f"model file {path}: header[7] (Vp) = {Vp} is smaller than V = {V}")
    if C % NH:
        die(f"model file {path}: C = {C} is not divisible by NH = {NH}")
    window, window_every = int(h[8]), int(h[9])
    if not (0 <= window <= maxT) or (window_every != 0 if window == 0 else not 1 <= window_every <= L):
        die(f"model file {path}: header[8..9] (window, window_every) = {window}, {window_every} out of range")
    KV = int(h[10])
    if not (0 <= KV <= NH) or (KV and NH % KV):
        die(f"model file {path}: header[10] (key/value heads) = {KV}: expected 0 or a divisor of NH = {NH}")
    rope = int(h[11])
    if rope < 0 or rope == 1 or (rope and (C // NH) % 2):
        die(f"model file {path}: header[11] (rope theta) = {rope}: expected 0 or >= 2 with an even head size")
    kind, orig = int(h[12]), int(h[14])
    factor = float(np.frombuffer(h[13:14].astype("<i4").tobytes(), dtype="<f4")[0])
    if kind not in ROPE_SCALINGS or (kind and (not rope or not factor >= 1 or orig < 1)) or \
            (not kind and (factor != 0 or orig != 0)):
        die(f"model file {path}: header[12..14] (rope scaling, factor, original context) = {kind}, "
            f"{factor}, {orig}: expected 0, 0, 0 or 1..3 (rotary models), >= 1, >= 1")
    norm, mlp, ffn, nobias = int(h[15]), int(h[16]), int(h[17]), int(h[18])
    if norm not in (0, 1):
        die(f"model file {path}: header[15] (norm) expected 0 (LayerNorm) or 1 (RMSNorm), found {norm}")
    if mlp not in (0, 1):
        die(f"model file {path}: header[16] (mlp) expected 0 (GELU) or 1 (SwiGLU), found {mlp}")
    if ffn < 0:
        die(f"model file {path}: header[17] (ffn_hidden) expected 0 (4C) or >= 1, found {ffn}")
    if nobias not in (0, 1):
        die(f"model file {path}: header[18] (no linear biases) expected 0 or 1, found {nobias}")
    untied = int(h[19])
    if untied not in (0, 1):
        die(f"model file {path}: header[19] (untied classifier) expected 0 or 1, found {untied}")
    eps_bits = float(np.frombuffer(h[20:21].astype("<i4").tobytes(), dtype="<f4")[0])
    if eps_bits != 0 and not 0 < eps_bits <= float(np.float32(0.1)):  # (0.1 as fp32 stores it)
        die(f"model file {path}: header[20] (norm epsilon) expected 0 (1e-5) or a number in (0, 0.1], found {eps_bits}")
    eps = eps_bits or 1e-5  # fp32's value, as the C program adds it
    qkvbias = int(h[21])
    if qkvbias not in (0, 1) or (qkvbias and not nobias):
        die(f"model file {path}: header[21] (qkv bias) expected 0, or 1 with header[18] = 1, found {qkvbias}")
    qknorm = int(h[22])
    if qknorm not in (0, 1):
        die(f"model file {path}: header[22] (QK-norm) expected 0 or 1, found {qknorm}")
    sizes = param_sizes(maxT, V, L, NH, C, Vp, KV, rope, norm, mlp, ffn, nobias, untied, qkvbias,
                        qknorm)
    total = sum(sizes.values())
    if len(body) != 4 * total:
        die(f"model file {path}: expected {HEADER_BYTES + 4 * total} bytes for these sizes, found {HEADER_BYTES + len(body)}")
    data = np.frombuffer(body, dtype="<f4")
    model = GPT(maxT, V, L, NH, C, Vp, window, window_every, KV, rope, (kind, factor, orig),
                norm, mlp, ffn, nobias, untied, eps, qkvbias, qknorm)
    groups, off = model.groups(), 0
    with torch.no_grad():
        for name in NAMES:
            assert sum(p.numel() for p in groups[name]) == sizes[name], name
            for p in groups[name]:
                p.copy_(torch.from_numpy(data[off:off + p.numel()].copy()).view_as(p))
                off += p.numel()
    return model, dict(maxT=maxT, V=V, L=L, NH=NH, C=C, Vp=Vp, KV=KV, rope=rope, norm=norm, mlp=mlp,
                       ffn=ffn, nobias=nobias, untied=untied, qkvbias=qkvbias, qknorm=qknorm)


def load_batch(path, cfg):
    h, body = read_file(path, "batch")
    check_header(path, "batch", h, BATCH_MAGIC, BATCH_VERSION)
    B, T = int(h[2]), int(h[3])
    if B <= 0 or T <= 0:
        die(f"batch file {path}: B = {B}, T = {T} must be > 0")
    if T > cfg["maxT"]:
        die(f"batch file {path}: T = {T} exceeds the model's maxT = {cfg['maxT']}")
    if len(body) != 2 * B * T * 4:
        die(f"batch file {path}: expected {HEADER_BYTES + 8 * B * T} bytes, found {HEADER_BYTES + len(body)}")
    toks = np.frombuffer(body, dtype="<i4").astype(np.int64).reshape(2, B, T)
    for i, what in enumerate(["input", "target"]):
        bad = (toks[i] < 0) | (toks[i] >= cfg["V"])
        if bad.any():
            die(f"batch file {path}: {what} token {int(toks[i][bad][0])} outside [0, {cfg['V']})")
    boundary = int(h[4])  # document masking: the token that begins a document (0: none)
    if not 0 <= boundary < cfg["V"]:
        die(f"batch file {path}: header[4] (document boundary token) = {boundary} outside [0, {cfg['V']})")
    reset = int(h[5])  # 1: positions counted from each document's start
    if reset not in (0, 1) or (reset and not boundary):
        die(f"batch file {path}: header[5] (reset positions) = {reset}: expected 0, or 1 with a boundary token")
    return torch.from_numpy(toks[0]), torch.from_numpy(toks[1]), boundary, reset == 1


# ----------------------------------------------------------------------------- reference run
def lr_at(s, a):
    if s < a.warmup:
        return a.lr * (s + 1) / a.warmup
    min_lr = a.lr * a.final_frac
    r = 0.0 if a.steps == a.warmup else (s - a.warmup) / (a.steps - a.warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * r)) * (a.lr - min_lr)


# Muon (--muon): each layer's qkv, attention output, fc and fc projection matrix is updated by
# its momentum orthogonalized with the quintic Newton-Schulz iteration, every other tensor by
# AdamW (Keller Jordan's Muon as Megatron-LM's --optimizer muon runs it: the momentum an average
# of the gradients, Nesterov's form, the update scaled by 0.2 sqrt(max(rows, cols)), decoupled
# weight decay with the same lr). The qkv matrix's query, key and value rows are orthogonalized
# and scaled apart (Megatron-LM's default --muon-split-qkv), or whole (--muon-no-split-qkv). The
# Newton-Schulz products from fp32 inputs, or (--muon-fp32-matmul-prec) inputs rounded to nearest
# even at TF32's 10 mantissa bits (high) or to bf16 (medium), as tensor cores read them, summed in
# fp32 either way.
MUON = {"qkvw", "attprojw", "fcw", "fcprojw"}
MUON_NS = (3.4445, -4.7750, 2.0315)


def tensor_core_input(x, prec):
    """x (float32) as a GEMM under the precision reads it."""
    if prec == "medium":
        return x.to(torch.bfloat16).to(torch.float32)   # torch's own rounding, nearest even
    if prec == "high":   # TF32: 13 low mantissa bits rounded off, to nearest even
        u = x.contiguous().numpy().view(np.uint32).astype(np.uint64)
        u = (u + 0xFFF + ((u >> 13) & 1)) & 0xFFFFE000
        return torch.from_numpy(u.astype(np.uint32).view(np.float32).copy())
    return x


def orthogonalize(u, steps, prec="highest"):
    def mm(a, b):
        return tensor_core_input(a, prec) @ tensor_core_input(b, prec)
    tall = u.shape[0] > u.shape[1]
    x = u.t() if tall else u
    x = x / (x.norm() + 1e-7)
    qa, qb, qc = MUON_NS
    for _ in range(steps):
        g = mm(x, x.t())
        x = qa * x + mm(qb * g + qc * mm(g, g), x)
    return x.t() if tall else x


class Muon:
    def __init__(self, params, qkv, a):
        self.params, self.a = params, a
        self.qkv = {id(p) for p in qkv}   # the qkv projections' matrices
        self.momentum = [torch.zeros_like(p) for p in params]

    def update(self, u):
        """The orthogonalized, scaled update of one matrix's (or block's) U."""
        return 0.2 * math.sqrt(max(u.shape)) * orthogonalize(u, self.a.muon_ns_steps,
                                                               self.a.muon_fp32_matmul_prec)

    def step(self, lr):
        beta = self.a.muon_momentum
        with torch.no_grad():
            for p, m in zip(self.params, self.momentum):
                m.mul_(beta).add_(p.grad, alpha=1 - beta)
                u = (1 - beta) * p.grad + beta * m
                if id(p) in self.qkv and not self.a.muon_no_split_qkv:
                    C = p.shape[1]
                    kv = (p.shape[0] - C) // 2   # rows: C queries, then the K and V heads
                    o = torch.cat([self.update(b) for b in u.split([C, kv, kv], dim=0)], dim=0)
                else:
                    o = self.update(u)
                p.mul_(1 - lr * self.a.wd)
                p.add_(o, alpha=-lr)


def reference(model, idx, tgt, a):
    """Returns dict of float32 numpy arrays: logits, loss, grads[17], losses, params[17]."""
    groups = model.groups()
    params = [p for n in NAMES for p in groups[n]]
    muon = Muon([p for n in NAMES if n in MUON for p in groups[n]], groups["qkvw"], a) if a.muon else None
    adam = [n for n in NAMES if not (muon and n in MUON)]
    decay = [p for n in adam if n in DECAYED for p in groups[n]]
    no_decay = [p for n in adam if n not in DECAYED for p in groups[n]]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps)
    out = {"losses": []}

    def forward_backward():
        opt.zero_grad(set_to_none=False)
        for p in muon.params if muon else ():  # (not in opt's groups)
            p.grad = None
        logits, loss = model(idx, tgt)
        # --z-loss c: the objective adds c * mean(lse^2) (PaLM's z-loss); the loss reported stays
        # the cross-entropy.
        objective = loss
        if a.z_loss > 0:
            lse = torch.logsumexp(logits[..., :model.V], dim=-1)
            objective = loss + a.z_loss * (lse * lse).mean()
        objective.backward()
        if "loss" not in out:  # initial-weight quantities; gradients BEFORE clipping
            out["logits"] = logits.detach().numpy().astype(np.float32).reshape(-1)
            out["loss"] = np.array([loss.item()], dtype=np.float32)
            out["grads"] = [flat([p.grad for p in groups[n]]) for n in NAMES]
        return loss.item()

    for s in range(a.steps):
        out["losses"].append(forward_backward())  # loss before this step's update
        torch.nn.utils.clip_grad_norm_(params, a.clip)
        for g in opt.param_groups:
            g["lr"] = lr_at(s, a)
        opt.step()
        if muon:
            muon.step(lr_at(s, a))
    if a.steps == 0:  # still report initial logits/loss/grads
        forward_backward()
    out["losses"] = np.array(out["losses"], dtype=np.float32)
    out["params"] = [flat(groups[n]) for n in NAMES]
    return out


def header_for(cfg, B, T, steps):
    h = np.zeros(256, dtype="<i4")
    h[:11] = [RESULTS_MAGIC, RESULTS_VERSION, B, T, cfg["V"], cfg["Vp"], cfg["L"],
              cfg["NH"], cfg["C"], cfg["maxT"], steps]
    return h


def write_results(path, h, r):
    parts = [r["logits"], r["loss"], *r["grads"], r["losses"], *r["params"]]
    with open(path, "wb") as f:
        f.write(h.tobytes())
        f.write(np.concatenate(parts).astype("<f4").tobytes())


def read_results(path, expect_h, cfg, steps):
    h, body = read_file(path, "results")
    check_header(path, "results", h, RESULTS_MAGIC, RESULTS_VERSION)
    fields = ["magic", "version", "B", "T", "V", "Vp", "L", "NH", "C", "maxT", "steps"]
    for i in range(2, 11):
        if h[i] != expect_h[i]:
            die(f"results file {path}: header[{i}] ({fields[i]}) expected {expect_h[i]} "
                f"(from model/batch/--steps), found {h[i]}")
    B, T = int(h[2]), int(h[3])
    sizes = [param_sizes(cfg["maxT"], cfg["V"], cfg["L"], cfg["NH"], cfg["C"], cfg["Vp"], cfg["KV"],
                         cfg["rope"], cfg["norm"], cfg["mlp"], cfg["ffn"], cfg["nobias"],
                         cfg["untied"], cfg["qkvbias"], cfg["qknorm"])[n]
             for n in NAMES]
    counts = [B * T * cfg["Vp"], 1, *sizes, steps, *sizes]
    if len(body) != 4 * sum(counts):
        die(f"results file {path}: expected {HEADER_BYTES + 4 * sum(counts)} bytes, found {HEADER_BYTES + len(body)}")
    data = np.frombuffer(body, dtype="<f4")
    arrs, off = [], 0
    for n in counts:
        arrs.append(data[off:off + n].astype(np.float64))
        off += n
    k = len(NAMES)
    return {"logits": arrs[0], "loss": arrs[1], "grads": arrs[2:2 + k], "losses": arrs[2 + k],
            "params": arrs[3 + k:3 + 2 * k]}


# ----------------------------------------------------------------------------- comparison
def compare(c, r, cfg, B, T, a):
    def rel_max(cv, rv):  # max|c - ref| / max|ref|
        rv = np.asarray(rv, dtype=np.float64)
        if rv.size == 0:
            return 0.0
        return float(np.max(np.abs(cv - rv)) / max(float(np.max(np.abs(rv))), 1e-30))

    def rel_each(cv, rv):  # max over elements of |c - ref| / |ref|
        rv = np.asarray(rv, dtype=np.float64)
        if rv.size == 0:
            return 0.0
        return float(np.max(np.abs(cv - rv) / np.maximum(np.abs(rv), 1e-30)))

    V, Vp = cfg["V"], cfg["Vp"]
    rows = [("logits[:V]", rel_max(c["logits"].reshape(B, T, Vp)[..., :V],
                                   r["logits"].reshape(B, T, Vp)[..., :V]), a.tol_grad),
            ("loss", rel_each(c["loss"], r["loss"]), a.tol_loss)]
    # 0-element tensors (wpe under rotary positions, ln1b/ln2b/lnfb under RMSNorm): nothing to compare
    empty = [n for n, rg in zip(NAMES, r["grads"]) if np.asarray(rg).size == 0]
    rows += [(f"grad.{n}", rel_max(cg, rg), a.tol_grad) for n, cg, rg in zip(NAMES, c["grads"], r["grads"])
             if n not in empty]
    rows.append((f"losses[{a.steps}]", rel_each(c["losses"], r["losses"]), a.tol_loss))
    # The key third of qkvb has an exactly-zero gradient (a per-query constant added to every
    # score leaves the softmax unchanged), so its fp32 gradient is rounding noise in both
    # programs, and AdamW's normalisation turns that noise into lr-sized, implementation-specific
    # updates. Check what is defined: that both gradients there are ~0 relative to the rest of
    # qkvb's gradient, and compare the final q and v thirds of qkvb; every other tensor whole.
    L, C = cfg["L"], cfg["C"]
    KVC = (cfg["KV"] or cfg["NH"]) * (C // cfg["NH"])  # the key columns (C, fewer under GQA)
    key = np.zeros((L, C + 2 * KVC), dtype=bool)
    key[:, C:C + KVC] = True
    key = key.reshape(-1)
    qi = NAMES.index("qkvb")
    # (Under QK-norm the key bias moves the normalised keys: its gradient is defined.)
    defined = cfg["rope"] or cfg["qknorm"]
    for who, g in (("c", c["grads"][qi]), ("ref", r["grads"][qi])) if not defined and (not cfg["nobias"] or cfg["qkvbias"]) else ():
        g = np.asarray(g, dtype=np.float64)
        rows.append((f"grad.qkvb[k]~0 ({who})",
                     float(np.max(np.abs(g[key])) / max(float(np.max(np.abs(g[~key]))), 1e-30)),
                     a.tol_grad))
    # Likewise an element whose first gradient cancels to within a few fp32 roundings of zero
    # (|g| < 1e-6 max|g| of its tensor, and the two programs' values more than 1% apart): AdamW's
    # first update g / (|g| + eps) turns that noise into an lr-sized difference when |g| is near
    # eps (1e-8). Such elements occur by chance (a few in 10^5); they are left out of the final
    # comparison and counted, and must stay that rare (at most 1 in 1000). Small gradients both
    # programs agree on (the rows of tokens the batch lacks) are compared.
    noise, total = 0, 0
    for n, cp, rp, cg, rg in zip(NAMES, c["params"], r["params"], c["grads"], r["grads"]):
        if n in empty:
            continue
        cg, rg = np.asarray(cg, dtype=np.float64), np.asarray(rg, dtype=np.float64)
        top = float(np.max(np.abs(rg))) if rg.size else 0.0
        keep = ~((np.abs(rg) < 1e-6 * top) & (np.abs(cg - rg) > 1e-2 * np.abs(rg)))
        if n == "qkvb":
            keep[key] = False  # (reported above)
            noise += int(np.sum(~keep & ~key))
            rows.append(("final.qkvb[q,v]", rel_max(np.asarray(cp)[keep], np.asarray(rp)[keep]),
                         a.tol_weights))
        else:
            noise += int(np.sum(~keep))
            tol = a.tol_muon if a.tol_muon and a.muon and n in MUON else a.tol_weights
            rows.append((f"final.{n}", rel_max(np.asarray(cp)[keep], np.asarray(rp)[keep]), tol))
        total += rg.size
    if empty:
        print(f"0-element tensors (not compared): {', '.join(empty)}")
    print(f"final parameters: {noise} of {total} elements left out (first gradient within fp32 "
          f"noise of 0)")
    rows.append(("final: noise-gradient frac", noise / max(total, 1), 1e-3))
    print("metric: tensors max|c-ref|/max|ref|; losses max |c-ref|/|ref|")
    print(f"{'quantity':<22} {'metric':>12} {'tol':>9}  result")
    nfail = 0
    for name, m, tol in rows:
        ok = m <= tol  # NaN compares False -> FAIL
        nfail += not ok
        print(f"{name:<22} {m:12.3e} {tol:9.1e}  {'ok' if ok else 'FAIL'}")
    print(f"summary: {len(rows) - nfail}/{len(rows)} ok, {nfail} FAIL")
    return nfail == 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="llm.c model file, version 3 (fp32)")
    p.add_argument("--batch", required=True, help="batch file (magic 20261101)")
    p.add_argument("--results", help="C program's results file to compare against")
    p.add_argument("--write", help="write the reference's own results to this path")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--final-frac", type=float, default=0.1, help="min_lr = lr * final_frac")
    p.add_argument("--wd", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.95)
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--z-loss", type=float, default=0.0,
                   help="z-loss coefficient c: the training objective adds c * mean(logsumexp(logits)^2)")
    p.add_argument("--muon", action="store_true",
                   help="Muon for the hidden matrices (Nesterov, 0.2 x spectral scale), AdamW for the rest")
    p.add_argument("--muon-momentum", type=float, default=0.95)
    p.add_argument("--muon-ns-steps", type=int, default=5)
    p.add_argument("--muon-fp32-matmul-prec", choices=["highest", "high", "medium"],
                   default="highest", help="the Newton-Schulz products' inputs: fp32, TF32 or bf16")
    p.add_argument("--muon-no-split-qkv", action="store_true",
                   help="the qkv matrix orthogonalized whole (default: its Q, K and V rows apart)")
    p.add_argument("--tol-grad", type=float, default=1e-4, help="logits and gradients")
    p.add_argument("--tol-loss", type=float, default=1e-5, help="initial loss and step losses")
    p.add_argument("--tol-weights", type=float, default=1e-4, help="final parameters")
    p.add_argument("--tol-muon", type=float, default=0.0,
                   help="with --muon, the final Muon matrices (qkvw, attprojw, fcw, fcprojw); "
                        "0: --tol-weights")
    a = p.parse_args()
    if a.steps < 0 or a.warmup < 0 or not a.z_loss >= 0:
        die("--steps, --warmup and --z-loss must be >= 0")
    if not a.results and not a.write:
        die("nothing to do: give --results and/or --write")

    torch.set_num_threads(2)
    torch.manual_seed(0)  # nothing random is used; set for good measure
    model, cfg = load_model(a.model)
    idx, tgt, model.boundary, model.reset_positions = load_batch(a.batch, cfg)
    B, T = idx.shape
    h = header_for(cfg, B, T, a.steps)
    c = read_results(a.results, h, cfg, a.steps) if a.results else None  # check before the run

    r = reference(model, idx, tgt, a)
    if a.write:
        write_results(a.write, h, r)
        print(f"wrote {a.write} ({os.path.getsize(a.write)} bytes)")
    if c is not None:
        sys.exit(0 if compare(c, r, cfg, B, T, a) else 1)


if __name__ == "__main__":
    main()
