#!/usr/bin/env bash
# The nvcc-built trainer links and finds its CUDA libraries when the nvcc on PATH is a wrapper
# script outside the toolkit (as /usr/local/bin/nvcc is on some machines) and neither CUDA_HOME,
# LIBRARY_PATH nor LD_LIBRARY_PATH is set: the link must take the toolkit's library directory from
# nvcc itself. Relinks build/train_gpt_cuda from the objects nvcc-train-build left, then checks
# with ldd that every library resolves. Without nvcc it prints "SKIPPED: nvcc not found".
set -euo pipefail
BUILD=${BUILD:-build}
real_nvcc=$(command -v nvcc || true)
[ -n "$real_nvcc" ] || { [ -x /usr/local/cuda/bin/nvcc ] && real_nvcc=/usr/local/cuda/bin/nvcc; } || true
if [ -z "$real_nvcc" ]; then echo "SKIPPED: nvcc not found"; exit 0; fi

wrap_dir=$(pwd)/$BUILD/tmp/nvcc-outside-toolkit
mkdir -p "$wrap_dir"
printf '#!/bin/sh\nexec "%s" "$@"\n' "$real_nvcc" > "$wrap_dir/nvcc"
chmod +x "$wrap_dir/nvcc"

rm -f $BUILD/train_gpt_cuda
env -u CUDA_HOME -u CUDA_PATH -u LIBRARY_PATH -u LD_LIBRARY_PATH \
    PATH="$wrap_dir:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    make --no-print-directory BUILD="$BUILD" NVCC="$wrap_dir/nvcc" train-cuda
test -x $BUILD/train_gpt_cuda

libs=$(env -u LD_LIBRARY_PATH ldd $BUILD/train_gpt_cuda)
echo "$libs" | grep -E "cudart|cublas"
if echo "$libs" | grep -q "not found"; then
    echo "FAIL: libraries not found at run time:"; echo "$libs" | grep "not found"; exit 1
fi
for lib in libcudart libcublasLt libcublas; do
    echo "$libs" | grep -q "$lib\.so" || { echo "FAIL: $lib is not linked"; exit 1; }
done
echo "ok: linked through a wrapper nvcc with no CUDA environment; every library resolves"
