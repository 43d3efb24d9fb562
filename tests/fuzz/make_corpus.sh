#!/usr/bin/env bash
# Writes the seed corpora of the fuzz targets into DIR (default tests/fuzz/corpus, which holds
# the committed copy): the binary formats from the project's writers (write_seeds), the GPT-2
# vocabulary from test_bpe's tiny vocabulary, test_hf_tokenizer's tokenizer.json files, trainer
# command lines, the committed cluster files and GPU kit report records. Needs
# `make build/tests/fuzz/write_seeds build/tests/test_bpe build/tests/test_hf_tokenizer`. The fuzz-replay suite checks that
# the committed copy is what this script writes now.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
out=${1:-tests/fuzz/corpus}
rm -rf "$out"
mkdir -p "$out"
"$build/tests/fuzz/write_seeds" "$out"

# bpe_vocab: encoder.json, NUL, vocab.bpe, NUL, text to encode.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/tests/test_bpe" tiny_vocab "$tmp" > /dev/null
mkdir -p "$out/bpe_vocab"
vocab_seed() {   # NAME MERGES-FILE TEXT
  { cat "$tmp/encoder.json"; printf '\0'; cat "$2"; printf '\0%s' "$3"; } > "$out/bpe_vocab/$1"
}
vocab_seed tiny "$tmp/vocab.bpe" "$(head -c 300 "$tmp/text.txt")"
printf '#version: 0.2\n! ,\nq\n' > "$tmp/one_symbol.bpe"
vocab_seed merge_one_symbol "$tmp/one_symbol.bpe" 'x'
printf '#version: 0.2\nyz y\n\n, ?\n' > "$tmp/blank_line.bpe"
vocab_seed merge_blank_line "$tmp/blank_line.bpe" $'yzy, ?\xff\xc3\xa9 caf\xc3\xa9 \xe2\x82\xac'

# hf_tokenizer: tokenizer.json, NUL, tokenizer_config.json, NUL, text to encode: test_hf_tokenizer's
# small files (GPT-2's pattern, ignore_merges, merges as pairs, Llama 3's pattern, SentencePiece's
# form, NFC with Qwen2's pattern and added tokens that split text).
"$build/tests/test_hf_tokenizer" known > /dev/null
mkdir -p "$out/hf_tokenizer"
hf=$build/test-data/tokenizer/hf
for name in default ignore_merges merge_pairs split_llama3 sp_tiny; do
  { cat "$hf/$name/tokenizer.json"; printf '\0'; printf '\0xyxy xy\n.\n\xc2\x85 <|doc|>'; } \
    > "$out/hf_tokenizer/$name"
done
{ cat "$hf/qwen_form/tokenizer.json"; printf '\0'
  printf '\0x<e\xcc\x81>y a <t>  b e\xcc\x81\xff\xe1\x84\x80\xe1\x85\xa1 12 <a b>!<a c|> <|doc|>'
} > "$out/hf_tokenizer/qwen_form"
{ cat "$hf/cfg_bos_object/tokenizer.json"; printf '\0'; cat "$hf/cfg_bos_object/tokenizer_config.json"
  printf '\0xyx'; } > "$out/hf_tokenizer/config"

