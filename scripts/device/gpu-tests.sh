#!/usr/bin/env bash
# GPU tests on a machine that has a GPU but no JDK (see ../shared/tools/README.md). Two halves:
#
#   scripts/device/gpu-tests.sh stage [STAGE]       here: build, then put into STAGE (default .device,
#                                                   git-ignored) a Java runtime, the classes, the jars
#                                                   the GPU tests need and the hf-tiny fixtures
#   bash scripts/device/gpu-tests.sh run [STAGE] [JUNIT ARGS...]
#                                                   on the GPU machine (the device tool, carrying STAGE):
#                                                   runs the tests and writes reports to $OUT
#
# With no JUnit arguments `run` executes every test tagged "gpu" plus the model and engine tests
# (reference parity and DESIGN §8 scenarios) on the CUDA backend (-Dhyspec.test.backend=cuda).
# Example (device tool): command "bash scripts/device/gpu-tests.sh run .device", carry [".device"].
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=${1:?usage: gpu-tests.sh stage|run [STAGE] [JUNIT ARGS...]}
stage=${2:-.device}
shift $(( $# >= 2 ? 2 : $# ))
junit_version=6.1.1

case $mode in
stage)
  ./mvnw -q -B test-compile -DskipTests
  [ -f target/classes/native-kernels/index.txt ] || { echo "no PTX was built (nvcc missing?)" >&2; exit 1; }
  mkdir -p "$stage"
  rm -rf "$stage/classes" "$stage/test-classes" "$stage/lib"
  cp -r target/classes "$stage/classes"
  cp -r target/test-classes "$stage/test-classes"
  rm -rf "$stage/test-classes/node_modules"
  ./mvnw -q -B dependency:copy-dependencies -DincludeScope=test -DoutputDirectory=target/device-lib \
    -DincludeArtifactIds=jcuda,jackson-core,jackson-databind,jackson-annotations,jboss-logging
  ./mvnw -q -B dependency:copy -Dartifact=org.junit.platform:junit-platform-console-standalone:$junit_version \
    -DoutputDirectory=target/device-lib
  mkdir -p "$stage/lib"
  cp target/device-lib/*.jar "$stage/lib/"
  # jcuda-natives without the NVRTC / PTX-compiler / runtime libraries hyspec does not load (saves 9 MB)
  natives=$(ls ~/.m2/repository/org/jcuda/jcuda-natives/12.6.0/jcuda-natives-12.6.0-linux-x86_64.jar)
  tmp=$(mktemp -d)
  (cd "$tmp" && unzip -q "$natives" 'lib/libJCudaDriver-*' && zip -q -r jcuda-driver-natives.jar lib)
  cp "$tmp/jcuda-driver-natives.jar" "$stage/lib/"
  rm -rf "$tmp"
  [ -d "$stage/fixtures" ] || cp -r ../shared/fixtures/hf-tiny "$stage/fixtures"
  # the PTX is about 22 MB of text: it travels compressed (a device call carries 64 MiB in all)
  tar cJf "$stage/kernels.txz" -C "$stage/classes" native-kernels
  rm -rf "$stage/classes/native-kernels"
  ../shared/tools/device-jre.sh "$stage" >/dev/null
  du -sh "$stage"
  ;;
run)
  out=${OUT:-/tmp/hyspec-gpu-out}
  mkdir -p "$out" /tmp/hyspec-jre
  [ -x /tmp/hyspec-jre/bin/java ] || tar xJf "$stage/jre.txz" -C /tmp/hyspec-jre
  rm -rf /tmp/hyspec-kernels && mkdir -p /tmp/hyspec-kernels && tar xJf "$stage/kernels.txz" -C /tmp/hyspec-kernels
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/device.txt" || true
  if [ $# -eq 0 ]; then
    set -- --select-package dev.hyspec.backend.cuda \
      --select-class dev.hyspec.model.ReferenceParityTest --select-class dev.hyspec.model.ChunkedPrefillTest --select-class dev.hyspec.state.MambaStatePoolTest \
      --select-package dev.hyspec.engine --exclude-classname '.*(EngineBeanTest|EmbeddedModelLocationTest)'
  fi
  status=0
  /tmp/hyspec-jre/bin/java --add-modules jdk.incubator.vector -Xmx16g -Dai.djl.offline=true \
    -Dhyspec.test.backend=cuda -Dhyspec.fixtures="$stage/fixtures" -Dhyspec.gpu.report="$out/kernels.jsonl" \
    -jar "$stage/lib/junit-platform-console-standalone-$junit_version.jar" execute \
    --class-path "$stage/test-classes:$stage/classes:/tmp/hyspec-kernels:$(ls "$stage"/lib/*.jar | grep -v console-standalone | paste -sd:)" \
    --disable-banner --details=tree --details-theme=ascii --reports-dir "$out/junit" "$@" \
    > "$out/tests.txt" 2>&1 || status=$?
  tail -c 9000 "$out/tests.txt"
  exit $status
  ;;
*)
  echo "usage: gpu-tests.sh stage|run [STAGE] [JUNIT ARGS...]" >&2
  exit 2
  ;;
esac
