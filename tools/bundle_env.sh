# The environment the GPU bundle's programs run in; sourced (POSIX sh) by the bundle's bin/
# wrappers and by tools/gpu_check.sh, with GPU_BUNDLE set to the bundle folder. Nothing has to be
# set by hand: it
#   - checks that this machine's glibc is as new as the programs need (MANIFEST: glibc_required);
#   - checks that the machine's libstdc++ has the GLIBCXX version the programs need;
#   - finds the CUDA libraries the programs load (MANIFEST: cuda_libraries; and optional_libraries,
#     loaded at run time where present: NCCL) and puts their folders on LD_LIBRARY_PATH, looking
#     in LD_LIBRARY_PATH, CUDA_HOME / CUDA_PATH, the toolkit of the nvcc on PATH, /usr/local/cuda*,
#     /opt/cuda, the dynamic linker's cache, and the nvidia-* Python packages that come with
#     PyTorch (python3's site-packages), in that order;
#   - points Open MPI at the bundle's components and help texts, and lets mpirun run as root.
# Returns non-zero with a one-line error when something is missing. BUNDLE_ENV_VERBOSE=1 prints
# what it chose. Idempotent: a second source (a wrapper started by mpirun) returns at once.

bundle_env_fail() { echo "error: GPU bundle $GPU_BUNDLE: $*" >&2; return 1; }
bundle_env_say() { [ "${BUNDLE_ENV_VERBOSE:-0}" = 1 ] && echo "bundle_env: $*" >&2; return 0; }
bundle_manifest() { sed -n "s/^$1 //p" "$GPU_BUNDLE/MANIFEST" 2> /dev/null | head -n 1; }
# version_ge A B: A >= B in version order.
version_ge() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$2" ]; }
path_prepend() { case ":${LD_LIBRARY_PATH:-}:" in *":$1:"*) ;; *) LD_LIBRARY_PATH="$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;; esac; }