# options: the trainer's arguments, NUL-separated.
mkdir -p "$out/options"
args() {   # NAME ARG...
  local name=$1
  shift
  if [ $# -eq 0 ]; then : > "$out/options/$name"; return; fi
  printf '%s\0' "$@" | head -c -1 > "$out/options/$name"
}
args none
args help --help
args model --preset gpt3-125m --layers 2 --channels 64 --heads 4 --context 128 --vocab 50257 \
  --seed 7 --init-from runs/a/model.bin
args data --train-data 'data/x_train_*.bin' --val-data '' --tokenizer t.bin --batch 8 \
  --seq-len 128 --total-batch-tokens 4096 --steps 10 --eval-only
args optimizer --lr 3e-4 --warmup 5 --warmup-frac 0.1 --final-lr-frac 0 --weight-decay 0.1 \
  --grad-clip 1 --z-loss 1e-4 --beta1 0.9 --beta2 0.95 --eps 1e-8 --on-nan skip --max-skips 3 \
  --lr-schedule wsd --decay-frac 0.3 --wsd-decay-style minus-sqrt
args token-schedule --lr-decay-tokens 260000000000 --lr-warmup-tokens 375000000 \
  --rampup-batch-tokens '32768 32768 4000000000' --total-batch-tokens 524288
args sampling --eval-every 5 --eval-batches 2 --sample-every 5 --sample-length 16 \
  --sample-prompt 1,2,3 --temperature 0.8 --top-k 10
args evaluation --mc-eval hellaswag_val.bin --mc-eval-examples 500 --eval-only
args checkpoints --out-dir runs/x --checkpoint-every 2 --keep-last 3 --keep-every 10 --resume \
  --exit-after 4 --log runs/x/log.jsonl --save-bf16 --no-save --quiet --log-params-norm \
  --log-interval 10 --async-save
args mesh --dp 2 --pq 2 --pkv 2 --attention 2d-overlap --mesh auto --cluster c.cluster \
  --memory-gb 80 --zero 1 --grad-bucket-mb 25 --overlap 0 --timeline 1 --trace t.json --keep-kv \
  --recompute selective --recompute-num-layers 2
args comm --comm nccl --rendezvous file:/tmp/r --rendezvous-id 7.0 --rendezvous-timeout 30 \
  --rank 0 --world-size 4 --local-rank 0 --peak-gflops 1000
args bad_value --steps 0
args bad_choice --attention 2d-fast
args ulysses --attention ulysses --pq 1 --pkv 4 --heads 8
args missing_value --lr
args stray_word --quiet extra
args equals_form --steps=5 --attention=ring '--sample-prompt="q"\'
args attention_shape --attention-window 256 --window-every 2 --document-mask eot \
  --reset-position-ids --recompute selective

# cluster: a cluster file, NUL, a tools/bench_collectives JSONL. The hand-written datasheet
# files (the calibrated ones change with each GPU report or calibration), one with the keys a
# calibration adds (fits, kernel, head-size, step and masked-cost lines); the fits records as
# bench_collectives writes them, one unfittable (P = 1).
mkdir -p "$out/cluster"
measured='fit.all_gather.p2 = 1.2e-05 3.1e-10  # seed
kernel.encoder_forward.efficiency = 125.862:0.6775 0:0.4524   # seed
attention.hs64.forward_efficiency = 1099.58:0.1702 68.7868:0.1330 0:0.1000   # seed
attention.hs64.backward_efficiency = 2748.95:0.0388 0:0.0352   # seed
step.fixed_ms = 1.5   # seed
attention.masked_cost = 0.4 0.75   # seed'
fits='{"type":"fit","op":"all_gather","P":2,"transport":"mpi","alpha_s":1.2e-05,"beta_s_per_byte":3.1e-10,"bus_gbs":3.2,"max_rel_err":0.04,"points":9}
{"type":"fit","op":"send_recv","P":4,"transport":"mpi","alpha_s":8e-06,"beta_s_per_byte":2.5e-10,"bus_gbs":4,"max_rel_err":0.02,"points":9}
{"type":"fit","op":"all_reduce","P":1,"transport":"mpi","alpha_s":0,"beta_s_per_byte":0,"bus_gbs":0,"max_rel_err":0,"points":9}'
{ cat costmodel/clusters/a100-4pernode-hdr.cluster; printf '\0%s\n' "$fits"; } > "$out/cluster/a100"
{ cat costmodel/clusters/h100-1pernode-ndr-datasheet.cluster; printf '%s\n\0%s\n' "$measured" "$fits"; } \
  > "$out/cluster/measured_keys"
cat costmodel/clusters/h100-8pernode-datasheet.cluster > "$out/cluster/no_fits"

# gpu_report: records of a committed GPU kit report (results/gpu/ folders are never rewritten),
# a few of each kind the reader takes and one it skips, within the fuzzer's 16 KB inputs.
mkdir -p "$out/gpu_report"
report=results/gpu/h100-2026-11-26-62d7c56
pick() {   # TYPE COUNT: the first COUNT records of TYPE
  grep -m "$2" "\"type\":\"$1\"" "$report/gpu_report.jsonl"
}
{ pick device 1; pick kernel 4; pick attention_vs_sdpa 2; pick throughput 2; pick check 1;
  grep -h -m 2 '"type":"fit"' results/gpu/h100-2026-11-26T1125-7123ce3/gpu_report.jsonl; } \
  > "$out/gpu_report/kit"
{ pick device 1; cat "$report/side_by_side.jsonl"; } > "$out/gpu_report/by_hand"

# sweep_csv: sweeps as tools/bench_sweep.py writes them (its header, two points, one under a
# window) and by hand (other column order, an extra column, a context, a blank line, CRLF line
# ends), written here: the committed results/sweep-cpu/sweep.csv is rewritten by make bench.
mkdir -p "$out/sweep_csv"
printf '%s\n' \
  'preset,layers,channels,heads,vocab,seq_len,batch,dp,pq,pkv,ranks,algorithm,overlap,steps_timed,ms_per_step,tokens_per_s,mfu,compute_ms,exposed_comm_ms,wait_ms,comm_bytes_per_rank,peak_gflops,window' \
  'tiny,2,64,4,512,1024,2,1,1,1,1,2d,1,4,93.1917,21976.2,0.173957,93.0524,0,0,0,249.735,0' \
  'tiny,2,64,4,512,1024,2,1,2,2,4,2d-overlap,1,4,61.5,33300.1,0.11,40.2,12.7,8.1,1587216,249.735,64' \
  > "$out/sweep_csv/bench_sweep"
printf '%s\r\n' 'ms_per_step,algorithm,preset,layers,channels,heads,vocab,seq_len,context,batch,dp,pq,pkv,overlap,note' \
  '50.0,zigzag,tiny,2,64,4,512,256,512,1,1,1,4,0,x' '' '60.5,ring,small,4,128,4,50257,512,512,2,2,1,2,1,y' \
  > "$out/sweep_csv/by_hand"

# blend: --train-data values: one pattern (with a space), pairs, seven uneven weights, and
# refused ones (a weight without a pattern, a weight of 0, one below the period's resolution).
mkdir -p "$out/blend"
printf '%s' 'data/my shards/web_train_*.bin' > "$out/blend/pattern"
printf '%s' '0.7 web_train_*.bin 0.3 code_train_*.bin' > "$out/blend/pairs"
printf '%s' $'5 a 1e-3 b\t2.5 c 0.25 d 1 e 1 f 0.5 g' > "$out/blend/seven"
printf '%s' '0.7 web_train_*.bin 0.3' > "$out/blend/odd"
printf '%s' '1 a 0 b' > "$out/blend/zero"
printf '%s' '1 a 1e-9 b' > "$out/blend/tiny"
printf '%s' '1e308 a 1e308 b 1e307 c' > "$out/blend/huge"
