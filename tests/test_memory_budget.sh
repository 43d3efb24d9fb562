#!/usr/bin/env bash
# The memory budget (model/memory_budget.h) against the device memory the CUDA trainers hold after
# their first step, on the host runtime (tests/cuda_host), which counts every byte cudaMalloc'ed
# and not freed: predicted and measured (memory_predicted_bytes, memory_measured_bytes of the
# log's summary) must agree within TOL (5%) and, on the host runtime, exactly (EXACT=1): a term
# the budget drops or miscounts fails, however small.
#   tests/test_memory_budget.sh CASE     one configuration (cases below; `list` names them)
#   tests/test_memory_budget.sh refuse   a run that does not fit the device (CUDA_HOST_DEVICE_MEMORY)
#                                        is refused before any large allocation, with one line
#                                        naming the largest term and the --recompute that fits,
#                                        or saying that a larger mesh is needed
#   tests/test_memory_budget.sh zero-master  ZeRO-1 keeps the fp32 master weights of each rank's
#                                        shard only: the measured memory of two ranks with and
#                                        without --zero 1 differs by what each term should save
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=${PYTHON:-/usr/bin/python3}
TOL=${TOL:-0.05}
EXACT=${EXACT:-1}
BF16=$BUILD/train_gpt_cuda_host
FP32=$BUILD/train_gpt_cuda_host_fp32
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OMPI_MCA_ess_singleton_isolated=1
export CUDA_HOST_DEVICES=16
part=${1:?usage: tests/test_memory_budget.sh CASE|list|refuse}

# One rank: 2 layers of C = 256 (4 heads of 64), 2 x 256 tokens, so that parameters, optimizer
# state, activations, the attention's dQ workspace and the sampler each weigh against the 32 MiB
# cuBLASLt workspace. The meshes: C = 128 (2 heads of 64), 2 x 256 tokens over the ranks.
one=(--preset tiny --layers 2 --channels 256 --heads 4 --context 256 --vocab 512 --batch 2
     --seq-len 256)
mesh=(--preset tiny --layers 2 --channels 128 --heads 2 --context 256 --vocab 512 --batch 2
      --seq-len 256)
common=(--val-data "" --tokenizer "" --steps 2 --lr 1e-3 --quiet --no-save --peak-gflops 1)

