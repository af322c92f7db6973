#!/usr/bin/env bash
# Compile the thor-sdk Java runtime (estimator, layer lists, training runs, power-table select; JDK only) and run its JUnit 4
# tests against the shared test vectors in tests/vectors.
#
#   android_harness/runtime/build.sh            # build into android_harness/runtime/build/
#   BUILD_DIR=/tmp/x android_harness/runtime/build.sh
#
# Needs javac (JDK 17+) and JUnit 4 + hamcrest (Debian: apt-get install -y junit4); override the jar
# locations with JUNIT_JAR / HAMCREST_JAR.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD_DIR="${BUILD_DIR:-$HERE/build}"
JUNIT_JAR="${JUNIT_JAR:-/usr/share/java/junit4.jar}"
HAMCREST_JAR="${HAMCREST_JAR:-/usr/share/java/hamcrest-core.jar}"
VECTORS="${THOR_VECTORS:-$HERE/../../tests/vectors}"

for jar in "$JUNIT_JAR" "$HAMCREST_JAR"; do
  if [ ! -f "$jar" ]; then
    echo "missing $jar (apt-get install -y junit4, or set JUNIT_JAR / HAMCREST_JAR)" >&2
    exit 3
  fi
done

rm -rf "$BUILD_DIR/main" "$BUILD_DIR/test"
mkdir -p "$BUILD_DIR/main" "$BUILD_DIR/test"
javac --release 17 -Xlint:all -Werror -d "$BUILD_DIR/main" "$HERE"/src/main/java/dev/thorsdk/runtime/*.java
javac --release 17 -Xlint:all -d "$BUILD_DIR/test" -cp "$BUILD_DIR/main:$JUNIT_JAR" \
  "$HERE"/src/test/java/dev/thorsdk/runtime/*.java
java -Dthor.vectors="$VECTORS" -cp "$BUILD_DIR/main:$BUILD_DIR/test:$JUNIT_JAR:$HAMCREST_JAR" \
  org.junit.runner.JUnitCore dev.thorsdk.runtime.EstimatorTest dev.thorsdk.runtime.PowerTableTest \
  dev.thorsdk.runtime.LayerListTest dev.thorsdk.runtime.TrainingRunTest dev.thorsdk.runtime.LevelTest
