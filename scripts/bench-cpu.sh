#!/usr/bin/env bash
# CPU prefill/decode throughput (batch 1) for checkpoint folders; prints a table, writes JSON.
# JAVA_OPTS=-Dhyspec.cpu.scalar=true measures the scalar (non-Vector-API) path.
# Usage: scripts/bench-cpu.sh [--prompt N] [--decode N] [--repeats N] [--json FILE] DIR...
#        (default DIRs: every folder under ../shared/fixtures/hf-tiny)
set -euo pipefail
cd "$(dirname "$0")/.."
./mvnw -q -B compile dependency:build-classpath -Dmdep.outputFile=target/classpath.txt >/dev/null
args=("$@")
if [[ ${#args[@]} -eq 0 || ! -d ${args[-1]} ]]; then
  args+=(../shared/fixtures/hf-tiny/*/)
fi
exec java --add-modules jdk.incubator.vector ${JAVA_OPTS:-} -cp "target/classes:$(cat target/classpath.txt)" \
  dev.hyspec.bench.CpuBenchmark "${args[@]}"