# case NAME: its trainer, rank count and options.
case_of() {
  case $1 in
    bf16-none)        echo "$BF16 1 ${one[*]} --recompute none" ;;
    bf16-selective)   echo "$BF16 1 ${one[*]} --recompute selective" ;;
    bf16-full)        echo "$BF16 1 ${one[*]} --recompute full --sample-length 0" ;;
    fp32-none)        echo "$FP32 1 ${one[*]} --recompute none" ;;
    fp32-selective)   echo "$FP32 1 ${one[*]} --recompute selective --sample-length 0" ;;
    fp32-full)        echo "$FP32 1 ${one[*]} --recompute full" ;;
    # --recompute-num-layers: 4 layers, the first 3 (bf16) or 2 (fp32) recomputed
    bf16-selective-layers) echo "$BF16 1 ${one[*]} --layers 4 --recompute selective --recompute-num-layers 3" ;;
    fp32-full-layers) echo "$FP32 1 ${one[*]} --layers 4 --recompute full --recompute-num-layers 2 --sample-length 0" ;;
    bf16-2d-1x2-zero)   echo "$BF16 2 ${mesh[*]} --pq 1 --pkv 2 --attention 2d --zero 1 --comm nccl --recompute selective" ;;
    fp32-ring-2x1)      echo "$FP32 2 ${mesh[*]} --pq 2 --pkv 1 --attention ring --comm mpi-staged" ;;
    bf16-2d-keepkv-2x2) echo "$BF16 4 ${mesh[*]} --pq 2 --pkv 2 --attention 2d --keep-kv --zero 1 --comm nccl" ;;
    bf16-overlap-2x2)   echo "$BF16 4 ${mesh[*]} --pq 2 --pkv 2 --attention 2d-overlap --comm mpi-staged --recompute full" ;;
    fp32-2d-2x2-zero)   echo "$FP32 4 ${mesh[*]} --pq 2 --pkv 2 --attention 2d --zero 1 --comm nccl --recompute selective" ;;
    bf16-zigzag-1x4)    echo "$BF16 4 ${mesh[*]} --pq 1 --pkv 4 --attention zigzag --comm nccl --zero 1" ;;
    bf16-ring-dp2-buckets) echo "$BF16 4 ${mesh[*]} --dp 2 --pq 1 --pkv 2 --attention ring --comm nccl --grad-bucket-mb 0.1" ;;
    # Ulysses: its staging and heads buffers, and the dQ semaphores of NH / P heads over all T.
    bf16-ulysses-1x2)   echo "$BF16 2 ${mesh[*]} --pq 1 --pkv 2 --attention ulysses --comm nccl --seq-len 160" ;;
    fp32-ulysses-2x1)   echo "$FP32 2 ${mesh[*]} --pq 2 --pkv 1 --attention ulysses --comm mpi-staged --recompute selective" ;;
    # USP: Ulysses' buffers without its sums, the row's Striped ring on pq Tl tokens of NH / pq
    # heads, its dQ semaphores (T = 160: tiles that do not divide).
    bf16-usp-2x2)       echo "$BF16 4 ${mesh[*]} --pq 2 --pkv 2 --attention usp --comm nccl --seq-len 160" ;;
    # Document masking's bounds of the full sequences and the positions within documents.
    bf16-documents-2x2) echo "$BF16 4 ${mesh[*]} --pq 2 --pkv 2 --attention 2d --comm nccl --document-mask 7 --reset-position-ids" ;;
    # Grouped-query attention: the narrower qkv projection and K/V scratch, and the kernels'
    # widened K|V and fp32 gradients (the sampler's forward sharing the workspace): one rank in
    # bf16 (2 key/value heads of 4) and fp32 (multi-query), the 2x2 ring, Ulysses 1x2.
    bf16-gqa)           echo "$BF16 1 ${one[*]} --kv-heads 2 --recompute selective" ;;
    fp32-mqa)           echo "$FP32 1 ${one[*]} --kv-heads 1 --sample-length 0" ;;
    bf16-gqa-ring-2x2)  echo "$BF16 4 ${mesh[*]} --heads 4 --kv-heads 2 --pq 2 --pkv 2 --attention ring --comm nccl" ;;
    fp32-gqa-ulysses-1x2) echo "$FP32 2 ${mesh[*]} --heads 4 --kv-heads 2 --pq 1 --pkv 2 --attention ulysses --comm mpi-staged" ;;
    # Rotary positions: no position table (parameters, gradients, optimizer state and master
    # weights C x context smaller); one rank, and Zigzag 1x2 with ZeRO-1.
    bf16-rope)          echo "$BF16 1 ${one[*]} --position-embedding rope" ;;
    fp32-rope-zigzag-1x2) echo "$FP32 2 ${mesh[*]} --position-embedding rope --pq 1 --pkv 2 --attention zigzag --zero 1 --comm mpi-staged" ;;
    # Llama's block: no norm biases, the SwiGLU MLP's 2F-wide fc and activations, and the wide
    # backward scratch (F = 1200: fc 2400 wide, past 4C = 1024, its bias-gradient scratch too);
    # one rank under selective, and Ring 1x2 with ZeRO-1 without linear biases and with an untied
    # classifier (its Vp x C in the parameters, gradients, optimizer shards and master weights).
    bf16-llama)         echo "$BF16 1 ${one[*]} --normalization rmsnorm --mlp swiglu --ffn-hidden 1200 --position-embedding rope --kv-heads 2 --recompute selective" ;;
    fp32-llama-ring-1x2) echo "$FP32 2 ${mesh[*]} --normalization rmsnorm --mlp swiglu --disable-bias-linear --untie-embeddings-and-output-weights --position-embedding rope --pq 1 --pkv 2 --attention ring --zero 1 --comm mpi-staged" ;;
    # Qwen2's block: the qkv projection's bias alone (its L W elements in the parameters,
    # gradients, optimizer shards and master weights, its bias-gradient scratch), Ring 1x2, ZeRO-1.
    fp32-qwen2-ring-1x2) echo "$FP32 2 ${mesh[*]} --normalization rmsnorm --mlp swiglu --disable-bias-linear --add-qkv-bias --norm-epsilon 1e-6 --position-embedding rope --kv-heads 2 --pq 1 --pkv 2 --attention ring --zero 1 --comm mpi-staged" ;;
    # QK-norm: its per-layer weights (and LayerNorm's biases) in every copy of the parameters, the
    # raw heads and their statistics kept per layer (one layer's scratch under selective), and its
    # backward's partials in the layers' workspace: Qwen3's block on one rank, and GPT's with
    # LayerNorm under selective recomputation.
    bf16-qwen3)         echo "$BF16 1 ${one[*]} --normalization rmsnorm --mlp swiglu --disable-bias-linear --position-embedding rope --kv-heads 2 --qk-layernorm" ;;
    fp32-qk-norm-selective) echo "$FP32 1 ${one[*]} --qk-layernorm --recompute selective" ;;
    # Muon's Newton-Schulz scratch (the largest matrix twice, its Gram matrix twice, the norm's
    # double): SwiGLU's 2F x C fc is the largest matrix; and dp 2 with the whole state on each rank,
    # also under dist_muon (whose broadcasts land in that scratch: not a byte more).
    bf16-muon)          echo "$BF16 1 ${one[*]} --optimizer muon --mlp swiglu" ;;
    fp32-muon-dp2)      echo "$FP32 2 ${one[*]} --optimizer muon --dp 2" ;;
    bf16-dist-muon-dp2) echo "$BF16 2 ${one[*]} --optimizer dist_muon --dp 2 --comm nccl" ;;
    # The CPU trainer: its peak resident set also holds the program, OpenBLAS, MPI and the pages
    # the C library keeps (tens of MiB), so a model of gigabytes (gpt3-125m) and the 5% bound.
    cpu-125m)           echo "$BUILD/train_gpt 1 --preset gpt3-125m --context 256 --batch 1 --seq-len 256 --sample-length 0" ;;
    *) return 1 ;;
  esac
}
CASES="bf16-none bf16-selective bf16-full fp32-none fp32-selective fp32-full bf16-selective-layers
fp32-full-layers bf16-2d-1x2-zero
fp32-ring-2x1 bf16-2d-keepkv-2x2 bf16-overlap-2x2 fp32-2d-2x2-zero bf16-zigzag-1x4
bf16-ring-dp2-buckets bf16-ulysses-1x2 fp32-ulysses-2x1 bf16-usp-2x2 bf16-documents-2x2
bf16-gqa fp32-mqa bf16-gqa-ring-2x2 fp32-gqa-ulysses-1x2 bf16-rope fp32-rope-zigzag-1x2 bf16-llama
fp32-llama-ring-1x2 fp32-qwen2-ring-1x2 bf16-qwen3 fp32-qk-norm-selective bf16-muon fp32-muon-dp2 bf16-dist-muon-dp2 cpu-125m"