# The first folder that holds SONAME, or nothing.
bundle_find_lib() {
  so=$1
  # The user's LD_LIBRARY_PATH, CUDA_HOME / CUDA_PATH, the toolkit of the nvcc on PATH (nvcc says
  # where its toolkit is: the nvcc on PATH may be a wrapper script elsewhere), the usual installs.
  cands=$(printf '%s' "${LD_LIBRARY_PATH:-}" | tr ':' ' ')
  for home in "${CUDA_HOME:-}" "${CUDA_PATH:-}"; do
    [ -n "$home" ] && cands="$cands $home/lib64 $home/lib $home/targets/x86_64-linux/lib"
  done
  if command -v nvcc > /dev/null 2>&1; then
    top=$(nvcc --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -n 1)
    [ -n "$top" ] && cands="$cands $top/lib64 $top/targets/x86_64-linux/lib"
  fi
  cands="$cands /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib"
  cands="$cands $(ls -d /usr/local/cuda-*/lib64 /usr/local/cuda-*/targets/x86_64-linux/lib 2> /dev/null | sort -rV | tr '\n' ' ')"
  cands="$cands /opt/cuda/lib64 /opt/cuda/targets/x86_64-linux/lib"
  for d in $cands; do
    [ -e "$d/$so" ] && { echo "$d"; return 0; }
  done
  hit=$(ldconfig -p 2> /dev/null | awk -v so="$so" '$1 == so && /x86-64/ {print $NF; exit}')
  [ -n "$hit" ] && { dirname "$hit"; return 0; }
  # pip's nvidia-* wheels (PyTorch's CUDA libraries): site-packages/nvidia/<package>/lib.
  if command -v python3 > /dev/null 2>&1; then
    for sp in $(python3 -c 'import site; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2> /dev/null); do
      for f in "$sp"/nvidia/*/lib/"$so" "$sp"/nvidia/*/*/lib/"$so"; do
        [ -e "$f" ] && { dirname "$f"; return 0; }
      done
    done
  fi
  return 1
}

bundle_env_setup() {
  [ -n "${GPU_BUNDLE:-}" ] && [ -f "$GPU_BUNDLE/MANIFEST" ] || { echo "error: bundle_env.sh: GPU_BUNDLE must name the bundle folder" >&2; return 1; }
  [ "${GPU_BUNDLE_READY:-}" = "$GPU_BUNDLE" ] && return 0

  need=$(bundle_manifest glibc_required)
  have=$(getconf GNU_LIBC_VERSION 2> /dev/null | awk '{print $2}')
  [ -n "$have" ] || bundle_env_fail "cannot tell this machine's glibc version (getconf GNU_LIBC_VERSION)" || return 1
  version_ge "$have" "$need" ||
    bundle_env_fail "the programs need glibc >= $need, this machine has $have (build the bundle on an older distribution)" || return 1

  # libstdc++ is the machine's (any system with that glibc has one new enough).
  need=$(bundle_manifest glibcxx_required)
  if [ -n "$need" ] && [ "$need" != none ]; then
    sys=$(ldconfig -p 2> /dev/null | awk '$1 == "libstdc++.so.6" && /x86-64/ {print $NF; exit}')
    [ -n "$sys" ] && grep -qa "GLIBCXX_$need" "$sys" 2> /dev/null ||
      bundle_env_fail "the programs need libstdc++ with GLIBCXX_$need (GCC 11 or newer); this machine's is ${sys:-missing}" || return 1
    bundle_env_say "libstdc++: $sys (has GLIBCXX_$need)"
  fi

  dirs=""
  for so in $(bundle_manifest cuda_libraries); do
    [ "$so" = none ] && continue
    d=$(bundle_find_lib "$so") ||
      bundle_env_fail "$so not found: install the CUDA 13 toolkit or runtime libraries, or set CUDA_HOME (searched LD_LIBRARY_PATH, CUDA_HOME, CUDA_PATH, nvcc's toolkit, /usr/local/cuda*, /opt/cuda, ldconfig, python3's nvidia-* packages)" || return 1
    bundle_env_say "$so: $d"
    case " $dirs " in *" $d "*) ;; *) dirs="$dirs $d" ;; esac
  done
  # Libraries loaded at run time where present (dlopen): NCCL for --comm nccl. Found as the others
  # (PyTorch's nvidia-nccl package among the places); missing, only that transport is unavailable.
  for so in $(bundle_manifest optional_libraries); do
    [ "$so" = none ] && continue
    if d=$(bundle_find_lib "$so"); then
      bundle_env_say "$so: $d"
      case " $dirs " in *" $d "*) ;; *) dirs="$dirs $d" ;; esac
    else
      bundle_env_say "$so: not found (only what needs it is unavailable: --comm nccl for libnccl.so.2)"
    fi
  done
  for d in $dirs; do path_prepend "$d"; done
  export LD_LIBRARY_PATH
  GPU_BUNDLE_CUDA_DIRS=$dirs

  # Open MPI and PMIx from the bundle: components, help texts, parameter files, and mpirun's
  # orted on PATH. PMIx searches its install folders (Debian's /usr/lib/x86_64-linux-gnu/pmix2)
  # besides any component path it is given, and loads what it finds there first: on a box whose
  # PMIx lives in that folder, another build's components failed to load with "(ignored)" lines
  # and a compression banner. Its install folders are moved to the bundle, as Open MPI's
  # configuration folder is (the box's /etc/openmpi belongs to another Open MPI).
  export OMPI_MCA_mca_base_component_path="$GPU_BUNDLE/lib/openmpi3"
  export OPAL_PKGDATADIR="$GPU_BUNDLE/share/openmpi" OPAL_SYSCONFDIR="$GPU_BUNDLE/etc"
  export PMIX_MCA_mca_base_component_path="$GPU_BUNDLE/lib/pmix"
  export PMIX_PREFIX="$GPU_BUNDLE" PMIX_EXEC_PREFIX="$GPU_BUNDLE" PMIX_LIBDIR="$GPU_BUNDLE/lib"
  export PMIX_PKGLIBDIR="$GPU_BUNDLE/lib/pmix" PMIX_DATAROOTDIR="$GPU_BUNDLE/share"
  export PMIX_DATADIR="$GPU_BUNDLE/share" PMIX_PKGDATADIR="$GPU_BUNDLE/share/pmix"
  export PMIX_SYSCONFDIR="$GPU_BUNDLE/etc"
  export OMPI_MCA_ess_singleton_isolated="${OMPI_MCA_ess_singleton_isolated:-1}"
  case ":$PATH:" in *":$GPU_BUNDLE/bin:"*) ;; *) PATH="$GPU_BUNDLE/bin:$PATH" ;; esac
  export PATH
  if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
  export GPU_BUNDLE GPU_BUNDLE_CUDA_DIRS GPU_BUNDLE_READY="$GPU_BUNDLE"
  return 0
}

bundle_env_setup
