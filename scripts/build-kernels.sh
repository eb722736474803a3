#!/usr/bin/env bash
# Compiles every src/native-kernels/*.cu to PTX for sm_90 into the folder given as $1 (the Maven
# build passes target/classes/native-kernels, so the PTX ships as resources) and writes an index of
# the modules. Without nvcc it warns and builds nothing: hyspec.backend=auto then serves on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: build-kernels.sh OUT_DIR}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$nvcc" ]; then
  echo "[hyspec] nvcc not found: no CUDA kernels built (hyspec.backend=auto will use the CPU backend)" >&2
  exit 0
fi
mkdir -p "$out"
shopt -s nullglob
headers=(src/native-kernels/*.cuh)
names=()
for cu in src/native-kernels/*.cu; do
  name=$(basename "$cu" .cu)
  names+=("$name")
  ptx="$out/$name.ptx"
  stale=0
  [ "$ptx" -nt "$cu" ] || stale=1
  for h in "${headers[@]}"; do [ "$ptx" -nt "$h" ] || stale=1; done
  if [ $stale = 1 ]; then
    "$nvcc" -ptx -arch=sm_90 -O3 -std=c++17 -Isrc/native-kernels -o "$ptx.tmp" "$cu"
    mv "$ptx.tmp" "$ptx"
  fi
done
printf '%s\n' "${names[@]}" > "$out/index.txt"
