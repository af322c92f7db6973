"""The Android harness's Gradle project, checked as text (no Gradle or Android SDK here): every Java source folder
is in a module's source sets, the app builds on the :runtime module, the ONNX Runtime artifact fits the API the
sources use, and the versions android_harness/README.md states are the ones the build files use."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "android_harness"


def _text(rel):
    return (HARNESS / rel).read_text()


def _modules():
    return re.findall(r"^\s*include\s+'(:[\w-]+)'", _text("settings.gradle"), re.M)


def _source_sets(build_gradle):
    """{source set: [folders]} from ``<set>.java.srcDirs = ['a', 'b']`` lines."""
    out = {}
    for name, dirs in re.findall(r"^\s*(\w+)\.java\.srcDirs\s*=\s*\[([^\]]*)\]", build_gradle, re.M):
        out[name] = re.findall(r"'([^']+)'", dirs)
    return out


def _readme_versions():
    """{first cell: version cell} of the README's versions table."""
    text = _text("README.md")
    table = text.split("## Versions", 1)[1]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 3 and not set(cells[0]) <= {"-"}:
            rows[cells[0]] = cells[1]
    return rows


def _build_versions():
    root = _text("build.gradle")
    app = _text("app/build.gradle")
    runtime = _text("runtime/build.gradle")
    wrapper = _text("gradle/wrapper/gradle-wrapper.properties")

    def one(pattern, text):
        found = re.findall(pattern, text, re.M)
        assert len(found) == 1, (pattern, found)
        return found[0]

    junit = set(re.findall(r"'junit:junit:([\w.]+)'", app + runtime))
    assert len(junit) == 1, junit
    return {
        "agp": one(r"id 'com\.android\.application' version '([\w.]+)'", root),
        "gradle": one(r"^distributionUrl=.*/gradle-([\w.]+)-(?:bin|all)\.zip$", wrapper),
        "compileSdk": one(r"^\s*compileSdk (\d+)", app),
        "targetSdk": one(r"^\s*targetSdk (\d+)", app),
        "minSdk": one(r"^\s*minSdk (\d+)", app),
        "ort": one(r"'(com\.microsoft\.onnxruntime:onnxruntime[\w-]*:[\w.]+)'", app),
        "junit": junit.pop(),
        "runner": one(r"'androidx\.test:runner:([\w.]+)'", app),
        "core": one(r"'androidx\.test:core:([\w.]+)'", app),
        "ext": one(r"'androidx\.test\.ext:junit:([\w.]+)'", app),
    }


def test_every_java_source_folder_is_in_a_modules_source_sets():
    modules = _modules()
    assert set(modules) == {":app", ":runtime"}
    declared = {}
    for mod in modules:
        d = mod.lstrip(":")
        sets = _source_sets(_text(f"{d}/build.gradle"))
        assert sets.get("main") == ["src/main/java"], (mod, sets)
        for name, dirs in sets.items():
            for rel in dirs:
                declared[(d, rel)] = name
                # a declared folder must exist; the androidTest wrapper may be absent from a checkout
                assert (HARNESS / d / rel).is_dir() or name == "androidTest", f"{d}/build.gradle: {rel} is missing"
    # every folder of Java sources that exists is declared by its module (no source the build would skip)
    found = {(p.parents[2].name, str(p.relative_to(p.parents[2]))) for p in HARNESS.glob("*/src/*/java")}
    assert found, "no Java source folders found"
    for key in sorted(found):
        assert key in declared, f"android_harness/{key[0]}/{key[1]} is not in {key[0]}/build.gradle's source sets"
        assert declared[key] == key[1].split("/")[1], key  # src/test/java belongs to the test set, not another
    # and every .java file lies in one of them
    for f in HARNESS.rglob("*.java"):
        rel = f.relative_to(HARNESS)
        if "build" in rel.parts:
            continue
        assert any(rel.is_relative_to(Path(m) / s) for m, s in declared), f"{rel} is outside every source set"
    # the androidTest set, where present, runs under AndroidJUnitRunner with the androidx.test libraries
    app = _text("app/build.gradle")
    assert "androidTest" in _source_sets(app)
    assert "testInstrumentationRunner 'androidx.test.runner.AndroidJUnitRunner'" in app


