#!/usr/bin/env bash
# Packs the GPU run kit (`make gpu-bundle`; README.md, "Running on a GPU") into one folder that runs
# on an offline GPU box with none of this project's Debian libraries:
#
#   OUT/bin/NAME          sh wrappers: find the CUDA libraries (tools/bundle_env.sh), run libexec/NAME
#   OUT/libexec/NAME      the programs, RPATH $ORIGIN/../lib
#   OUT/lib/              every non-CUDA shared library they load: the project's kernel libraries
#                         (libgpt_kernels.so, _fp32: the fat binaries, once for all programs) and
#                         Open MPI, OpenBLAS, PCRE2, ICU and their dependencies from this machine's
#                         packages; RPATH $ORIGIN
#   OUT/lib/openmpi3/     the Open MPI components whose libraries are all in the bundle, and
#   OUT/lib/pmix/         PMIx's; OUT/share/openmpi/, share/pmix/ their help texts; OUT/etc/ their
#                         (empty) parameter files; OUT/bin/mpirun, orted
#   OUT/data/             the GPT-2 tokenizer file, fortunes shards, the learnable stream of
#                         tools/stream_shards.py (stream/, and a longer one in stream-long/)
#   OUT/tools/            gpu_check.sh (the check), bundle_env.sh, trainer_checks.sh, sdpa_bench.py,
#                         torch_gpt_bench.py, attention_bench.sh and attention_bench_sdpa.py (the
#                         attention benchmark beside PyTorch's SDPA: bin/attention_bench)
#   OUT/MANIFEST          what was built from what, the glibc / GLIBCXX the programs need, the CUDA
#                         libraries they load, and every file with its size and SHA-256
#
# The CUDA libraries (cudart, cuBLAS, cuBLASLt, ...) are not copied: tools/bundle_env.sh finds the
# box's own at run time. The folder is written as OUT.partial and renamed when complete.
#
# usage: tools/gpu_bundle.sh --out DIR --flavor nvcc|host --data DATA_DIR PROGRAM...
#   --flavor host: programs built for the host runtime (CUDA sources executed on the CPU), whose
#   names end in _host; the bundle then runs `gpu_check.sh --self-test` without a GPU.
set -euo pipefail
shopt -s nullglob
cd "$(dirname "$0")/.."
out="" flavor="" data=""
progs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --flavor) flavor=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    -*) echo "gpu_bundle.sh: unknown option $1" >&2; exit 2 ;;
    *) progs+=("$1"); shift ;;
  esac
done
[ -n "$out" ] && [ -n "$data" ] && [ ${#progs[@]} -gt 0 ] ||
  { echo "usage: tools/gpu_bundle.sh --out DIR --flavor nvcc|host --data DATA_DIR PROGRAM..." >&2; exit 2; }
case "$flavor" in nvcc|host) ;; *) echo "gpu_bundle.sh: --flavor: expected nvcc or host, found '$flavor'" >&2; exit 2 ;; esac
command -v patchelf > /dev/null || { echo "gpu_bundle.sh: patchelf is missing (apt-get install patchelf; tools/setup.sh installs it)" >&2; exit 1; }
# The bundle travels to a GPU box as a gzipped tar (tar czf ... gpu-bundle) of at most 64 MiB with
# whatever else is carried: its compressed size is held under MAX_MIB (about a third of the
# unpacked size, most of which is OpenBLAS and the fat binaries).
MAX_MIB=${GPU_BUNDLE_MAX_MIB:-60}
PY=${PYTHON:-/usr/bin/python3}

# Libraries never copied: glibc's (the box's own must be used with its loader), libstdc++ and
# libgcc_s (every system with the glibc the bundle needs has them new enough, and Debian 12's need
# that glibc too) and CUDA's (the box's own, matching its driver).
is_glibc() {
  case "$1" in
    linux-vdso.so.*|ld-linux*|libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libresolv.so.*|libutil.so.*|libanl.so.*) return 0 ;;
    libstdc++.so.*|libgcc_s.so.*) return 0 ;;
  esac
  return 1
}
is_cuda() {
  case "$1" in
    libcuda.so.*|libcudart.so.*|libcublas.so.*|libcublasLt.so.*|libcurand.so.*|libnccl.so.*|libnvrtc*|libnvJitLink.so.*) return 0 ;;
  esac
  return 1
}

