#!/usr/bin/env bash
# A benchmark sweep over model shape, sequence length, mesh (dp x pq x pkv) and attention schedule:
# the real trainer under mpirun for a few steps per point, on a generated Markov-chain shard, with
# OMP_NUM_THREADS=1 per rank (on a small machine the P ranks share its cores: oversubscribed).
#
#   tools/bench_sweep.sh --out DIR --points FILE [--steps N] [--warm N] [--train PROG]
#                        [--extra "FLAGS"] [--work DIR] [--peak-gflops X]
#
#   --points FILE   one point per line: preset layers channels heads vocab seq_len batch dp pq pkv
#                   algorithm [window=W] [trace]   (window=W: --attention-window W in every
#                   layer; '#' comments; algorithm: 2d 2d-overlap ring striped
#                   zigzag ulysses usp; ranks = dp*pq*pkv; ring/striped/zigzag/ulysses get
#                   --pq/--pkv as given and use only their product, which must divide the heads
#                   for ulysses; usp uses the mesh, pq dividing the heads; `trace` marks the point
#                   that writes a Chrome trace, else the first point with the most ranks).
#                   Examples: tools/sweeps/*.points.
#   --steps N       optimizer steps per point (default 6); --warm N: the first N are not timed
#                   (default 2, 1 when N <= 4)
#   --train PROG    the trainer (default build/train_gpt; on the GPU kit build/train_gpt_cuda with
#                   --extra "--comm nccl" or "--comm mpi-staged")
#   --extra FLAGS   more trainer flags for every point (e.g. "--overlap 0 --grad-bucket-mb 1")
#   --work DIR      run directories, outputs, the shard and the trace (default DIR/runs)
#   --peak-gflops X peak GFLOP/s per rank for MFU, passed to every point; by default the first
#                   point's trainer measures it and that value is passed to the rest, so every
#                   row's MFU uses the same peak
#
# Writes DIR/sweep.csv and DIR/sweep.jsonl (one row per point; the columns and how each is
# computed: tools/bench_sweep.py), DIR/throughput.png, DIR/exposed_comm.png,
# DIR/bytes_per_rank.png (against P, per algorithm, one panel per shape and sequence length),
# DIR/timeline_strip.png (one step of the traced point, per rank) and DIR/run_info.txt (command,
# machine, date, commit). A point that fails stops the sweep with the tail of its output. Relative
# paths are taken from the repository root (the script runs there).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=${PYTHON:-python3}
helper=tools/bench_sweep.py
usage() { sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2; exit 2; }
die() { echo "error: $*" >&2; exit 2; }

out="" points_file="" steps=6 warm="" train=$BUILD/train_gpt extra="" work="" peak=""
command_line="tools/bench_sweep.sh $*"
while [ $# -gt 0 ]; do
  case $1 in -h|--help) usage ;; esac
  [ $# -ge 2 ] || die "$1: needs a value"
  case $1 in
    --out) out=$2 ;;
    --points) points_file=$2 ;;
    --steps) steps=$2 ;;
    --warm) warm=$2 ;;
    --train) train=$2 ;;
    --extra) extra=$2 ;;
    --work) work=$2 ;;
    --peak-gflops) peak=$2 ;;
    *) die "unknown option $1 (--help lists them)" ;;
  esac
  shift 2
done
[ -n "$out" ] && [ -n "$points_file" ] || die "--out DIR and --points FILE are required (--help)"
[[ $steps =~ ^[0-9]+$ ]] && [ "$steps" -ge 2 ] || die "--steps: an integer >= 2, not '$steps'"
[ -n "$warm" ] || { [ "$steps" -le 4 ] && warm=1 || warm=2; }
[[ $warm =~ ^[0-9]+$ ]] && [ "$warm" -lt "$steps" ] ||
  die "--warm: an integer below --steps ($steps), not '$warm'"
