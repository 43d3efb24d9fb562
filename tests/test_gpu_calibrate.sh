#!/usr/bin/env bash
# The GPU calibration of the cost model (costmodel/gpu_calibrate.c, gpu_report.c, gpu_validation.c).
#
#   tests/test_gpu_calibrate.sh math       a made-up report with known rates: each curve point is
#                                          the rate over the datasheet peak, a backward GEMM row is
#                                          two GEMMs, GEMMs rise with size (a slower larger GEMM
#                                          pools with the smaller), the host's part of a step, the
#                                          base file's interconnect lines kept, FA2 from the SDPA times
#   tests/test_gpu_calibrate.sh errors     bad reports and bad calibrated keys: one-line errors
#   tests/test_gpu_calibrate.sh committed  the committed calibrated clusters, costmodel/gpu_validation.md
#                                          and the paper table equal what the committed report gives
#                                          now, and the validation meets its goal where the report
#                                          timed a run's kernels (10%), all runs within 25%
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
CM=$BUILD/costmodel
part=${1:?usage: tests/test_gpu_calibrate.sh math|errors|committed}
W=$(mktemp -d "$BUILD/tmp/test_gpu_calibrate.XXXXXX")
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
line_of() { grep "^$1 = " "$2" | sed 's/ *#.*//; s/^[^=]*= //'; }
finish() {
  if [ "$fails" -eq 0 ]; then rm -rf "$W"; echo "$part: passed"; exit 0; fi
  echo "$part: $fails failure(s); files in $W"; exit 1
}

# A report: peak 1000 TFLOP/s and 2000 GB/s; GEMMs of 10 GFLOP at 500 TFLOP/s (0.02 ms), a
# backward row of 2 x 40 GFLOP at 700 (0.114286 ms), 100 GFLOP at 600 (slower than 40: pools with
# it); AdamW 1000 MB at 1600 GB/s twice the size at 1800; attention head size 64 ours 100 GFLOP at
# 150 TFLOP/s forward, 250 GFLOP at 50 backward, SDPA twice as fast; two runs whose phases leave
# 0.2 and 0.4 ms.
write_report() {
  cat > "$1" <<'EOF'
{"type":"device","name":"Test GPU","peak":{"name":"Test","bf16_tflops":1000,"hbm_gbps":2000,"source":"test"}}
{"type":"check","section":"device","name":"gpu_info","result":"ok","detail":""}
{"type":"kernel","shape":"gpt3-125m T=1024","kernel":"matmul_forward_cuda qkv","ms":0.02,"gflop":10,"mbytes":1}
{"type":"kernel","shape":"gpt3-125m T=1024","kernel":"matmul_backward_cuda fc","ms":0.114285714,"gflop":80,"mbytes":1}
{"type":"kernel","shape":"gpt3-125m T=1024","kernel":"matmul_forward_cuda lm_head","ms":0.166666667,"gflop":100,"mbytes":1}
{"type":"kernel","shape":"gpt3-125m T=1024","kernel":"adamw_update_cuda","ms":0.625,"gflop":0.1,"mbytes":1000}
{"type":"kernel","shape":"gpt3-125m T=1024","kernel":"adamw_update_cuda","ms":1.111111111,"gflop":0.2,"mbytes":2000}
{"type":"kernel","shape":"gpt3-125m T=1024","kernel":"attention_partial_forward_cuda","ms":0.666666667,"gflop":100,"mbytes":10}
{"type":"kernel","shape":"gpt3-125m T=1024","kernel":"attention_partial_backward_cuda","ms":5,"gflop":250,"mbytes":10}
{"type":"attention_vs_sdpa","hs":128,"T":2048,"B":8,"NH":16,"ours_fwd_ms":1,"sdpa_fwd_ms":0.5,"ratio_fwd":0.5,"ours_bwd_ms":4,"sdpa_bwd_ms":2,"ratio_bwd":0.5,"ours_fwd_tflops":200,"ours_bwd_tflops":100,"sdpa_backend":"flash"}
{"type":"throughput","run":"gpt3-125m B=8 T=1024, 8 steps","summary":{"ms_per_step":10.2,"forward_ms":3,"backward_ms":6,"optimizer_ms":1}}
{"type":"throughput","run":"gpt3-125m B=1 T=8192, 8 steps","summary":{"ms_per_step":20.4,"forward_ms":5,"backward_ms":14,"optimizer_ms":1}}
EOF
}

