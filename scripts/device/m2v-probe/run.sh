#!/usr/bin/env bash
# On the GPU machine, from the repository root of its copy: builds the staged probe (gen.py, here,
# stages it in .device-m2v) against src/native-kernels and runs it; the table also goes to
# $OUT/m2v-probe.txt. Arguments go to the probe: --T 6,4,1 --batches 32,64,256 --runs 60 [VARIANT...].
set -euo pipefail
stage=$(dirname "$0")
/usr/local/cuda/bin/nvcc -O3 -arch=sm_90 -std=c++17 -Isrc/native-kernels -I"$stage" "$stage/probe.cu" -o /tmp/m2v-probe
/tmp/m2v-probe "$@" | tee "${OUT:-/tmp}/m2v-probe.txt"