mkdir -p "$BUILD/tmp"
W=$(mktemp -d "$BUILD/tmp/test_memory_budget.$part.XXXXXX")
"$PY" tools/stream_shards.py "$W/data" > /dev/null || exit 1
data=(--train-data "$W/data/t_train_*.bin")
finish() { if [ "$1" = 0 ]; then rm -rf "$W"; else echo "files kept in $W"; fi; exit "$1"; }

# check LOG: prediction against measurement, from the summary record.
check() {
  "$PY" - "$1" "$TOL" "$EXACT" <<'EOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
s = [r for r in recs if r["type"] == "summary"]
assert s, "no summary record in " + sys.argv[1]
pred, meas = s[-1]["memory_predicted_bytes"], s[-1]["memory_measured_bytes"]
tol, exact = float(sys.argv[2]), sys.argv[3] == "1"
ratio = pred / meas
print("predicted %d bytes, measured %d bytes after the first step: predicted / measured = %.6f "
      "(difference %+d bytes)" % (pred, meas, ratio, pred - meas))
if abs(ratio - 1) > tol:
    sys.exit("FAIL: outside %g" % tol)
if exact and pred != meas:
    sys.exit("FAIL: the host runtime counts every byte: expected them equal")
EOF
}

if [ "$part" = list ]; then echo $CASES; finish 0; fi