case $part in
math)
  write_report "$W/report.jsonl"
  base=costmodel/clusters/h100-8pernode-datasheet.cluster
  "$CM" --calibrate-gpu "$W/report.jsonl" --base "$base" --out "$W/t.cluster" > "$W/cal.out" 2>&1 ||
    { bad "--calibrate-gpu failed: $(cat "$W/cal.out")"; finish; }
  c=$W/t.cluster
  # 10 GFLOP at 0.5; 40 (x2) at 0.7 pooled with 100 at 0.6: 180 GFLOP in 0.2809524 ms = 0.6407
  check "GEMMs: 10 GFLOP at 0.5, the 40 GFLOP pair pooled with the slower 100 GFLOP GEMM (180 GFLOP in 0.281 ms)" \
    [ "$(line_of matmul.efficiency "$c")" = "40:0.6407 0:0.5000" ]
  check "AdamW by MB: 1000 MB at 1600 GB/s, 2000 MB at 1800 over 2000 GB/s" \
    [ "$(line_of kernel.adamw.efficiency "$c")" = "2000:0.9000 0:0.8000" ]
  check "attention at head size 64 (kernel row) and 128 (attention row), forward and backward" \
    eval '[ "$(line_of attention.hs64.forward_efficiency "$c")" = "0:0.1500" ] &&
          [ "$(line_of attention.hs64.backward_efficiency "$c")" = "0:0.0500" ] &&
          [ "$(line_of attention.hs128.forward_efficiency "$c")" = "0:0.2000" ] &&
          [ "$(line_of attention.hs128.backward_efficiency "$c")" = "0:0.1000" ]'
  check "the host's part of a step: the mean of 0.2 and 0.4 ms" [ "$(line_of step.fixed_ms "$c")" = "0.3000" ]
  check "peaks from the report's device record, the name from the file" \
    eval '[ "$(line_of matmul.peak_tflops "$c")" = 1000 ] && [ "$(line_of memory.bandwidth_gbs "$c")" = 2000 ] &&
          grep -q "^name = t$" "$c"'
  check "the base's interconnect lines kept with their sources" \
    eval 'for k in inter.bandwidth_gbs intra.efficiency node.gpus bytes.param; do
            [ "$(grep "^$k " "$c")" = "$(grep "^$k " "$base")" ] || exit 1; done'
  check "every line has a source" eval '! grep -vE "^(#|name = |$)" "$c" | grep -v "  *# ." | grep -q .'
  "$CM" --calibrate-gpu "$W/report.jsonl" --base "$base" --attention-source sdpa --out "$W/f.cluster" > /dev/null 2>&1
  check "--attention-source sdpa: the SDPA times (2x ours), no kernel rows of ours" \
    eval '[ "$(line_of attention.hs128.forward_efficiency "$W/f.cluster")" = "0:0.4000" ] &&
          [ "$(line_of attention.hs128.backward_efficiency "$W/f.cluster")" = "0:0.2000" ] &&
          ! grep -q "^attention.hs64" "$W/f.cluster"'
  printf '%s\n' '{"type":"fit","op":"all_gather","P":8,"transport":"nccl","alpha_s":2e-05,"beta_s_per_byte":4e-12,"bus_gbs":250,"max_rel_err":0.1,"points":19}' \
    '{"type":"fit","op":"send_recv","P":8,"transport":"nccl","alpha_s":-1e-06,"beta_s_per_byte":5e-12,"bus_gbs":200,"max_rel_err":0.1,"points":19}' \
    '{"type":"fit","op":"all_reduce","P":1,"transport":"nccl","alpha_s":0,"beta_s_per_byte":0,"bus_gbs":0,"max_rel_err":0,"points":19}' > "$W/fits.jsonl"
  "$CM" --calibrate-gpu "$W/report.jsonl" --base "$base" --collectives "$W/fits.jsonl" --out "$W/n.cluster" > /dev/null 2>&1
  check "--collectives: the fits of P >= 2 as fit lines (a negative alpha as 0), one rank's left out" \
    eval '[ "$(grep -c "^fit\." "$W/n.cluster")" = 2 ] && grep -q "^fit.all_gather.p8 = 2e-05 4e-12   # measured: " "$W/n.cluster" &&
          grep -q "^fit.send_recv.p8 = 0 5e-12   # measured: " "$W/n.cluster"'
  { cat "$W/report.jsonl"; printf '%s\n' '{"type":"fit","op":"all_gather","P":8,"transport":"nccl","alpha_s":3e-05,"beta_s_per_byte":6e-12,"bus_gbs":166,"max_rel_err":0.1,"points":19}'; } > "$W/withfits.jsonl"
  "$CM" --calibrate-gpu "$W/withfits.jsonl" --base "$base" --collectives "$W/fits.jsonl" --out "$W/r.cluster" > /dev/null 2>&1
  check "a report's own fits (the kit's step 5) come first; --collectives adds the ops it lacks" \
    eval 'grep -q "^fit.all_gather.p8 = 3e-05 6e-12   # measured: .*tools/bench_collectives on nccl" "$W/r.cluster" &&
          grep -q "^fit.send_recv.p8 = 0 5e-12 " "$W/r.cluster" && [ "$(grep -c "^fit\." "$W/r.cluster")" = 2 ]'
  # The model uses them: a run's optimizer is AdamW's bytes at the measured efficiency.
  "$CM" --validate-gpu "$W/report.jsonl" --cluster "$c" --out-dir "$W" > "$W/val.out" 2>&1
  check "--validate-gpu: both runs predicted, the host's part of a step included" \
    eval 'grep -q "validate-gpu: .* of 2 runs" "$W/val.out" && /usr/bin/python3 -c "import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 2 and all(r[\"pred_fixed_ms\"] == \"0.3000\" for r in rows), rows" "$W/gpu_validation.csv"'
  ;;
