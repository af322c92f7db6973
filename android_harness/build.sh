#!/usr/bin/env bash
# Compile the Android harness's pure-Java parts (everything but dev.thorsdk.harness.android, which needs
# the Android SDK and ONNX Runtime) with the JDK, and run their JUnit 4 tests. No Android SDK needed.
#
#   android_harness/build.sh                  # build into android_harness/build/harness
#   BUILD_DIR=/tmp/x android_harness/build.sh
#   RESULTS_OUT=/tmp/r.json android_harness/build.sh   # also keep a results document the app format writes
#
# Needs javac (JDK 17+) and JUnit 4 + hamcrest (Debian: apt-get install -y junit4).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD_DIR="${BUILD_DIR:-$HERE/build/harness}"
JUNIT_JAR="${JUNIT_JAR:-/usr/share/java/junit4.jar}"
HAMCREST_JAR="${HAMCREST_JAR:-/usr/share/java/hamcrest-core.jar}"
VECTORS="${THOR_VECTORS:-$HERE/../tests/vectors}"   # the shared protocol vectors (ProtocolVectorsTest)
for jar in "$JUNIT_JAR" "$HAMCREST_JAR"; do
  if [ ! -f "$jar" ]; then
    echo "missing $jar (apt-get install -y junit4, or set JUNIT_JAR / HAMCREST_JAR)" >&2
    exit 3
  fi
done
rm -rf "$BUILD_DIR"
mkdir -p "$BUILD_DIR/main" "$BUILD_DIR/test"
javac --release 17 -Xlint:all -Werror -d "$BUILD_DIR/main" \
  "$HERE"/app/src/main/java/dev/thorsdk/harness/*.java "$HERE"/runtime/src/main/java/dev/thorsdk/runtime/*.java
javac --release 17 -Xlint:all -d "$BUILD_DIR/test" -cp "$BUILD_DIR/main:$JUNIT_JAR" \
  "$HERE"/app/src/test/java/dev/thorsdk/harness/*.java
java ${RESULTS_OUT:+-Dthor.results.out="$RESULTS_OUT"} -Dthor.vectors="$VECTORS" -cp "$BUILD_DIR/main:$BUILD_DIR/test:$JUNIT_JAR:$HAMCREST_JAR" \
  org.junit.runner.JUnitCore \
  dev.thorsdk.harness.BatteryPowerTest dev.thorsdk.harness.ProtocolTest dev.thorsdk.harness.HarnessTest \
  dev.thorsdk.harness.ProtocolVectorsTest