# "soname path" for every library an ELF file needs (transitively), as this machine resolves them;
# a library named by a path in the ELF file (no "=>" in ldd's line) counts under its file name.
deps() {
  ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3; next}
                  $2 == "=>" && $3 == "not" {print $1, "NOTFOUND"; next}
                  $1 ~ /\// && $1 !~ /ld-linux/ {n = split($1, p, "/"); print p[n], $1}'
}

tmp="$out.partial"
rm -rf "$tmp"
mkdir -p "$tmp"/{bin,libexec,lib/openmpi3,lib/pmix,share/openmpi,share/pmix,etc,data/fortunes,data/stream,data/stream-long,tools}

# --- Programs --------------------------------------------------------------------------------------
# Names without the host runtime's _host: the check script runs the same names in both flavors.
names=()
cuda_libs=""
for p in "${progs[@]}"; do
  [ -x "$p" ] || { echo "gpu_bundle.sh: $p is not built" >&2; exit 1; }
  name=$(basename "$p" | sed 's/_host//')
  cp "$p" "$tmp/libexec/$name"
  patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$tmp/libexec/$name"
  names+=("$name")
done

# --- Libraries ---------------------------------------------------------------------------------------
copy_lib() {   # SONAME PATH: into lib/, RPATH $ORIGIN
  local so=$1 path=$2 dir=$tmp/lib
  [ -e "$dir/$so" ] && return 0
  cp -L "$path" "$dir/$so"
  chmod u+w "$dir/$so"
  patchelf --force-rpath --set-rpath '$ORIGIN' "$dir/$so"
}
collect() {   # ELF: copies what it needs; records the CUDA libraries
  local so path
  while read -r so path; do
    [ "$path" = NOTFOUND ] && { is_cuda "$so" && { cuda_libs="$cuda_libs $so"; continue; }
                                echo "gpu_bundle.sh: $1 needs $so, which this machine does not have" >&2; exit 1; }
    is_glibc "$so" && continue
    if is_cuda "$so"; then cuda_libs="$cuda_libs $so"; continue; fi
    copy_lib "$so" "$path"
  done < <(deps "$1")
}
# From the programs as built (their own RPATH finds our kernel libraries), not the copies.
for p in "${progs[@]}"; do collect "$p"; done