errors)
  expect() {   # WHAT PATTERN COMMAND...: exits 1..123 with PATTERN on its first stderr line
    local what=$1 pattern=$2; shift 2
    local out; out=$(bash tests/expect_job_failure.sh "$pattern" "$@" 2>&1) && ok "$what: $(printf '%s' "$out" | grep -E "$pattern" | head -n 1)" || bad "$what: $out"
  }
  write_report "$W/report.jsonl"
  grep -v '"device"' "$W/report.jsonl" > "$W/nodevice.jsonl"
  expect "a report without a device record" "^error: --calibrate-gpu $W/nodevice.jsonl: expected a device record" \
    "$CM" --calibrate-gpu "$W/nodevice.jsonl" --base costmodel/clusters/h100-8pernode-datasheet.cluster --out "$W/x.cluster"
  sed 's/"ms":0.02,/"ms":"fast",/' "$W/report.jsonl" > "$W/badnum.jsonl"
  expect "a kernel row with a bad time" "^error: --calibrate-gpu $W/badnum.jsonl:3: expected a finite number for \"ms\"" \
    "$CM" --calibrate-gpu "$W/badnum.jsonl" --base costmodel/clusters/h100-8pernode-datasheet.cluster --out "$W/x.cluster"
  sed 's/"hs":128,/"hs":0,/' "$W/report.jsonl" > "$W/badhs.jsonl"
  n=$(grep -n '"hs":0,' "$W/badhs.jsonl" | cut -d: -f1)
  expect "an attention row with head size 0" "^error: --calibrate-gpu $W/badhs.jsonl:$n: expected a whole number in \[1, 2147483647\] for \"hs\", found 0$" \
    "$CM" --calibrate-gpu "$W/badhs.jsonl" --base costmodel/clusters/h100-8pernode-datasheet.cluster --out "$W/x.cluster"
  expect "no --base" "^error: --calibrate-gpu: expected --base FILE" "$CM" --calibrate-gpu "$W/report.jsonl" --out "$W/x.cluster"
  expect "an unknown --attention-source" "^error: --attention-source: expected ours or sdpa, found 'fa3'" \
    "$CM" --calibrate-gpu "$W/report.jsonl" --attention-source fa3
  grep -v '"throughput"' "$W/report.jsonl" > "$W/noruns.jsonl"
  expect "--validate-gpu on a report without trainer runs" "^error: --validate-gpu $W/noruns.jsonl: expected throughput records" \
    "$CM" --validate-gpu "$W/noruns.jsonl" --cluster costmodel/clusters/h100-8pernode.cluster --out-dir "$W"
  { cat costmodel/clusters/h100-8pernode-datasheet.cluster; echo "kernel.softmax.efficiency = 0:0.5   # made up"; } > "$W/k.cluster"
  expect "a calibrated key for a kernel the model does not time" "^error: $W/k.cluster:[0-9]+: key 'kernel.softmax.efficiency': expected a kernel of cluster_kernel_name" \
    "$CM" --preset tiny --seq-len 64 --gpus 1 --cluster "$W/k.cluster"
  { cat costmodel/clusters/h100-8pernode-datasheet.cluster; echo "attention.hs64.forward_efficiency = 0:0.5   # made up"; } > "$W/h.cluster"
  expect "a head size with one phase's curve" "^error: $W/h.cluster: key 'attention.hs64.backward_efficiency': expected a line for it" \
    "$CM" --preset tiny --seq-len 64 --gpus 1 --cluster "$W/h.cluster"
  { cat costmodel/clusters/h100-8pernode-datasheet.cluster; echo "step.fixed_ms = 1   # made up"; echo "step.fixed_ms = 2   # again"; } > "$W/s.cluster"
  expect "a calibrated key given twice" "^error: $W/s.cluster:[0-9]+: key 'step.fixed_ms': expected the key once, found 'a second line" \
    "$CM" --preset tiny --seq-len 64 --gpus 1 --cluster "$W/s.cluster"
  ;;
