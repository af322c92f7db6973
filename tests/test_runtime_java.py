"""The Java runtime (android_harness/runtime: estimator, layer lists, training runs, power-table select):
compile it and run its JUnit 4 tests, which reproduce the shared vectors in tests/vectors. Skips where javac or
JUnit 4 is missing (Debian: ``apt-get install -y junit4``)."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "android_harness" / "runtime" / "build.sh"
JUNIT = Path(os.environ.get("JUNIT_JAR", "/usr/share/java/junit4.jar"))
HAMCREST = Path(os.environ.get("HAMCREST_JAR", "/usr/share/java/hamcrest-core.jar"))


@pytest.mark.skipif(shutil.which("javac") is None or shutil.which("java") is None, reason="no JDK (javac)")
@pytest.mark.skipif(not (JUNIT.is_file() and HAMCREST.is_file()), reason="no JUnit 4 (apt-get install -y junit4)")
def test_java_runtime_junit(tmp_path):
    env = dict(os.environ, BUILD_DIR=str(tmp_path / "build"), JUNIT_JAR=str(JUNIT), HAMCREST_JAR=str(HAMCREST),
               THOR_VECTORS=str(ROOT / "tests" / "vectors"))
    proc = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, env=env, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "OK (" in proc.stdout and "FAILURES" not in proc.stdout, out[-4000:]
    # PowerTableTest ran and went through every power-table vector
    vec = json.loads((ROOT / "tests" / "vectors" / "table_select.json").read_text())
    answers = [q for c in vec["cases"] for q in c["queries"]] + vec["malformed"]
    m = re.search(r"PowerTableTest: (\d+) selections, (\d+) infeasible, (\d+) usage errors, (\d+) format errors",
                  proc.stdout)
    assert m, out[-4000:]
    got = dict(zip(["result", "infeasible", "usage", "format"], map(int, m.groups())))
    want = {k: sum(1 for q in answers if q.get("error", "result") == k) for k in got}
    assert got == want
    # LevelTest ran and went through every device-level vector and every estimate at a level
    lvec = json.loads((ROOT / "tests" / "vectors" / "levels.json").read_text())
    m = re.search(r"LevelTest: (\d+) device levels, (\d+) refused", proc.stdout)
    assert m, out[-4000:]
    assert int(m.group(1)) == len(lvec["device_level"])
    assert int(m.group(2)) == sum("error" in q for q in lvec["device_level"])
    m = re.search(r"LevelTest: (\d+) estimates at a level", proc.stdout)
    assert m, out[-4000:]
    assert int(m.group(1)) == sum("expected" in q for q in lvec["at_level"])
    # TrainingRunTest ran and went through every training-run vector and the whole quantile table
    tvec = json.loads((ROOT / "tests" / "vectors" / "training_runs.json").read_text())
    m = re.search(r"TrainingRunTest: (\d+) runs, (\d+) usage errors, (\d+) not-found errors", proc.stdout)
    assert m, out[-4000:]
    assert tuple(map(int, m.groups())) == (len(tvec["cases"]), sum(q["error"] == "usage" for q in tvec["errors"]),
                                           sum(q["error"] == "not_found" for q in tvec["errors"]))
    m = re.search(r"TrainingRunTest: (\d+) quantiles, (\d+) ppnd16 points", proc.stdout)
    assert m and tuple(map(int, m.groups())) == (len(tvec["quantiles"]), len(tvec["ppnd16"])), out[-4000:]