[[ -z $peak || $peak =~ ^[0-9]+([.][0-9]*)?$ ]] || die "--peak-gflops: a number, not '$peak'"
[ -x "$train" ] || die "$train: not built (make $train)"
command -v mpirun >/dev/null || die "mpirun not found (run tools/setup.sh)"
command -v gnuplot >/dev/null || die "gnuplot not found (run tools/setup.sh)"
command -v "$PY" >/dev/null || die "$PY not found"
work=${work:-$out/runs}
read -r -a extra_flags <<< "$extra"
listed=$("$PY" "$helper" points "$points_file") || exit 2
mapfile -t points <<< "$listed"

mkdir -p "$out" "$work"
rm -f "$out/sweep.csv" "$out/sweep.jsonl" "$out"/*.png "$out/run_info.txt"
"$PY" "$helper" shard "$work/train_000.bin" --points "$points_file" --steps "$steps"

start=$SECONDS trace_file="" trace_label="" load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for line in "${points[@]}"; do
  IFS=$'\t' read -r idx preset layers channels heads vocab seq batch dp pq pkv ranks algo trace \
    window <<< "$line"
  label="$algo, dp $dp x pq $pq x pkv $pkv (P=$ranks), $preset L=$layers C=$channels T=$seq"
  label+=" B=$batch"
  run=$(printf '%s/%03d-%s-%dx%dx%d-L%dC%dT%d' "$work" "$idx" "$algo" "$dp" "$pq" "$pkv" \
        "$layers" "$channels" "$seq")
  flags=()
  if [ "$window" -gt 0 ]; then
    label+=" window $window" run+="W$window"
    flags+=(--attention-window "$window")
  fi
  echo "[$idx/${#points[@]}] $label"
  [ -n "$peak" ] && flags+=(--peak-gflops "$peak")
  if [ "$trace" = 1 ]; then
    trace_file=$run.trace.json trace_label=$label
    flags+=(--trace "$trace_file")
  fi
  rm -rf "$run"
  OMP_NUM_THREADS=1 bash tests/mpirun.sh "$ranks" "$train" --preset "$preset" --layers "$layers" \
    --channels "$channels" --heads "$heads" --vocab "$vocab" --context "$seq" --seq-len "$seq" \
    --batch "$batch" --dp "$dp" --pq "$pq" --pkv "$pkv" --attention "$algo" \
    --train-data "$work/train_*.bin" --val-data "" --tokenizer "" --steps "$steps" --warmup 1 \
    --eval-every 0 --sample-length 0 --no-save --quiet --out-dir "$run" \
    "${flags[@]}" "${extra_flags[@]}" < /dev/null > "$run.out" 2>&1 ||
    { echo "error: point $idx of $points_file ($label) failed; the end of $run.out:" >&2
      tail -n 15 "$run.out" >&2; exit 1; }
  row_flags=()
  [ "$trace" = 1 ] && row_flags=(--trace "$trace_file")
  "$PY" "$helper" row "$run/log.jsonl" --point "$line" --warm "$warm" --out "$out" \
    "${row_flags[@]}"
  [ -n "$peak" ] || peak=$("$PY" "$helper" peak "$run/log.jsonl")
done

"$PY" "$helper" plot "$out"
"$PY" tools/bench_timeline_strip.py "$trace_file" "$out/timeline_strip.png" --title "$trace_label"
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit+=" with uncommitted changes"
cat > "$out/run_info.txt" <<EOF
command: $command_line
points: $points_file (${#points[@]} points), $steps steps per point, the first $warm not timed
trainer: $train $extra (OMP_NUM_THREADS=1 per rank, tests/mpirun.sh: oversubscribed, unbound)
peak GFLOP/s per rank used for MFU: $peak
machine: $cpu, $(nproc) cores, $(uname -sr)
date: $(date -u '+%Y-%m-%d %H:%M UTC'), $((SECONDS - start)) s
commit: $commit
load average (1, 5, 15 min) at the start: $load_start, at the end: $(cut -d' ' -f1-3 /proc/loadavg)
traced point: $trace_label ($trace_file)
EOF
echo "wrote $out: sweep.csv, sweep.jsonl, throughput.png, exposed_comm.png, bytes_per_rank.png,"
echo "  timeline_strip.png, run_info.txt ($((SECONDS - start)) s)"