committed)
  report=$(make -s --no-print-directory -f Makefile -f - print-gpu-report <<'EOF' 2> /dev/null
print-gpu-report: ; @echo $(GPU_REPORT)
EOF
)
  [ -d "$report" ] || { bad "no GPU report folder under results/gpu (make's GPU_REPORT: '$report')"; finish; }
  echo "  report: $report"
  for spec in h100-8pernode:h100-8pernode-datasheet: h100-1pernode-ndr:h100-1pernode-ndr-datasheet: \
              h100-1pernode-ndr-fa2:h100-1pernode-ndr-datasheet:sdpa; do
    IFS=: read -r name base src <<< "$spec"
    "$CM" --calibrate-gpu "$report" --base "costmodel/clusters/$base.cluster" ${src:+--attention-source $src} \
      --out "$W/$name.cluster" > /dev/null 2>&1
    check "costmodel/clusters/$name.cluster is what $report gives (make costmodel-gpu)" \
      diff <(grep -v '^#' "costmodel/clusters/$name.cluster") <(grep -v '^#' "$W/$name.cluster")
  done
  check "--mesh auto on GPUs reads the calibrated file" \
    eval 'grep -q "costmodel/clusters/h100-8pernode.cluster" train/mesh_auto.c && head -n 1 costmodel/clusters/h100-8pernode.cluster | grep -q -- "--calibrate-gpu"'
  "$CM" --validate-gpu "$report" --cluster costmodel/clusters/h100-8pernode.cluster --out-dir "$W" > "$W/val.out" 2>&1
  check "costmodel/gpu_validation.md and .csv are what the report gives" \
    eval 'cmp -s costmodel/gpu_validation.md "$W/gpu_validation.md" && cmp -s costmodel/gpu_validation.csv "$W/gpu_validation.csv"'
  "$CM" --paper --out-dir "$W" > /dev/null 2>&1
  check "costmodel/paper_comparison.md and .csv are what the clusters give" \
    eval 'cmp -s costmodel/paper_comparison.md "$W/paper_comparison.md" && cmp -s costmodel/paper_comparison.csv "$W/paper_comparison.csv"'
  if /usr/bin/python3 - "$W/gpu_validation.csv" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert rows, "no runs"
for r in rows:
    e, timed = abs(float(r["error_pct"])), r["kernels_at_shape"] == "1"
    print("  %-28s measured %9.2f ms, predicted %9.2f ms, %+6.1f%%%s" % (r["run"], float(r["measured_ms"]),
          float(r["predicted_ms"]), float(r["error_pct"]), "" if timed else " (kernels not timed at this shape)"))
    assert e <= (10 if timed else 25), r["run"]
EOF
  then ok "every run whose kernels the report timed within 10%, every run within 25%"
  else bad "the validation misses its goal"; fi
  ;;
*) echo "usage: tests/test_gpu_calibrate.sh math|errors|committed" >&2; exit 2 ;;
esac
finish
