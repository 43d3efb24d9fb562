#!/usr/bin/python3
"""Writes a variant of a Hugging Face GPT-2 or Llama directory, for build/import_hf's tests: the
forms transformers itself writes (no "transformer." or "model." prefix as GPT2Model and
LlamaModel save, the attention-mask or rotary inv_freq buffers of older versions, an explicit
lm_head.weight, F16 or BF16 weights, Llama without biases) and damaged ones (a config this model
cannot follow, a missing, extra or misshapen tensor, a broken header).

  hf_variant.py SRC DST [--strip-prefix] [--buffers] [--lm-head same|other] [--dtype F32|F16|BF16]
                [--config KEY=JSON]... [--drop NAME] [--drop-matching REGEX] [--zero-matching REGEX]
                [--extra NAME] [--reshape NAME] [--break length|json|overlap|dtype|truncate|twice]
SRC holds config.json and an F32 or BF16 model.safetensors; DST gets both (and nothing else).
numpy only (no torch import: the refusal tests write many variants); F16 and BF16 are rounded to
nearest even, as PyTorch rounds.
"""
import argparse
import json
import os
import re
import struct

import numpy as np


def read(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    body, out = data[8 + n:], {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        if e["dtype"] == "F32":
            t = np.frombuffer(body[b:end], dtype="<f4")
        else:  # BF16: the upper half of a float32
            t = (np.frombuffer(body[b:end], dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        out[name] = t.reshape(e["shape"]).copy()
    return out


def stored(t, dtype):
    """The little-endian bytes of float32 array t as dtype, rounded to nearest even."""
    t = np.ascontiguousarray(t, dtype=np.float32)
    if dtype == "F32":
        return t.astype("<f4").tobytes()
    if dtype == "F16":
        return t.astype("<f2").tobytes()
    bits = t.view(np.uint32).astype(np.uint64)   # finite values only, as here
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2").tobytes()


def write(path, tensors, dtype, brk=None):
    header, chunks, pos = {}, [], 0
    for name, t in tensors.items():
        raw = stored(t, dtype)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [pos, pos + len(raw)]}
        chunks.append(raw)
        pos += len(raw)
    if brk == "overlap":   # the second tensor's range moved 4 bytes into the first's
        second = list(header)[1]
        header[second]["data_offsets"] = [x - 4 for x in header[second]["data_offsets"]]
    if brk == "dtype":     # a weight stored as integers
        header[list(header)[0]]["dtype"] = "I32" if dtype == "F32" else "I16"
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":"))
    if brk == "twice":     # the second tensor under the first one's name (JSON allows it)
        first, second = list(header)[:2]
        text = text.replace(json.dumps(second) + ":", json.dumps(first) + ":", 1)
    if brk == "json":
        text = text[:-1] + ",}"
    text += " " * (-len(text) % 8)
    n = len(text) if brk != "length" else 1 << 40
    data = struct.pack("<Q", n) + text.encode() + b"".join(chunks)
    if brk == "truncate":
        data = data[:-10]
    open(path, "wb").write(data)


def main():
    a = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("src")
    a.add_argument("dst")
    a.add_argument("--strip-prefix", action="store_true")
    a.add_argument("--buffers", action="store_true")
    a.add_argument("--lm-head", choices=["same", "other"])
    a.add_argument("--dtype", default="F32", choices=["F32", "F16", "BF16"])
    a.add_argument("--config", action="append", default=[])
    a.add_argument("--drop")
    a.add_argument("--drop-matching")
    a.add_argument("--zero-matching")
    a.add_argument("--extra")
    a.add_argument("--reshape")
    a.add_argument("--break", dest="brk", choices=["length", "json", "overlap", "dtype", "truncate", "twice"])
    args = a.parse_args()
    conf = json.load(open(os.path.join(args.src, "config.json")))
    for kv in args.config:
        k, v = kv.split("=", 1)
        if v == "DELETE":
            conf.pop(k, None)
        else:
            conf[k] = json.loads(v)
    t = read(os.path.join(args.src, "model.safetensors"))
    llama = conf.get("model_type") == "llama"
    full = "model." if llama else "transformer."
    if args.strip_prefix:
        t = {k[len(full):] if k.startswith(full) else k: v for k, v in t.items()}
    prefix = "" if args.strip_prefix else full
    if args.buffers and llama:  # LlamaRotaryEmbedding's inv_freq, as older versions saved it
        hd = conf["hidden_size"] // conf["num_attention_heads"]
        inv = 1.0 / (conf["rope_theta"] ** (np.arange(0, hd, 2, dtype=np.float32) / hd))
        for l in range(conf["num_hidden_layers"]):
            t[f"{prefix}layers.{l}.self_attn.rotary_emb.inv_freq"] = inv.astype(np.float32)
    elif args.buffers:
        T = t[prefix + "wpe.weight"].shape[0]
        for l in range(conf["n_layer"]):
            t[f"{prefix}h.{l}.attn.bias"] = np.tril(np.ones((T, T), np.float32)).reshape(1, 1, T, T)
            t[f"{prefix}h.{l}.attn.masked_bias"] = np.array(-1e4, np.float32)
    if args.lm_head:
        wte = t[prefix + ("embed_tokens.weight" if llama else "wte.weight")]
        t["lm_head.weight"] = wte.copy() if args.lm_head == "same" else wte * 2
    if args.drop:
        del t[args.drop]
    if args.drop_matching:
        t = {k: v for k, v in t.items() if not re.fullmatch(args.drop_matching, k)}
    if args.zero_matching:
        t = {k: np.zeros_like(v) if re.fullmatch(args.zero_matching, k) else v for k, v in t.items()}
    if args.extra:
        t[args.extra] = np.zeros(4, np.float32)
    if args.reshape:
        t[args.reshape] = t[args.reshape].reshape(-1)[:-1].copy()
    os.makedirs(args.dst, exist_ok=True)
    json.dump(conf, open(os.path.join(args.dst, "config.json"), "w"), indent=2)
    write(os.path.join(args.dst, "model.safetensors"), t, args.dtype, args.brk)


if __name__ == "__main__":
    main()
