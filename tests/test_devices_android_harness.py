"""The Android harness app's pure-Java parts (protocol, battery power, bundle checks, results) compiled with
the JDK and run under JUnit 4. The Android-only classes (instrumentation, BatteryManager, ONNX Runtime) need
the Android SDK and are not compiled here. Skips where javac or JUnit 4 is missing."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "android_harness" / "build.sh"
JUNIT = os.environ.get("JUNIT_JAR", "/usr/share/java/junit4.jar")


@pytest.mark.skipif(shutil.which("javac") is None or shutil.which("java") is None, reason="no JDK (javac)")
@pytest.mark.skipif(not os.path.exists(JUNIT), reason="JUnit 4 not installed (apt-get install junit4)")
def test_android_harness_junit(tmp_path):
    out = tmp_path / "results.json"
    p = subprocess.run(["bash", str(BUILD)], env=dict(os.environ, BUILD_DIR=str(tmp_path / "build"),
                                                      RESULTS_OUT=str(out),
                                                      THOR_VECTORS=str(ROOT / "tests" / "vectors")),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "OK (" in p.stdout
    # ProtocolVectorsTest ran every shared protocol vector (docs/protocol.md), and a fixed part order, the stop
    # rule on the other metric and an idle baseline per probe each failed the vectors they concern
    vectors = sorted((ROOT / "tests" / "vectors").glob("protocol_*.json"))
    m = re.search(r"ProtocolVectorsTest: (\d+) vectors, (\d+) probes passed; fixed order failed (\d+), "
                  r"wrong stop metric failed (\d+), idle per probe failed (\d+)", p.stdout)
    assert m, p.stdout[-3000:]
    assert tuple(map(int, m.groups())) == (len(vectors), sum(len(json.loads(v.read_text())["expected"])
                                                             for v in vectors), len(vectors), 2, 1)
    # what the app writes passes the same checks as any harness's results
    from thor_sdk.harness.results import validate_results_doc

    doc = validate_results_doc(json.loads(out.read_text()))
    assert doc["harness"] == "android" and doc["parts"]["head"]["windows"][0]["t_end_s"] > 0


def test_android_only_sources_are_kept_apart():
    """The JDK build compiles only dev.thorsdk.harness; Android/ORT imports live in .android only."""
    base = ROOT / "android_harness" / "app" / "src" / "main" / "java" / "dev" / "thorsdk" / "harness"
    for f in base.glob("*.java"):
        text = f.read_text()
        assert "import android." not in text and "import ai.onnxruntime" not in text, f.name
    assert (base / "android" / "HarnessInstrumentation.java").exists()