if [ "$part" = refuse ]; then
  status=0
  # expect_refusal NAME MEMORY PATTERN ARGS...: exits 2 with one error line matching PATTERN,
  # before any step (no log record of one) and before the model is allocated.
  expect_refusal() {
    local name=$1 memory=$2 pattern=$3
    shift 3
    CUDA_HOST_DEVICE_MEMORY=$memory timeout 120 "$BF16" "${one[@]}" "${common[@]}" "${data[@]}" \
      --out-dir "$W/$name" "$@" > "$W/$name.out" 2>&1
    local rc=$?
    local line
    line=$(grep '^error: ' "$W/$name.out")
    echo "$name: exit $rc: $line"
    if [ "$rc" != 2 ] || [ "$(grep -c '^error: ' "$W/$name.out")" != 1 ] ||
       ! grep -q -- "$pattern" <<< "$line" || grep -q '^step ' "$W/$name.out" ||
       grep -q 'cudaMalloc' "$W/$name.out"; then
      echo "FAIL: $name: expected exit 2 and one line matching '$pattern' before any allocation"
      tail -n 20 "$W/$name.out"
      status=1
    fi
  }
  # 74.47 MiB needed (none; the cuBLASLt workspace the largest term at this size), 74 MiB there:
  # selective (71.22 MiB) fits. At 68.5 MiB only full without the sampler (68.45 MiB) does.
  expect_refusal selective-fits 74M "largest term: cuBLASLt workspace.*; --recompute selective would fit" \
    --recompute none
  expect_refusal full-no-sampler 70144K "; --recompute full with --sample-length 0 (no sampler on rank 0) would fit" \
    --recompute none
  # On 4 layers none needs 106.64 MiB, selective on the first 2 of them 103.38, on the first 3
  # 100.12: at 102 MiB the fewest layers that fit are named.
  expect_refusal selective-layers 102M "--recompute none; .*; --recompute selective --recompute-num-layers 3 would fit (100.12 MiB)" \
    --recompute none --layers 4
  # None fits 40 MiB: the workspace and the optimizer alone are more.
  expect_refusal none-fits 40M "no --recompute mode fits.*a larger mesh is needed (more ranks: --pq/--pkv" \
    --recompute none
  # The sampler is what does not fit: a long context (8192: 80.53 MiB of a forward-only model on
  # rank 0 of the 179.98 MiB), a short sequence; without it none fits (102.96 MiB).
  expect_refusal sampler 150M "largest term: sampler (rank 0).*--recompute none with --sample-length 0" \
    --recompute full --context 8192
  # Four ranks agree: one line (rank 0's), every rank exits 2 (mpirun reports the first).
  CUDA_HOST_DEVICE_MEMORY=40M timeout 120 bash tests/mpirun.sh 4 "$BF16" "${mesh[@]}" "${common[@]}" \
    "${data[@]}" --pq 2 --pkv 2 --attention 2d --comm nccl --out-dir "$W/mesh" > "$W/mesh.out" 2>&1
  rc=$?
  echo "mesh: exit $rc: $(grep '^error: ' "$W/mesh.out")"
  if [ "$rc" != 2 ] || [ "$(grep -c '^error: ' "$W/mesh.out")" != 1 ] ||
     ! grep -q '^error: memory per device: .*a larger mesh is needed' "$W/mesh.out"; then
    echo "FAIL: mesh: expected exit 2 and one refusal line"; tail -n 20 "$W/mesh.out"; status=1
  fi
  # And 80 MiB that fit run as usual: the prediction is the refusal's.
  CUDA_HOST_DEVICE_MEMORY=80M timeout 120 "$BF16" "${one[@]}" "${common[@]}" "${data[@]}" \
    --out-dir "$W/fits" --recompute none > "$W/fits.out" 2>&1 || { echo "FAIL: fits: exit $?"; tail -n 20 "$W/fits.out"; status=1; }
  [ "$status" = 0 ] && { check "$W/fits/log.jsonl" || status=1; }
  finish "$status"
