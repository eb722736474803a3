#!/usr/bin/env bash
# Benchmarks on the GPU device machine, which has no JDK. Two halves:
#
#   scripts/device/bench.sh stage [STAGE]      here: build, then pack into STAGE (default .device-bench,
#                                              git-ignored) a Java runtime, the classes and jars
#                                              (gpu-tests.sh stage) and this script, as STAGE/bench.sh
#   bash scripts/device/bench.sh run [STAGE] [state|decode|matmul|all] [BENCH ARGS...]
#                                              on the GPU machine (the device tool, carrying STAGE):
#                                              runs the benchmarks and writes to $OUT
#       state-update.json, state-update.txt    StateUpdateBench: recurrent-state update against its floor
#       decode.json, decode.txt                DecodeBench: end-to-end decode (skipped when not built)
#       matmul.json, matmul.txt                MatmulBench: the bf16 tensor-core GEMM at the 8B model's
#                                              shapes, M 16…512 (only when asked for: `matmul`)
#       device.txt                             nvidia-smi
#       report/BENCHMARKS.md, report/*.png     BenchReport of both (report.txt says why if it failed)
#   BENCH ARGS go to each benchmark; --quick makes a smoke run.
#
# Exactly (device tool: command, carry, timeout):
#   scripts/device/bench.sh stage .device-bench
#   "bash scripts/device/bench.sh run .device-bench all"    carry [".device-bench"]    timeout_s 300
#   (from a branch not yet on main, the staged copy: "bash .device-bench/bench.sh run .device-bench all")
# The report again here, from the returned JSON:
#   java -cp ".device-bench/classes:.device-bench/lib/*" dev.hyspec.bench.BenchReport \
#     --state state-update.json --decode decode.json --out DIR
set -euo pipefail
usage="usage: bench.sh stage [STAGE] | bench.sh run [STAGE] [state|decode|matmul|all] [BENCH ARGS...]"
mode=${1:?$usage}
stage=${2:-.device-bench}

case $mode in
stage)
  cd "$(dirname "$0")/../.."
  bash scripts/device/gpu-tests.sh stage "$stage"
  cp scripts/device/bench.sh "$stage/bench.sh"
  ;;
run)
  # Runs from the repository root of the device's copy; STAGE is relative to it (or absolute).
  what=${3:-all}
  shift $(( $# >= 3 ? 3 : $# ))
  case $what in state|decode|matmul|all) ;; *) echo "$usage" >&2; exit 2 ;; esac
  out=${OUT:-/tmp/hyspec-bench-out}
  mkdir -p "$out" /tmp/hyspec-jre
  [ -x /tmp/hyspec-jre/bin/java ] || tar xJf "$stage/jre.txz" -C /tmp/hyspec-jre
  rm -rf /tmp/hyspec-kernels && mkdir -p /tmp/hyspec-kernels && tar xJf "$stage/kernels.txz" -C /tmp/hyspec-kernels
  nvidia-smi > "$out/device.txt" 2>&1 || true
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1 || true)
  cp="$stage/classes:/tmp/hyspec-kernels:$(ls "$stage"/lib/*.jar | grep -v console-standalone | paste -sd:)"
  java=(/tmp/hyspec-jre/bin/java --add-modules jdk.incubator.vector -Xmx24g -Djava.awt.headless=true
        -Dhyspec.bench.driver="$driver" -cp "$cp")
  status=0
  report=()
  if [ "$what" = matmul ]; then
    "${java[@]}" dev.hyspec.bench.MatmulBench --out "$out/matmul.json" "$@" 2>&1 | tee "$out/matmul.txt" || status=$?
    exit $status
  fi
  if [ "$what" != decode ]; then
    "${java[@]}" dev.hyspec.bench.StateUpdateBench --out "$out/state-update.json" "$@" 2>&1 \
      | tee "$out/state-update.txt" || status=$?
    report+=(--state "$out/state-update.json")
  fi
  if [ "$what" != state ]; then
    if [ -f "$stage/classes/dev/hyspec/bench/DecodeBench.class" ]; then
      "${java[@]}" dev.hyspec.bench.DecodeBench --out "$out/decode.json" "$@" 2>&1 \
        | tee "$out/decode.txt" || status=$?
      report+=(--decode "$out/decode.json")
    else
      echo "dev.hyspec.bench.DecodeBench is not built on this branch: the decode benchmark is skipped" \
        | tee "$out/decode.txt"
    fi
  fi
  "${java[@]}" dev.hyspec.bench.BenchReport "${report[@]}" --out "$out/report" > "$out/report.txt" 2>&1 \
    && cat "$out/report.txt" \
    || { tail -5 "$out/report.txt"; echo "BenchReport failed here (see report.txt); run it where the JSON lands"; }
  exit $status
  ;;
*)
  echo "$usage" >&2
  exit 2
  ;;
esac
