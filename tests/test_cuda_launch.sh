#!/usr/bin/env bash
# Launching the CUDA trainer (its CUDA sources on the host runtime) on several ranks:
#   - without MPI in the trainer: the NCCL id through a rendezvous file and through a TCP socket
#     (rank, size and local rank from Open MPI's environment, as from Slurm's under srun);
#   - a stale rendezvous file (another run's key) and a missing one: a clear error within the
#     timeout, not a hang;
#   - one rank on nccl, under mpirun and alone (the first real GPU run failed there);
#   - two ranks on a node with one GPU: refused on nccl with the reason, run on mpi-staged
#     (which shares the GPU on purpose); two ranks that both pick GPU 0: refused by NCCL's init;
#   - transports the backend cannot use: refused with the reason.
# The host runtime shows CUDA_HOST_DEVICES GPUs (1 by default).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
CUDA=${CUDA:-$BUILD/train_gpt_cuda_host}
CPU=${CPU:-$BUILD/train_gpt}
PY=${PYTHON:-/usr/bin/python3}
export OMP_NUM_THREADS=1 OMPI_MCA_ess_singleton_isolated=1
mkdir -p $BUILD/tmp
W=$(mktemp -d $BUILD/tmp/test_cuda_launch.XXXXXX)
"$PY" tools/stream_shards.py "$W/data" > /dev/null || exit 1
failures=0
ok() { echo "  ok    $*"; }
fail() { echo "  FAIL  $*"; failures=$((failures + 1)); }
ARGS=(--preset tiny --layers 2 --channels 32 --heads 2 --context 32 --vocab 512 --batch 2
      --seq-len 16 --steps 3 --lr 1e-2 --warmup 0 --eval-every 0 --sample-length 0 --quiet
      --peak-gflops 1 --train-data "$W/data/t_train_*.bin" --val-data "" --tokenizer "" --no-save)

# expect NAME PATTERN SECONDS COMMAND...: the command fails (exit 1..123) within SECONDS and says
# PATTERN.
expect() {
  local name=$1 pattern=$2 secs=$3 out rc
  shift 3
  local start=$EPOCHREALTIME
  out=$(timeout "$secs" "$@" 2>&1 < /dev/null)
  rc=$?
  local took
  took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  if [ "$rc" -ge 1 ] && [ "$rc" -le 123 ] && printf '%s\n' "$out" | grep -qE -- "$pattern"; then
    ok "$name: exit $rc after $took s: $(printf '%s\n' "$out" | grep -m1 -E -- "$pattern")"
  else
    fail "$name: exit $rc after $took s, expected a failure saying '$pattern'"
    printf '%s\n' "$out" | tail -n 8 | sed 's/^/        | /'
  fi
}

# runs NAME PATTERN COMMAND...: the command succeeds and says PATTERN.
runs() {
  local name=$1 pattern=$2 out rc
  shift 2
  out=$(timeout 300 "$@" 2>&1 < /dev/null)
  rc=$?
  if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -qE -- "$pattern"; then
    ok "$name: $(printf '%s\n' "$out" | grep -m1 -E -- "$pattern")"
  else
    fail "$name: exit $rc, expected success saying '$pattern'"
    printf '%s\n' "$out" | tail -n 8 | sed 's/^/        | /'
  fi
}

# One rank on nccl, under mpirun and alone: the real NCCL 2.28 refused this at the second
# communicator split until every call was followed by polling what it touched.
runs "1 rank on nccl under mpirun" "^summary: 2 timed steps" \
  bash tests/mpirun.sh 1 "$CUDA" "${ARGS[@]}" --out-dir "$W/one-mpirun" --comm nccl
runs "1 rank on nccl without mpirun" "^summary: 2 timed steps" \
  "$CUDA" "${ARGS[@]}" --out-dir "$W/one-alone" --comm nccl

key="test-$$-$RANDOM"
CUDA_HOST_DEVICES=2 runs "file rendezvous, 2 ranks" "transport nccl \(launch: file:" \
  bash tests/mpirun.sh 2 "$CUDA" "${ARGS[@]}" --pkv 2 --out-dir "$W/file" \
  --rendezvous "file:$W/rdv" --rendezvous-id "$key"