# Open MPI: mpirun and orted, the components and PMIx (libpmix and its components), each kept only
# if every library it needs is glibc's or already in the bundle (components for InfiniBand, UCX,
# libfabric or PSM would need libraries the bundle does not carry; NCCL moves GPU data anyway).
OMPI_COMPONENTS=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
PMIX_DIR=/usr/lib/x86_64-linux-gnu/pmix2/lib
skipped=()
fits() {   # ELF: 0 if all its libraries are glibc's or bundled (or libpmix, which we add)
  local so path
  while read -r so path; do
    is_glibc "$so" && continue
    [ -e "$tmp/lib/$so" ] || [ "$so" = libpmix.so.2 ] || { echo "$so"; return 1; }
  done < <(deps "$1")
  return 0
}
if [ -d "$OMPI_COMPONENTS" ] && [ -e "$tmp/lib/libmpi.so.40" ]; then
  if [ -e "$PMIX_DIR/libpmix.so.2" ]; then
    copy_lib libpmix.so.2 "$PMIX_DIR/libpmix.so.2"
    collect "$PMIX_DIR/libpmix.so.2"
  fi
  for c in "$OMPI_COMPONENTS"/*.so "$PMIX_DIR"/pmix/*.so; do
    # MPI-IO, one-sided communication, checkpoint/restart and message logging: never used here.
    case "$(basename "$c")" in
      mca_io_*|mca_fs_*|mca_fbtl_*|mca_fcoll_*|mca_sharedfp_*|mca_osc_*|mca_crs_*|mca_vprotocol_*|mca_compress_*)
        continue ;;
    esac
    dest=$tmp/lib/openmpi3
    case "$c" in "$PMIX_DIR"/*) dest=$tmp/lib/pmix ;; esac
    if missing=$(fits "$c"); then
      cp "$c" "$dest/"
      patchelf --force-rpath --set-rpath '$ORIGIN/..' "$dest/$(basename "$c")"
    else
      skipped+=("$(basename "$c") (needs $missing)")
    fi
  done
  for tool in orterun orted; do
    [ -x "/usr/bin/$tool" ] || continue
    dest=$tmp/libexec/$tool
    cp "/usr/bin/$tool" "$dest"
    patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$dest"
    collect "$dest"
  done
  cp /usr/share/openmpi/*.txt "$tmp/share/openmpi/"
  cp "$PMIX_DIR"/../share/pmix/*.txt "$tmp/share/pmix/" 2> /dev/null || true
  # The configuration files Open MPI and PMIx read (bundle_env.sh points both here): Debian's, which
  # go with the components bundled, so that a box's own (another build's) never apply.
  cp /etc/openmpi/openmpi-mca-params.conf /etc/openmpi/openmpi-default-hostfile "$tmp/etc/"
  cp "$PMIX_DIR/../share/pmix-mca-params.conf" "$tmp/etc/" 2> /dev/null || : > "$tmp/etc/pmix-mca-params.conf"
fi

# --- Wrappers ----------------------------------------------------------------------------------------
for n in "${names[@]}" orterun orted; do
  [ -e "$tmp/libexec/$n" ] || continue
  wrapper=$n
  [ "$n" = orterun ] && wrapper=mpirun
  cat > "$tmp/bin/$wrapper" <<EOF
#!/bin/sh
# $wrapper from the GPU bundle: the box's CUDA libraries and the bundle's Open MPI, then the program.
GPU_BUNDLE=\$(cd "\$(dirname "\$0")/.." && pwd)
. "\$GPU_BUNDLE/tools/bundle_env.sh" || exit 1
exec "\$GPU_BUNDLE/libexec/$n" "\$@"
EOF
  chmod +x "$tmp/bin/$wrapper"
done

# --- Data and tools ----------------------------------------------------------------------------------
for f in "$data"/gpt2_tokenizer.bin "$data"/fortunes_train_*.bin "$data"/fortunes_val_*.bin; do
  [ -f "$f" ] || { echo "gpu_bundle.sh: $f is missing (make data/cache/fortunes_val_000000.bin)" >&2; exit 1; }
  cp "$f" "$tmp/data/fortunes/"
done
# The throughput runs read at most 30 x 8192 tokens: the first 2^18 tokens of the training shard
# are enough (its header's token count rewritten), and half the size.
"$PY" - "$tmp"/data/fortunes/fortunes_train_*.bin <<'PYEOF'
import struct, sys
for path in sys.argv[1:]:
    data = open(path, "rb").read()
    header = list(struct.unpack("<256i", data[:1024]))
    keep = min(header[2], 1 << 18)
    size = 2 if header[0] == 20240520 else 4   # llm.c magics: 20240520 uint16, 20240801 uint32 tokens
    header[2] = keep
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header) + data[1024:1024 + keep * size])
PYEOF
"$PY" tools/stream_shards.py "$tmp/data/stream"
"$PY" tools/stream_shards.py "$tmp/data/stream-long" 65536 20000   # the long-sequence and generation runs
cp tools/gpu_check.sh tools/bundle_env.sh tools/trainer_checks.sh tools/sdpa_bench.py tools/torch_gpt_bench.py \
   tools/attention_bench.sh tools/attention_bench_sdpa.py "$tmp/tools/"
chmod +x "$tmp/tools/"*.sh

# --- Manifest ----------------------------------------------------------------------------------------
# The newest glibc and GLIBCXX symbol versions any ELF file here needs.
max_version() {   # PREFIX FILE...: the highest PREFIX_x.y.z version the files reference
  local prefix=$1; shift
  objdump -T "$@" 2> /dev/null | grep -o "${prefix}_[0-9][0-9.]*" | sed "s/${prefix}_//" | sort -uV | tail -n 1
}
elfs=("$tmp"/libexec/* "$tmp"/lib/*.so* "$tmp"/lib/openmpi3/*.so "$tmp"/lib/pmix/*.so)
glibc_req=$(max_version GLIBC "${elfs[@]}")
glibcxx_req=$(max_version GLIBCXX "$tmp"/libexec/* "$tmp"/lib/*.so*)
cuda_libs=$(printf '%s\n' $cuda_libs | sort -u | tr '\n' ' ')
commit=$(git rev-parse --short=12 HEAD 2> /dev/null || echo unknown)
git diff --quiet HEAD 2> /dev/null || commit="$commit+uncommitted"
nvcc_version=$( { [ "$flavor" = nvcc ] && nvcc --version 2> /dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p'; } || true)
{
  echo "flavor $flavor"
  echo "commit $commit"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
  echo "nvcc ${nvcc_version:-none}"
  echo "glibc_required $glibc_req"
  echo "glibcxx_required ${glibcxx_req:-none}"
  echo "cuda_libraries ${cuda_libs:-none}"
  # dlopen()ed by --comm nccl (comm/comm_nccl.cu); the host runtime's programs link their NCCL in.
  [ "$flavor" = nvcc ] && echo "optional_libraries libnccl.so.2" || echo "optional_libraries none"
  echo "programs ${names[*]}"
  for s in "${skipped[@]}"; do echo "skipped_component $s"; done
  (cd "$tmp" && find . -type f ! -name MANIFEST | sort | while read -r f; do
     echo "file $(stat -c %s "$f") $(sha256sum "$f" | cut -c1-64) ${f#./}"
   done)
} > "$tmp/MANIFEST"

# --- README and size ---------------------------------------------------------------------------------
cat > "$tmp/README.md" <<EOF
# GPU run kit ($flavor build, commit $commit)

    tools/gpu_check.sh            # about 10 minutes on one H100: gpu_report.md, gpu_report.jsonl
    tools/gpu_check.sh --quick    # a few minutes
    tools/gpu_check.sh --bench    # the numbers only: kernel times, attention and throughput beside PyTorch
    tools/gpu_check.sh --bench --llmc /path/to/llm.c/train_gpt2cu   # llm.c in the throughput table too
    tools/gpu_check.sh --dry-run  # checks this folder only (no GPU needed)
    tools/attention_bench.sh      # attention variants beside flash and cuDNN SDPA (TFLOP/s), a minute or two
    bin/train_gpt_cuda --help     # the trainer (bf16); bin/train_gpt_cuda_fp32, bin/train_gpt (CPU)
    bin/generate_cuda --help      # text generation with a KV cache (bf16), 1 or many ranks

Needs: an x86-64 Linux with glibc >= $glibc_req, an NVIDIA driver for CUDA 13, and the CUDA 13
libraries (${cuda_libs:-none}), which tools/bundle_env.sh finds by itself in CUDA_HOME, next to the
nvcc on PATH, in /usr/local/cuda*, in the dynamic linker's cache, or in the nvidia-* Python
packages that come with PyTorch. Everything else is in this folder. See the project's README,
"Running on a GPU", for what the report holds and what a good one looks like.
EOF
size_kib=$(du -sk "$tmp" | cut -f1)
packed_kib=$(( $(tar czf - -C "$tmp" . | wc -c) / 1024 ))
if [ "$packed_kib" -gt $((MAX_MIB * 1024)) ]; then
  echo "gpu_bundle.sh: the bundle is $((packed_kib / 1024)) MiB packed (tar czf; $((size_kib / 1024)) MiB unpacked), over the $MAX_MIB MiB limit:" >&2
  (cd "$tmp" && du -ak . | sort -rn | head -n 12) >&2
  exit 1
fi
rm -rf "$out"
mv "$tmp" "$out"
echo "gpu_bundle.sh: $out ($flavor): $((size_kib / 1024)) MiB ($((packed_kib / 1024)) MiB packed), ${#names[@]} programs, glibc >= $glibc_req, CUDA libraries: ${cuda_libs:-none}"
