#!/usr/bin/env bash
# The packaged server on the GPU device machine, which has no JDK. Two halves:
#
#   scripts/device/serve.sh stage [STAGE]     here: package the application, then pack into STAGE
#                                             (default .device-serve, git-ignored) a Java runtime, the
#                                             Quarkus application (native libraries for linux-x86_64
#                                             only) and this script with its client; the embedded
#                                             model comes with the working tree
#   bash STAGE/serve.sh run [STAGE]           on the GPU machine (the device tool, carrying STAGE):
#                                             starts the server twice from the same jar, once with
#                                             hyspec.backend=auto (which finds the GPU; float32
#                                             activations, so greedy tokens must equal the CPU's) and
#                                             once with hyspec.backend=cpu, and runs serve_check.py
#                                             against both: /v1/models, health, greedy completions under
#                                             both rollback strategies compared token for token across
#                                             the backends, an SSE chat stream, a bad request, metrics.
#                                             Writes $OUT/serve-check.json and both servers' logs.
#
# Exactly (device tool: command, carry, timeout):
#   scripts/device/serve.sh stage .device-serve
#   "bash .device-serve/serve.sh run .device-serve"    carry [".device-serve"]    timeout_s 300
set -euo pipefail
usage="usage: serve.sh stage [STAGE] | serve.sh run [STAGE]"
mode=${1:?$usage}
stage=${2:-.device-serve}

case $mode in
stage)
  cd "$(dirname "$0")/../.."
  ./mvnw -q -B package -DskipTests
  rm -rf "$stage" && mkdir -p "$stage"
  tmp=$(mktemp -d)
  cp -r target/quarkus-app "$tmp/app"
  # only the native libraries hyspec loads travel: the tokenizers' for linux-x86_64, JCuda's driver API
  zip -q -d "$tmp"/app/lib/main/ai.djl.huggingface.tokenizers-*.jar \
    'native/lib/linux-aarch64/*' 'native/lib/osx-*' 'native/lib/win-*'
  zip -q -d "$tmp"/app/lib/main/org.jcuda.jcuda-natives-*.jar \
    'lib/libJNvPTXCompiler-*' 'lib/libJNvrtc-*' 'lib/libJCudaRuntime-*'
  # jars travel unpacked (xz compresses class files to half of what the jars' deflate does) and are
  # zipped again on the device
  (cd "$tmp" && find app -name '*.jar' | while read -r jar; do
      mkdir "$jar.d" && (cd "$jar.d" && unzip -q "$OLDPWD/$jar") && rm "$jar"
    done)
  tar cf - -C "$tmp" app | xz -6 -T0 > "$stage/app.txz"
  rm -rf "$tmp"
  ../shared/tools/device-jre.sh "$stage" >/dev/null
  cp scripts/device/serve.sh scripts/device/serve_check.py "$stage/"
  du -sh "$stage"
  ;;
run)
  out=${OUT:-/tmp/hyspec-serve-out}
  work=/tmp/hyspec-serve
  mkdir -p "$out" /tmp/hyspec-jre
  [ -x /tmp/hyspec-jre/bin/java ] || tar xJf "$stage/jre.txz" -C /tmp/hyspec-jre
  rm -rf "$work" && mkdir -p "$work"
  tar xJf "$stage/app.txz" -C "$work"
  python3 - "$work/app" <<'PY'
import os, shutil, sys, zipfile
for root, dirs, _ in os.walk(sys.argv[1]):
    for d in [d for d in dirs if d.endswith(".jar.d")]:
        src = os.path.join(root, d)
        names = sorted(os.path.relpath(os.path.join(r, f), src) for r, _, fs in os.walk(src) for f in fs)
        names.sort(key=lambda n: n != "META-INF/MANIFEST.MF")
        with zipfile.ZipFile(os.path.join(root, d[:-2]), "w", zipfile.ZIP_STORED) as z:
            for n in names:
                z.write(os.path.join(src, n), n)
        shutil.rmtree(src)
PY
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/device.txt" || true
  start() {  # name port backend activation-dtype
    /tmp/hyspec-jre/bin/java --add-modules jdk.incubator.vector -Xmx8g -Dai.djl.offline=true \
      -Dquarkus.http.port="$2" -Dhyspec.backend="$3" -Dhyspec.activation-dtype="$4" \
      -Dhyspec.model.path="$PWD/models/kjv-hybrid" -jar "$work/app/quarkus-run.jar" > "$out/server-$1.log" 2>&1 &
    echo $!
  }
  gpu=$(start gpu 8000 auto float32)
  cpu=$(start cpu 8001 cpu auto)
  status=0
  python3 "$stage/serve_check.py" --gpu http://127.0.0.1:8000 --cpu http://127.0.0.1:8001 \
    --gpu-log "$out/server-gpu.log" --out "$out/serve-check.json" || status=$?
  kill "$gpu" "$cpu" 2>/dev/null || true
  wait "$gpu" "$cpu" 2>/dev/null || true
  tail -5 "$out/server-gpu.log"
  exit $status
  ;;
*)
  echo "$usage" >&2
  exit 2
  ;;
esac