[ -f "$W/rdv" ] && ok "rank 0 wrote the rendezvous file" || fail "no rendezvous file at $W/rdv"
# A port the kernel calls free now (as test_rendezvous.c's free_port): a random one could be held
# by another program's connection, and rank 0 then rightly refuses it ("Address already in use").
port=$("$PY" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')
CUDA_HOST_DEVICES=2 runs "tcp rendezvous, 2 ranks" "transport nccl \(launch: tcp:" \
  bash tests/mpirun.sh 2 "$CUDA" "${ARGS[@]}" --pkv 2 --out-dir "$W/tcp" \
  --rendezvous "tcp:127.0.0.1:$port" --rendezvous-id "$key"
# The file of the run above is stale for a run with another key; none at all for another path.
expect "stale rendezvous file" "another run" 60 "$CUDA" "${ARGS[@]}" --pkv 2 --out-dir "$W/stale" \
  --rendezvous "file:$W/rdv" --rendezvous-id "other-$key" --rank 1 --world-size 2 --local-rank 0 \
  --rendezvous-timeout 1
expect "missing rendezvous file" "not found" 60 "$CUDA" "${ARGS[@]}" --pkv 2 --out-dir "$W/missing" \
  --rendezvous "file:$W/no-such-file" --rendezvous-id "$key" --rank 1 --world-size 2 \
  --local-rank 0 --rendezvous-timeout 1
expect "file rendezvous without a run key" "rendezvous-id" 60 env -u SLURM_JOB_ID -u PMIX_NAMESPACE \
  -u OMPI_MCA_ess_base_jobid -u TORCHELASTIC_RUN_ID "$CUDA" "${ARGS[@]}" --out-dir "$W/nokey" \
  --rendezvous "file:$W/rdv2" --rank 0 --world-size 1 --local-rank 0
# One GPU, two ranks on the node.
CUDA_HOST_DEVICES=1 expect "2 ranks, 1 GPU, nccl" "2 ranks on this node but 1 GPU visible" 120 \
  bash tests/mpirun.sh 2 "$CUDA" "${ARGS[@]}" --pkv 2 --out-dir "$W/gpus" --comm nccl
# Two ranks told they are local rank 0 (a wrong --local-rank): both pick GPU 0 and NCCL refuses
# them at init, with its own reason, on one line.
CUDA_HOST_DEVICES=2 expect "2 ranks on GPU 0 (wrong --local-rank), nccl" \
  "error: rank [01]: .*NCCL communicator init on the world group failed: invalid usage.*Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 0" 120 \
  bash tests/mpirun.sh 2 "$CUDA" "${ARGS[@]}" --pkv 2 --out-dir "$W/dup" --rendezvous "file:$W/rdv-dup" \
  --rendezvous-id "$key" --local-rank 0
CUDA_HOST_DEVICES=1 runs "2 ranks share 1 GPU on mpi-staged" "transport mpi-staged" \
  bash tests/mpirun.sh 2 "$CUDA" "${ARGS[@]}" --pkv 2 --out-dir "$W/shared" --comm mpi-staged
expect "CUDA trainer, --comm mpi" "--comm mpi: the cuda-bf16 backend's buffers are device memory" 60 \
  "$CUDA" "${ARGS[@]}" --out-dir "$W/mpi" --comm mpi
expect "CPU trainer, --comm nccl" "--comm nccl: the cpu backend's buffers are host memory" 60 \
  "$CPU" "${ARGS[@]}" --out-dir "$W/cpu" --comm nccl
expect "mpi-staged without MPI" "without MPI only the nccl transport runs" 60 \
  "$CUDA" "${ARGS[@]}" --out-dir "$W/staged" --comm mpi-staged --rendezvous "file:$W/x" \
  --rendezvous-id "$key" --rank 0 --world-size 1

if [ "$failures" -eq 0 ]; then rm -rf "$W"; echo "test_cuda_launch: passed"; exit 0; fi
echo "test_cuda_launch: $failures failure(s); files kept in $W"
exit 1