def test_the_app_builds_on_the_runtime_module_and_the_right_onnx_runtime_artifact():
    app = _text("app/build.gradle")
    assert "implementation project(':runtime')" in app
    assert "../runtime" not in app  # the runtime's sources are compiled once, by :runtime
    assert re.search(r"^\s*id 'java-library'", _text("runtime/build.gradle"), re.M)
    manifest = _text("app/src/main/AndroidManifest.xml")
    instr = re.search(r'android:name="([\w.]+)"', manifest.split("<instrumentation", 1)[1]).group(1)
    assert (HARNESS / "app/src/main/java" / (instr.replace(".", "/") + ".java")).is_file()
    # native-library packaging is the build's (AGP 8 warns about extractNativeLibs in the manifest, AGP 9 fails)
    assert "extractNativeLibs" not in manifest and "useLegacyPackaging = true" in app
    # the training API (OrtTrainingSession) is only in the training artifact; the inference API is in both, and
    # the plain artifact is the one to ship when no source uses training
    sources = "".join(p.read_text() for p in (HARNESS / "app" / "src").rglob("*.java"))
    assert "import ai.onnxruntime.OrtSession;" in sources
    uses_training = "OrtTrainingSession" in sources or "ai.onnxruntime.training" in sources
    artifact = _build_versions()["ort"].rsplit(":", 1)[0]
    assert artifact == ("com.microsoft.onnxruntime:onnxruntime-training-android" if uses_training
                        else "com.microsoft.onnxruntime:onnxruntime-android")


def test_the_readme_states_the_versions_the_build_files_use():
    v = _build_versions()
    rows = _readme_versions()
    assert rows["Android Gradle Plugin"] == v["agp"]
    assert rows["Gradle (wrapper)"] == v["gradle"]
    assert rows["compileSdk / targetSdk"] == f"{v['compileSdk']} / {v['targetSdk']}"
    assert rows["minSdk"] == v["minSdk"]
    assert rows["ONNX Runtime Android"] == f"`{v['ort']}`"
    assert rows["JUnit (unit tests)"] == v["junit"]
    assert rows["androidx.test"] == f"runner {v['runner']}, core {v['core']}, ext.junit {v['ext']}"
    # every place that tells the user which Gradle to make the wrapper with says the wrapper's version
    for text in (_text("README.md"), _text("gradle/wrapper/gradle-wrapper.properties"), _text("app/build.gradle"),
                 (ROOT / "docs" / "devices.md").read_text()):
        said = re.findall(r"gradle wrapper --gradle-version ([\w.]+)", text)
        assert said and set(said) == {v["gradle"]}, said
    # the SDK platform the README tells the user to install is the compileSdk
    assert set(re.findall(r"platforms;android-(\d+)", _text("README.md"))) == {v["compileSdk"]}


def test_no_wrapper_binary_is_committed():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(["git", "ls-files", "android_harness"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    assert "android_harness/gradle/wrapper/gradle-wrapper.properties" in tracked
    assert not [t for t in tracked if t.endswith(".jar") or t.endswith("/gradlew") or t.endswith("gradlew.bat")]
    assert "gradle/wrapper/gradle-wrapper.jar" in _text(".gitignore")


@pytest.mark.skipif(shutil.which("groovy") is None or shutil.which("java") is None,
                    reason="no groovy (Debian: apt-get install -y groovy)")
def test_the_gradle_scripts_parse_as_groovy(tmp_path):
    """Syntax only (Gradle's DSL is Groovy; Gradle itself does not run here): a missing brace or quote fails."""
    import os

    script = tmp_path / "parse.groovy"
    script.write_text("def shell = new GroovyShell()\nargs.each { shell.parse(new File(it)); println \"parsed $it\" }\n")
    java_home = Path(os.path.realpath(shutil.which("java"))).parents[1]
    files = [str(HARNESS / f) for f in ("settings.gradle", "build.gradle", "app/build.gradle", "runtime/build.gradle")]
    bad = tmp_path / "bad.gradle"
    bad.write_text(_text("app/build.gradle").replace("testOptions {", "testOptions {{", 1))
    env = dict(os.environ, JAVA_HOME=str(java_home))
    p = subprocess.run(["groovy", str(script), *files], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0 and p.stdout.count("parsed ") == len(files), p.stdout + p.stderr
    p = subprocess.run(["groovy", str(script), str(bad)], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode != 0 and "bad.gradle" in p.stderr