fi

if [ "$part" = zero-master ]; then
  # The same bf16 run of 2 ranks without and with ZeRO-1; rank 0's measured bytes after the first
  # step. From first principles, not from the budget: ZeRO-1 pads the n parameters to P (a
  # multiple of the world W) and gives each rank S = P / W of them; it saves fp32 master weights
  # and AdamW m, v of n - S, costs the bf16 parameters and gradients of the padding and an
  # S-element bf16 shard scratch. A full master copy per rank would save 4 (W - 1) S bytes less.
  for z in 0 1; do
    if ! timeout 300 bash tests/mpirun.sh 2 "$BF16" "${mesh[@]}" "${common[@]}" "${data[@]}" --pq 1 \
        --pkv 2 --attention 2d --comm nccl --zero $z --out-dir "$W/zero$z" > "$W/zero$z.out" 2>&1; then
      echo "FAIL: the trainer failed (--zero $z)"; tail -n 30 "$W/zero$z.out"; finish 1
    fi
  done
  "$PY" - "$W/zero0/log.jsonl" "$W/zero1/log.jsonl" <<'EOF'
import json, sys
def run(path):
    recs = [json.loads(l) for l in open(path, encoding="utf-8")]
    cfg = [r for r in recs if r["type"] == "config"][0]
    summary = [r for r in recs if r["type"] == "summary"][-1]
    return cfg["params"], cfg["world"], summary["memory_measured_bytes"]
n, W, plain = run(sys.argv[1])
_, _, zero = run(sys.argv[2])
P = -(-n // W) * W
S = P // W
expected = (4 + 8) * (n - S) - 2 * 2 * (P - n) - 2 * S
print("%d parameters on %d ranks: measured %d bytes without ZeRO-1, %d with: saved %d, expected %d "
      "(fp32 master weights: %d of it)" % (n, W, plain, zero, plain - zero, expected, 4 * (n - S)))
if plain - zero != expected:
    sys.exit("FAIL: ZeRO-1 should keep the master weights of this rank's shard only")
EOF
  finish $?
fi

spec=$(case_of "$part") || { echo "unknown case '$part' (cases: $CASES)"; finish 2; }
read -r -a words <<< "$spec"
prog=${words[0]} np=${words[1]} args=("${words[@]:2}")
[ "$prog" = "$BUILD/train_gpt" ] && EXACT=0   # a resident set is not an allocation count
echo "$part: $np rank(s), $(basename "$prog") ${args[*]}"
if ! timeout 300 bash tests/mpirun.sh "$np" "$prog" "${args[@]}" "${common[@]}" "${data[@]}" \
    --out-dir "$W/run" > "$W/run.out" 2>&1; then
  echo "FAIL: the trainer failed"; tail -n 30 "$W/run.out"; finish 1
fi
sed -n '/^memory per device/,/^  total/p' "$W/run.out"
check "$W/run/log.jsonl"
finish $?
