#!/usr/bin/python3
"""Checks a Hugging Face GPT-2, GPT-NeoX or Llama directory written by build/export_hf against
the model file it came from, reading both independently of the C code (numpy and torch only;
transformers is not in Debian):

  1. model.safetensors is well formed: an 8-byte little-endian header length, a JSON header
     padded with spaces to a multiple of 8, "__metadata__" {"format": "pt"}, and byte ranges that
     tile the data exactly, in order, with no gap, overlap or trailing byte.
  2. Its tensors are exactly transformers' GPT2LMHeadModel names and shapes for config.json's
     sizes (Conv1D weights as (in, out); wte without llm.c's padding rows), config.json matches
     the model file's header, and every tensor equals the model file's in the stored dtype, bit
     for bit (bf16 by round-to-nearest-even where the file is fp32).
  3. A forward written as transformers' GPT-2 computes it (x @ W + b, gelu_new, the file's eps, the
     classifier tied to wte) on the exported tensors gives the logits of tests/torch_gpt_ref.py's
     model (llm.c's layout) on the model file's parameters.
  A model with rotary positions (header[11] theta) is checked as the GPT-NeoX directory the
  export writes instead: GPTNeoXForCausalLM's names, nn.Linear weights as (out, in),
  query_key_value's rows grouped per head, embed_out a copy of wte (tied); its forward written as
  transformers' modeling_gpt_neox.py computes it (rotary angles in fp32 from inv_freq, rotate_half
  over all channels, the residual adds in sequence).
  A model with Llama's block (header[15..17]: RMSNorm, SwiGLU, with rotary positions) is checked
  as the Llama directory the export writes: LlamaForCausalLM's names, q_proj, k_proj and v_proj
  the row blocks of llm.c's qkv projection (num_key_value_heads of them for k and v), gate_proj
  and up_proj the halves of fc, no lm_head (tied); its forward written as transformers'
  modeling_llama.py computes it (RMSNorm in fp32 then the weight, inv_freq in fp32 from
  modeling_rope_utils' init of the rope type, rotate_half, repeat_kv, silu(gate) * up, biases).
  With a sliding window in every layer (header[8], Llama's block without biases) it is checked as
  MistralForCausalLM: Llama's names, sliding_window and no bias keys in config.json, the forward
  with modeling_mistral's mask (a query at q sees the keys q - W < k <= q). With the qkv
  projection's bias alone (header[21]) it is checked as Qwen2ForCausalLM: Llama's names with
  q_proj, k_proj and v_proj biases, use_sliding_window false, no bias keys. With QK-norm
  (header[22], Llama's block without biases) it is checked as Qwen3ForCausalLM: Llama's names
  with self_attn.q_norm and k_norm, use_sliding_window and attention_bias false, the forward
  with modeling_qwen3's RMSNorm of every query and key head before the rotation. The norms'
  epsilon (header[20]) is config.json's, read as fp32.
  An untied classifier (header[19]) is lm_head.weight (GPT-2, Llama) or embed_out.weight
  (GPT-NeoX) holding the file's classifier tensor, with tie_word_embeddings false; each forward
  then reads the logits through it.
  4. With --vocab-dir, vocab.json and merges.txt are that directory's encoder.json and vocab.bpe
     byte for byte, and tokenizer_config.json names GPT2Tokenizer and the context length.

  check_hf_export.py --model FILE --hf DIR --dtype F32|BF16 [--vocab-dir DIR]
Exit status: 0 all checks pass, 1 a check failed, 2 bad arguments or unreadable files.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_gpt_ref as ref  # noqa: E402  (the reference model in llm.c's layout)

failures = []


def check(ok, what):
    print(("  ok    " if ok else "  FAIL  ") + what)
    if not ok:
        failures.append(what)


def read_model_file(path):
    """llm.c model file (version 3 fp32 or 5 bf16) -> (config dict, {name: float32 array})."""
    data = open(path, "rb").read()
    h = np.frombuffer(data[:1024], dtype="<i4")
    if h[0] != ref.MODEL_MAGIC or h[1] not in (3, 5):
        ref.die(f"{path}: not an llm.c model file (magic {h[0]}, version {h[1]})")
    maxT, V, L, NH, C, Vp = (int(v) for v in h[2:8])
    window, window_every = int(h[8]), int(h[9])  # sliding window in layers l % every == 0
    KV = int(h[10])  # key/value heads (0: one per head)
    rope = int(h[11])  # rotary positions' theta: no wpe
    scaling = (int(h[12]), float(h[13:14].view("<f4")[0]), int(h[14]))  # header[12..14]
    norm, mlp, ffn = (int(v) for v in h[15:18])  # the block: RMSNorm, SwiGLU, F (0: 4C)
    nobias = int(h[18])  # 1: no linear biases
    untied = int(h[19])  # 1: the classifier's own matrix
    eps = float(h[20:21].view("<f4")[0]) or 1e-5  # the norms' epsilon (0: 1e-5)
    qkvbias = int(h[21])  # 1: the qkv projection's bias alone (Qwen2)
    qknorm = int(h[22])  # 1: QK-norm (Qwen3)
    sizes = ref.param_sizes(maxT, V, L, NH, C, Vp, KV, rope, norm, mlp, ffn, nobias, untied, qkvbias,
                            qknorm)
    if h[1] == 3:
        flat = np.frombuffer(data[1024:], dtype="<f4")
    else:
        bits = np.frombuffer(data[1024:], dtype="<u2").astype(np.uint32) << 16
        flat = bits.view(np.float32)
    if flat.size != sum(sizes.values()):
        ref.die(f"{path}: {flat.size} parameters, expected {sum(sizes.values())}")
    params, off = {}, 0
    for name in ref.NAMES:
        params[name] = flat[off:off + sizes[name]].copy()
        off += sizes[name]
    return dict(maxT=maxT, V=V, L=L, NH=NH, C=C, Vp=Vp, window=window, window_every=window_every,
                KV=KV, rope=rope, scaling=scaling,
                norm=norm, mlp=mlp, ffn=ffn, nobias=nobias, untied=untied, eps=eps, qkvbias=qkvbias,
                qknorm=qknorm, version=int(h[1])), params


def classifier_rows(cfg, P):
    """The classifier's V rows (llm.c's padding rows dropped): the untied tensor, or wte."""
    return P["classifier" if cfg["untied"] else "wte"].view(cfg["Vp"], cfg["C"])[:cfg["V"]]


def read_safetensors(path):
    """-> (header dict without __metadata__, metadata, {name: torch tensor}); checks the layout."""
    data = open(path, "rb").read()
    check(len(data) >= 8, f"{path}: at least the 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    check(8 + n <= len(data), f"header length {n} within the file ({len(data)} bytes)")
    raw = data[8:8 + n]
    check(n % 8 == 0, f"header length {n} a multiple of 8")
    text = raw.decode("utf-8")
    check(text == text.rstrip(" ") + " " * (len(text) - len(text.rstrip(" "))) and
          text.rstrip(" ").endswith("}"), "header is JSON padded with spaces only")
    header = json.loads(text)
    meta = header.pop("__metadata__", None)
    check(meta == {"format": "pt"}, f"__metadata__ is {{'format': 'pt'}} (found {meta})")
    body = data[8 + n:]
    itemsize = {"F32": 4, "BF16": 2}
    order = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
    pos, tensors = 0, {}
    for name, e in order:
        b, end = e["data_offsets"]
        check(b == pos, f"{name}: starts where the previous tensor ended ({b} vs {pos})")
        want = itemsize[e["dtype"]] * math.prod(e["shape"])
        check(end - b == want, f"{name}: {end - b} bytes for shape {e['shape']} {e['dtype']}")
        chunk = body[b:end]
        if e["dtype"] == "F32":
            t = torch.from_numpy(np.frombuffer(chunk, dtype="<f4").copy())
        else:
            t = torch.from_numpy(np.frombuffer(chunk, dtype="<i2").copy()).view(torch.bfloat16)
        tensors[name] = t.view(e["shape"])
        pos = end
    check(pos == len(body), f"the tensors tile the data exactly ({pos} of {len(body)} bytes)")
    return header, tensors


def hf_expected(cfg, params):
    """transformers' GPT-2 names -> float32 tensors in its layout, from llm.c's."""
    maxT, V, L, C = cfg["maxT"], cfg["V"], cfg["L"], cfg["C"]
    P = {k: torch.from_numpy(v) for k, v in params.items()}
    out = {"transformer.wte.weight": P["wte"].view(cfg["Vp"], C)[:V],
           "transformer.wpe.weight": P["wpe"].view(maxT, C),
           "transformer.ln_f.weight": P["lnfw"], "transformer.ln_f.bias": P["lnfb"]}
    per_layer = [  # (hf name, llm.c name, llm.c shape per layer, Conv1D weight: transposed)
        ("ln_1.weight", "ln1w", (C,), False), ("ln_1.bias", "ln1b", (C,), False),
        ("attn.c_attn.weight", "qkvw", (3 * C, C), True), ("attn.c_attn.bias", "qkvb", (3 * C,), False),
        ("attn.c_proj.weight", "attprojw", (C, C), True), ("attn.c_proj.bias", "attprojb", (C,), False),
        ("ln_2.weight", "ln2w", (C,), False), ("ln_2.bias", "ln2b", (C,), False),
        ("mlp.c_fc.weight", "fcw", (4 * C, C), True), ("mlp.c_fc.bias", "fcb", (4 * C,), False),
        ("mlp.c_proj.weight", "fcprojw", (C, 4 * C), True), ("mlp.c_proj.bias", "fcprojb", (C,), False)]
    for l in range(L):
        for hf, name, shape, conv in per_layer:
            t = P[name].view(L, *shape)[l]
            out[f"transformer.h.{l}.{hf}"] = t.t().contiguous() if conv else t
    if cfg["untied"]:
        out["lm_head.weight"] = classifier_rows(cfg, P)
    return out


def neox_expected(cfg, params):
    """transformers' GPT-NeoX names -> float32 tensors in its layout, from llm.c's."""
    V, L, NH, C = cfg["V"], cfg["L"], cfg["NH"], cfg["C"]
    hs = C // NH
    P = {k: torch.from_numpy(v) for k, v in params.items()}
    wte = P["wte"].view(cfg["Vp"], C)[:V]
    out = {"gpt_neox.embed_in.weight": wte, "embed_out.weight": classifier_rows(cfg, P),
           "gpt_neox.final_layer_norm.weight": P["lnfw"], "gpt_neox.final_layer_norm.bias": P["lnfb"]}
    per_layer = [  # (hf name, llm.c name, llm.c shape per layer): nn.Linear (out, in) as llm.c's
        ("input_layernorm.weight", "ln1w", (C,)), ("input_layernorm.bias", "ln1b", (C,)),
        ("attention.dense.weight", "attprojw", (C, C)), ("attention.dense.bias", "attprojb", (C,)),
        ("post_attention_layernorm.weight", "ln2w", (C,)), ("post_attention_layernorm.bias", "ln2b", (C,)),
        ("mlp.dense_h_to_4h.weight", "fcw", (4 * C, C)), ("mlp.dense_h_to_4h.bias", "fcb", (4 * C,)),
        ("mlp.dense_4h_to_h.weight", "fcprojw", (C, 4 * C)), ("mlp.dense_4h_to_h.bias", "fcprojb", (C,))]
    for l in range(L):
        p = f"gpt_neox.layers.{l}."
        for hf, name, shape in per_layer:
            out[p + hf] = P[name].view(L, *shape)[l]
        # llm.c's rows [q | k | v], head h at rows h*hs of each; GPT-NeoX's [q_h k_h v_h] per head
        w = P["qkvw"].view(L, 3, NH, hs, C)[l]
        out[p + "attention.query_key_value.weight"] = w.permute(1, 0, 2, 3).reshape(3 * C, C)
        b = P["qkvb"].view(L, 3, NH, hs)[l]
        out[p + "attention.query_key_value.bias"] = b.permute(1, 0, 2).reshape(3 * C)
    return out


def llama_expected(cfg, params):
    """transformers' Llama names -> float32 tensors in its layout, from llm.c's."""
    V, L, NH, C = cfg["V"], cfg["L"], cfg["NH"], cfg["C"]
    hs, F = C // NH, cfg["ffn"] or 4 * C
    kv = (cfg["KV"] or NH) * hs  # rows of k_proj and of v_proj
    P = {k: torch.from_numpy(v) for k, v in params.items()}
    bias = not cfg["nobias"]  # without linear biases: no .bias tensor at all
    qkv_bias = bias or cfg["qkvbias"]  # Qwen2: q_proj, k_proj and v_proj's alone
    out = {"model.embed_tokens.weight": P["wte"].view(cfg["Vp"], C)[:V], "model.norm.weight": P["lnfw"]}
    if cfg["untied"]:
        out["lm_head.weight"] = classifier_rows(cfg, P)
    for l in range(L):
        p = f"model.layers.{l}."
        out[p + "input_layernorm.weight"] = P["ln1w"].view(L, C)[l]
        out[p + "post_attention_layernorm.weight"] = P["ln2w"].view(L, C)[l]
        # llm.c's qkv rows [q (C) | k (kv) | v (kv)]: three nn.Linear (out, in)
        w = P["qkvw"].view(L, C + 2 * kv, C)[l].split([C, kv, kv])
        b = P["qkvb"].view(L, C + 2 * kv)[l].split([C, kv, kv]) if qkv_bias else None
        for i, name in enumerate(["q_proj", "k_proj", "v_proj"]):
            out[p + f"self_attn.{name}.weight"] = w[i]
            if qkv_bias:
                out[p + f"self_attn.{name}.bias"] = b[i]
        if cfg["qknorm"]:  # Qwen3: the heads' RMSNorm weights (head_dim each)
            out[p + "self_attn.q_norm.weight"] = P["qnormw"].view(L, hs)[l]
            out[p + "self_attn.k_norm.weight"] = P["knormw"].view(L, hs)[l]
        out[p + "self_attn.o_proj.weight"] = P["attprojw"].view(L, C, C)[l]
        if bias:
            out[p + "self_attn.o_proj.bias"] = P["attprojb"].view(L, C)[l]
        # fc's rows [gate (F) | up (F)]
        w = P["fcw"].view(L, 2, F, C)[l]
        out[p + "mlp.gate_proj.weight"], out[p + "mlp.up_proj.weight"] = w[0], w[1]
        out[p + "mlp.down_proj.weight"] = P["fcprojw"].view(L, C, F)[l]
        if bias:
            b = P["fcb"].view(L, 2, F)[l]
            out[p + "mlp.gate_proj.bias"], out[p + "mlp.up_proj.bias"] = b[0], b[1]
            out[p + "mlp.down_proj.bias"] = P["fcprojb"].view(L, C)[l]
    return out


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def widened(t, C, eps):
    """The exported tensors widened to fp32, and a LayerNorm of C channels over them."""
    W = {k: v.float() for k, v in t.items()}

    def ln(x, p):
        return torch.nn.functional.layer_norm(x, (C,), W[p + ".weight"], W[p + ".bias"], eps)
    return W, ln


def neox_forward(t, cfg, idx):
    """GPT-NeoX as transformers' modeling_gpt_neox.py computes it, on the exported tensors."""
    B, T = idx.shape
    C, NH = cfg["hidden_size"], cfg["num_attention_heads"]
    hs = C // NH
    dim = int(hs * cfg["rotary_pct"])
    W, ln = widened(t, C, cfg["layer_norm_eps"])

    def linear(x, p):  # nn.Linear: weight (out, in)
        return x @ W[p + ".weight"].t() + W[p + ".bias"]

    def rotate_half(x):
        return torch.cat((-x[..., x.shape[-1] // 2:], x[..., :x.shape[-1] // 2]), dim=-1)

    # GPTNeoXRotaryEmbedding: fp32 inverse frequencies and angles, each frequency twice; under
    # rope_scaling the frequencies and attention scaling of its rope type (modeling_rope_utils, as
    # written out in torch_gpt_ref.rope_inv_freq), cos and sin times the scaling
    inv_freq = 1.0 / (cfg["rotary_emb_base"] ** (torch.arange(0, dim, 2).float() / dim))
    scaling = 1.0
    rs = cfg.get("rope_scaling")
    if rs:
        kind = {name: k for k, name in ref.ROPE_SCALINGS.items()}[rs["rope_type"]]
        inv, scaling = ref.rope_inv_freq(dim, cfg["rotary_emb_base"],
                                         (kind, rs["factor"], rs.get("original_max_position_embeddings", 0)))
        inv_freq = inv.float()
    freqs = torch.outer(torch.arange(T).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos() * scaling, emb.sin() * scaling
    x = W["gpt_neox.embed_in.weight"][idx]
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    for l in range(cfg["num_hidden_layers"]):
        p = f"gpt_neox.layers.{l}."
        qkv = linear(ln(x, p + "input_layernorm"), p + "attention.query_key_value").view(B, T, NH, 3 * hs)
        q, k, v = (qkv[..., i * hs:(i + 1) * hs].permute(0, 2, 1, 3) for i in range(3))
        q = torch.cat((q[..., :dim] * cos + rotate_half(q[..., :dim]) * sin, q[..., dim:]), dim=-1)
        k = torch.cat((k[..., :dim] * cos + rotate_half(k[..., :dim]) * sin, k[..., dim:]), dim=-1)
        att = (q @ k.transpose(-2, -1)) * hs ** -0.5
        y = torch.softmax(att.masked_fill(future, float("-inf")), dim=-1) @ v
        x = x + linear(y.permute(0, 2, 1, 3).reshape(B, T, C), p + "attention.dense")
        if cfg["use_parallel_residual"]:
            ref.die("use_parallel_residual: the export writes false")
        x = x + linear(gelu_new(linear(ln(x, p + "post_attention_layernorm"), p + "mlp.dense_h_to_4h")),
                       p + "mlp.dense_4h_to_h")
    return ln(x, "gpt_neox.final_layer_norm") @ W["embed_out.weight"].t()


def llama_rope_init(conf, dim):
    """inv_freq (fp32, dim/2) and attention_scaling as transformers' modeling_rope_utils computes
    them for config.json's rope type: _compute_default_rope_parameters, _linear_scaling_...,
    _yarn_... (beta_fast 32, beta_slow 1, get_mscale) and _llama3_..., each in fp32 as there."""
    base = conf["rope_theta"]
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    rs = conf.get("rope_scaling")
    kind = rs and rs.get("rope_type", rs.get("type"))
    if not kind or kind == "default":
        return inv_freq, 1.0
    factor = rs["factor"]
    if kind == "linear":
        return inv_freq / factor, 1.0
    if kind == "yarn":
        orig = rs.get("original_max_position_embeddings") or conf["max_position_embeddings"]
        attention_factor = rs.get("attention_factor") or (0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0)
        beta_fast, beta_slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

        def find_correction_dim(num_rotations):
            return (dim * math.log(orig / (num_rotations * 2 * math.pi))) / (2 * math.log(base))
        low = max(math.floor(find_correction_dim(beta_fast)), 0)
        high = min(math.ceil(find_correction_dim(beta_slow)), dim - 1)
        if low == high:
            high += 0.001
        ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
        pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
        extrapolation = 1 - ramp
        inv = (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation
        return inv, attention_factor
    if kind == "llama3":
        low_ff, high_ff = rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old / low_ff, old / high_ff
        wavelen = 2 * math.pi / inv_freq
        inv = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        smooth = (old / wavelen - low_ff) / (high_ff - low_ff)
        smoothed = (1 - smooth) * inv / factor + smooth * inv
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        return torch.where(medium, smoothed, inv), 1.0
    ref.die(f"rope_scaling {kind}: not one the export writes")


def llama_forward(t, cfg, idx):
    """Llama as transformers' modeling_llama.py computes it, on the exported tensors."""
    B, T = idx.shape
    C, NH = cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or NH
    hd = cfg.get("head_dim") or C // NH
    eps = cfg["rms_norm_eps"]
    W = {k: v.float() for k, v in t.items()}

    def rms_norm(x, p):  # LlamaRMSNorm: variance in fp32, then the weight
        x32 = x.to(torch.float32)
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
        return W[p + ".weight"] * x32.to(x.dtype)

    def linear(x, p, bias):  # nn.Linear: weight (out, in)
        return x @ W[p + ".weight"].t() + W[p + ".bias"] if bias else x @ W[p + ".weight"].t()

    def rotate_half(x):
        return torch.cat((-x[..., x.shape[-1] // 2:], x[..., :x.shape[-1] // 2]), dim=-1)

    def repeat_kv(x, n_rep):  # (B, KV, T, hd) -> (B, KV n_rep, T, hd), each head n_rep times
        b, kv, s, d = x.shape
        return x[:, :, None, :, :].expand(b, kv, n_rep, s, d).reshape(b, kv * n_rep, s, d)

    # LlamaRotaryEmbedding: fp32 inv_freq times the positions, each frequency twice, cos and sin
    # times the rope type's attention_scaling
    inv_freq, scaling = llama_rope_init(cfg, hd)
    position_ids = torch.arange(T)[None, :]
    freqs = (inv_freq[None, :, None].float() @ position_ids[:, None, :].float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = (emb.cos() * scaling).unsqueeze(1), (emb.sin() * scaling).unsqueeze(1)
    ab, mb = cfg.get("attention_bias", False), cfg.get("mlp_bias", False)
    qb = ab or cfg["model_type"] == "qwen2"  # Qwen2Attention: q, k, v with biases, o without
    mask = torch.full((T, T), torch.finfo(torch.float32).min).triu(1)  # additive causal mask
    if cfg.get("sliding_window"):  # Mistral: a query at q sees the keys q - W < k <= q
        q_idx, kv_idx = torch.arange(T)[:, None], torch.arange(T)[None, :]
        mask = mask.masked_fill(kv_idx <= q_idx - cfg["sliding_window"], torch.finfo(torch.float32).min)
    x = W["model.embed_tokens.weight"][idx]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms_norm(x, p + "input_layernorm")
        q = linear(h, p + "self_attn.q_proj", qb).view(B, T, -1, hd)
        k = linear(h, p + "self_attn.k_proj", qb).view(B, T, -1, hd)
        if cfg["model_type"] == "qwen3":  # Qwen3Attention: q_norm, k_norm per head, then rotation
            q, k = rms_norm(q, p + "self_attn.q_norm"), rms_norm(k, p + "self_attn.k_norm")
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = linear(h, p + "self_attn.v_proj", qb).view(B, T, -1, hd).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, NH // KV), repeat_kv(v, NH // KV)
        att = torch.matmul(q, k.transpose(2, 3)) * hd ** -0.5 + mask
        att = torch.softmax(att, dim=-1, dtype=torch.float32).to(q.dtype)
        y = torch.matmul(att, v).transpose(1, 2).reshape(B, T, -1)
        x = x + linear(y, p + "self_attn.o_proj", ab)
        h = rms_norm(x, p + "post_attention_layernorm")
        x = x + linear(torch.nn.functional.silu(linear(h, p + "mlp.gate_proj", mb)) *
                       linear(h, p + "mlp.up_proj", mb), p + "mlp.down_proj", mb)
    head = W["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else W["lm_head.weight"]
    return rms_norm(x, "model.norm") @ head.t()


def hf_forward(t, cfg, idx):
    """GPT-2 as transformers computes it, on the exported tensors (widened to fp32)."""
    B, T = idx.shape
    C, NH = cfg["n_embd"], cfg["n_head"]
    hs = C // NH
    W, ln = widened(t, C, cfg["layer_norm_epsilon"])

    def conv1d(x, p):  # transformers' Conv1D: weight (in, out)
        return x @ W[p + ".weight"] + W[p + ".bias"]

    x = W["transformer.wte.weight"][idx] + W["transformer.wpe.weight"][torch.arange(T)]
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    for l in range(cfg["n_layer"]):
        p = f"transformer.h.{l}."
        q, k, v = conv1d(ln(x, p + "ln_1"), p + "attn.c_attn").split(C, dim=2)
        q, k, v = (z.view(B, T, NH, hs).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        y = torch.softmax(att.masked_fill(future, float("-inf")), dim=-1) @ v
        x = x + conv1d(y.transpose(1, 2).reshape(B, T, C), p + "attn.c_proj")
        m = gelu_new(conv1d(ln(x, p + "ln_2"), p + "mlp.c_fc"))
        x = x + conv1d(m, p + "mlp.c_proj")
    head = W["transformer.wte.weight"] if cfg["tie_word_embeddings"] else W["lm_head.weight"]
    return ln(x, "transformer.ln_f") @ head.t()


def main():
    a = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("--model", required=True)
    a.add_argument("--hf", required=True)
    a.add_argument("--dtype", required=True, choices=["F32", "BF16"])
    a.add_argument("--vocab-dir")
    args = a.parse_args()
    cfg, params = read_model_file(args.model)
    print(f"check_hf_export: {args.model} (L={cfg['L']} C={cfg['C']} NH={cfg['NH']} V={cfg['V']} "
          f"Vp={cfg['Vp']} maxT={cfg['maxT']}, version {cfg['version']}) against {args.hf}")

    conf = json.load(open(os.path.join(args.hf, "config.json")))
    torch_dtype = ("torch_dtype", "float32" if args.dtype == "F32" else "bfloat16")
    llama = cfg["norm"] == 1
    neox = cfg["rope"] != 0 and not llama
    kind, factor, orig = cfg["scaling"]
    name = ref.ROPE_SCALINGS[kind]
    scaling = None if not kind else {"rope_type": name, "type": name, "factor": factor}
    if kind >= 2:
        scaling["original_max_position_embeddings"] = orig
    if kind == 3:
        scaling.update(low_freq_factor=1.0, high_freq_factor=4.0)
    mistral = llama and cfg["window"] > 0
    qwen2 = llama and cfg["nobias"] and cfg["qkvbias"]
    qwen3 = llama and cfg["qknorm"]
    eps = cfg["eps"]  # the fp32 epsilon: config.json's number must read back as it
    # The keys every Llama-family config.json carries, then each architecture's own.
    llama_keys = [("vocab_size", cfg["V"]), ("max_position_embeddings", cfg["maxT"]),
                  ("hidden_size", cfg["C"]), ("intermediate_size", cfg["ffn"] or 4 * cfg["C"]),
                  ("num_hidden_layers", cfg["L"]), ("num_attention_heads", cfg["NH"]),
                  ("num_key_value_heads", cfg["KV"] or cfg["NH"]), ("head_dim", cfg["C"] // cfg["NH"]),
                  ("hidden_act", "silu"), ("rms_norm_eps", eps), ("rope_theta", cfg["rope"]),
                  ("rope_scaling", scaling), ("tie_word_embeddings", not cfg["untied"]), torch_dtype]
    if mistral:  # Llama's names and keys, sliding_window, no bias keys
        keys = [("model_type", "mistral"), ("architectures", ["MistralForCausalLM"]),
                ("sliding_window", cfg["window"]), ("attention_bias", None), ("mlp_bias", None)]
    elif qwen2:  # Llama's names, no bias keys (Qwen2Attention's q, k, v have theirs), no window
        keys = [("model_type", "qwen2"), ("architectures", ["Qwen2ForCausalLM"]),
                ("use_sliding_window", False), ("attention_bias", None), ("mlp_bias", None)]
    elif qwen3:  # Llama's names with q_norm, k_norm; attention_bias false, no mlp_bias, no window
        keys = [("model_type", "qwen3"), ("architectures", ["Qwen3ForCausalLM"]),
                ("use_sliding_window", False), ("attention_bias", False), ("mlp_bias", None)]
    elif llama:
        keys = [("model_type", "llama"), ("architectures", ["LlamaForCausalLM"]),
                ("attention_bias", not cfg["nobias"]), ("mlp_bias", not cfg["nobias"])]
    elif neox:
        keys = [("model_type", "gpt_neox"), ("architectures", ["GPTNeoXForCausalLM"]),
                ("vocab_size", cfg["V"]), ("max_position_embeddings", cfg["maxT"]),
                ("hidden_size", cfg["C"]), ("num_hidden_layers", cfg["L"]),
                ("num_attention_heads", cfg["NH"]), ("intermediate_size", 4 * cfg["C"]),
                ("hidden_act", "gelu_new"), ("rotary_pct", 1.0), ("rotary_emb_base", cfg["rope"]),
                ("rope_theta", cfg["rope"]), ("use_parallel_residual", False),
                ("attention_bias", True), ("layer_norm_eps", eps),
                ("tie_word_embeddings", False), torch_dtype, ("rope_scaling", scaling)]
    else:
        keys = [("model_type", "gpt2"), ("architectures", ["GPT2LMHeadModel"]),
                ("vocab_size", cfg["V"]), ("n_positions", cfg["maxT"]), ("n_embd", cfg["C"]),
                ("n_layer", cfg["L"]), ("n_head", cfg["NH"]), ("activation_function", "gelu_new"),
                ("layer_norm_epsilon", eps), ("tie_word_embeddings", not cfg["untied"]), torch_dtype]
    for key, want in keys + (llama_keys if llama else []):
        got = conf.get(key)
        if key.endswith(("_eps", "_epsilon")) and isinstance(got, float):  # as fp32 adds them
            got, want = float(np.float32(got)), float(np.float32(want))
        check(got == want, f"config.json {key} = {want!r} (found {conf.get(key)!r})")

    header, tensors = read_safetensors(os.path.join(args.hf, "model.safetensors"))
    expected = (llama_expected if llama else neox_expected if neox else hf_expected)(cfg, params)
    arch = ("MistralForCausalLM" if mistral else "Qwen2ForCausalLM" if qwen2 else
            "Qwen3ForCausalLM" if qwen3 else "LlamaForCausalLM" if llama else
            "GPTNeoXForCausalLM" if neox else "GPT2LMHeadModel")
    check(set(header) == set(expected), f"the {len(expected)} names of {arch}'s state dict "
          f"(missing {sorted(set(expected) - set(header))[:3]}, extra {sorted(set(header) - set(expected))[:3]})")
    dtype = torch.float32 if args.dtype == "F32" else torch.bfloat16
    exact = [n for n in expected if n in tensors and tensors[n].dtype == dtype and
             tuple(tensors[n].shape) == tuple(expected[n].shape) and
             torch.equal(tensors[n], expected[n].to(dtype))]
    check(len(exact) == len(expected), f"{len(exact)} of {len(expected)} tensors equal the model "
          f"file's in {args.dtype}, shape and bits")

    # The same tokens through both layouts: the reference on the parameters as stored.
    stored = {k: torch.from_numpy(v).to(dtype).float().numpy() for k, v in params.items()}
    model = ref.GPT(cfg["maxT"], cfg["V"], cfg["L"], cfg["NH"], cfg["C"], cfg["Vp"],
                    window=cfg["window"], window_every=cfg["window_every"], KV=cfg["KV"],
                    rope=cfg["rope"], rope_scaling=cfg["scaling"], norm=cfg["norm"], mlp=cfg["mlp"],
                    ffn=cfg["ffn"], nobias=cfg["nobias"], untied=cfg["untied"], eps=cfg["eps"],
                    qkvbias=cfg["qkvbias"], qknorm=cfg["qknorm"])
    with torch.no_grad():
        for name, group in model.groups().items():
            off = 0
            for p in group:
                p.copy_(torch.from_numpy(stored[name][off:off + p.numel()]).view_as(p))
                off += p.numel()
        g = torch.Generator().manual_seed(1)
        T = min(cfg["maxT"], 64)
        idx = torch.randint(0, cfg["V"], (2, T), generator=g)
        want, _ = model(idx, idx)
        got = (llama_forward if llama else neox_forward if neox else hf_forward)(tensors, conf, idx)
    want = want[..., :cfg["V"]]
    err = (got - want).abs().max().item() / max(want.abs().max().item(), 1.0)
    arch = ("Mistral" if mistral else "Qwen2" if qwen2 else "Qwen3" if qwen3 else
            "Llama" if llama else "GPT-NeoX" if neox else "GPT-2")
    check(got.shape == want.shape and err < 1e-5,
          f"logits of transformers' {arch} forward on the export = the reference's on the model "
          f"file: max |difference| / max(max |logit|, 1) = {err:.2e} (bound 1e-5)")

    if args.vocab_dir:
        for mine, theirs in [("vocab.json", "encoder.json"), ("merges.txt", "vocab.bpe")]:
            same = open(os.path.join(args.hf, mine), "rb").read() == \
                open(os.path.join(args.vocab_dir, theirs), "rb").read()
            check(same, f"{mine} is {args.vocab_dir}/{theirs} byte for byte")
        tc = json.load(open(os.path.join(args.hf, "tokenizer_config.json")))
        check(tc.get("tokenizer_class") == "GPT2Tokenizer" and tc.get("model_max_length") == cfg["maxT"]
              and tc.get("eos_token") == "<|endoftext|>",
              f"tokenizer_config.json: GPT2Tokenizer, model_max_length {cfg['maxT']}, eos <|endoftext|>")
        check(conf.get("eos_token_id") == 50256 and conf.get("bos_token_id") == 50256,
              "config.json bos_token_id = eos_token_id = 50256")
    else:
        check(not os.path.exists(os.path.join(args.hf, "vocab.json")), "no tokenizer files")
    print(f"check_hf_export: {len(failures)} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
