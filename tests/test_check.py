"""`thor-sdk check` (build-time budgets): verdicts and exit codes, input errors (exit 2, one line, nothing
written), the JUnit report, over-budget explanations, run arithmetic, a cold 150-layer check without torch,
the budgets file under arbitrary values, and the Gradle and Xcode build scripts' commands."""

import contextlib
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from statistics import NormalDist

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thor_sdk
from thor_sdk.errors import FormatError, ThorError, UsageError
from thor_sdk.runtime import load_estimator

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "check"
ENERGY = EXAMPLE / "synthetic-phone-energy.json"
TIME = EXAMPLE / "synthetic-phone-time.json"
LAYERS = EXAMPLE / "example_cnn.layers.json"
PASS_TOML = EXAMPLE / "budgets-pass.toml"
FAIL_TOML = EXAMPLE / "budgets-fail.toml"
THOR = [sys.executable, "-m", "thor_sdk.cli.main"]
RUN = ["--batch-size", "16", "--samples", "5000", "--epochs", "3"]


def cli(*args):
    """``thor-sdk check ARGS`` in this process: (exit code, stdout, stderr)."""
    from thor_sdk.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(["check", *map(str, args)])
            code = 0
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


def statuses(out):
    """The status word of each result line (explanation lines are indented)."""
    return [line.split()[0] for line in out.splitlines() if line and not line.startswith(" ")]


def assert_input_error(code, out, err, *paths):
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    assert "Traceback" not in err and out == ""
    for p in paths:
        assert not Path(p).exists(), f"{p} was written"
        assert not [f for f in os.listdir(Path(p).parent) if ".tmp" in f], "temporary file left"
    return lines[0]


def run_of(estimator, batch, samples, epochs, confidence=0.95, layers=LAYERS):
    from thor_sdk.layers import layers_of
    from thor_sdk.runtime import training_run

    return training_run(load_estimator(estimator), layers_of(str(layers)).layers, batch, samples, epochs, confidence)


# ----------------------------------------------------------------------------- verdicts and exit codes
def test_single_model_pass_and_fail_lines():
    run = run_of(ENERGY, 16, 5000, 3)
    code, out, err = cli("--estimator", ENERGY, "--model", LAYERS, *RUN, "--budget-j", 900)
    assert code == 0 and err == ""
    line = out.strip().splitlines()
    assert len(line) == 1
    assert line[0].startswith("PASS  example_cnn: 3 epochs x 313 steps = ")
    assert "(95% upper bound " in line[0] and "<= budget 900 J" in line[0]
    assert line[0].endswith("[synthetic-phone / onnxruntime]")
    tight = run["run"]["mean"]  # below the upper bound: over budget
    code, out, _ = cli("--estimator", ENERGY, "--model", LAYERS, *RUN, "--budget-j", tight)
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("FAIL  example_cnn: 3 epochs x 313 steps = ") and "> budget" in lines[0]
    assert "[synthetic-phone / onnxruntime]" in lines[0]
    assert len(lines) > 2 and all(l.startswith("      ") for l in lines[1:])
    assert "costliest layers" in lines[1]


def test_budget_files_pass_and_fail():
    code, out, _ = cli("--budgets", PASS_TOML)
    assert code == 0 and statuses(out) == ["PASS", "PASS", "PASS", "INFO"]
    code, out, _ = cli("--budgets", FAIL_TOML)
    assert code == 1 and statuses(out) == ["FAIL", "INFO", "FAIL", "INFO", "PASS", "INFO"]


def test_time_always_energy_where_given_and_json():
    code, out, _ = cli("--estimator", ENERGY, "--estimator", TIME, "--model", LAYERS, *RUN, "--budget-j", 900,
                       "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["format"] == "thor-sdk/check" and doc["passed"] is True and doc["exit_code"] == 0
    assert [(r["metric"], r["status"]) for r in doc["results"]] == [("energy", "pass"), ("time", "info")]
    for r in doc["results"]:
        assert r["device"] == "synthetic-phone" and r["runtime"] == "onnxruntime"
        assert r["steps"] == 939 and r["last_batch"] == 8 and r["upper"] == r["run"]["upper"]
    assert doc["results"][1]["budget"] is None and doc["results"][1]["passed"] is None
    code, out, _ = cli("--estimator", TIME, "--model", LAYERS, *RUN, "--budget-s", 1000)
    assert code == 0 and statuses(out) == ["PASS"] and "<= budget 1000 s" in out  # a time estimator alone: time only


def test_per_step_and_epoch_budgets():
    run = run_of(TIME, 16, 5000, 3)
    for per in ("step", "epoch", "run"):
        upper = run[per]["upper"]
        assert cli("--estimator", TIME, "--model", LAYERS, *RUN, "--budget-s", upper * 1.001, "--per", per)[0] == 0
        code, out, _ = cli("--estimator", TIME, "--model", LAYERS, *RUN, "--budget-s", upper * 0.999, "--per", per)
        assert code == 1
        assert {"step": "1 step at batch 16", "epoch": "1 epoch x 313 steps", "run": "3 epochs x 313 steps"}[per] \
            in out


def test_python_api_is_callable_and_light():
    code = ("import sys, thor_sdk\n"
            f"r = thor_sdk.check({str(LAYERS)!r}, {str(ENERGY)!r}, batch_size=16, samples=5000, epochs=3, budget_j=900)\n"
            f"r2 = thor_sdk.check(budgets={str(FAIL_TOML)!r})\n"
            "import thor_sdk.check as pkg\n"
            "print(r.passed, r.exit_code, r2.exit_code, len(r2.failures), callable(pkg),"
            " any(m in sys.modules for m in ('torch', 'numpy', 'sklearn')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "0", "1", "2", "True", "False"]
    r = thor_sdk.check(str(LAYERS), [str(ENERGY), str(TIME)], batch_size=16, budget_s=1.0, per="step")
    assert [x.metric for x in r.results] == ["time", "energy"] and r.results[0].passed is True


# ----------------------------------------------------------------------------- input errors: exit 2
def _broken_estimator(tmp_path, **change):
    doc = json.loads(TIME.read_text())
    for k, v in change.items():
        doc[k] = v
    p = tmp_path / "est.json"
    p.write_text(json.dumps(doc))
    return p


@pytest.mark.parametrize("case", ["not_json", "not_estimator", "missing", "bad_version", "bad_kinds"])
def test_bad_estimator_exits_2(tmp_path, case):
    junit = tmp_path / "out" / "report.xml"
    junit.parent.mkdir()
    est = {"not_json": lambda: (tmp_path / "e.json").write_text("{not json") and tmp_path / "e.json",
           "not_estimator": lambda: (tmp_path / "e.json").write_text('{"format": "x"}') and tmp_path / "e.json",
           "missing": lambda: tmp_path / "nope.json",
           "bad_version": lambda: _broken_estimator(tmp_path, version=9),
           "bad_kinds": lambda: _broken_estimator(tmp_path, kinds={"conv2d": {"features": "x"}})}[case]()
    assert_input_error(*cli("--estimator", est, "--model", LAYERS, *RUN, "--budget-s", 10, "--junit", junit), junit)


BAD_TOMLS = {
    "syntax": "models = [\n",
    "no_models": "version = 1\n",
    "unknown_key": '[[models]]\nmodel = "M"\nbatch_size = 16\nbudget_J = 5.0\n',
    "no_budget": '[[models]]\nmodel = "M"\nbatch_size = 16\n',
    "string_budget": '[[models]]\nmodel = "M"\nbatch_size = 16\nbudget_j = "900"\n',
    "float_batch": '[[models]]\nmodel = "M"\nbatch_size = 16.0\nbudget_j = 900\n',
    "nan_budget": '[[models]]\nmodel = "M"\nbatch_size = 16\nbudget_j = nan\n',
    "nan_confidence": 'confidence = nan\n[[models]]\nmodel = "M"\nbatch_size = 16\nbudget_j = 9\n',
    "bad_per": '[[models]]\nmodel = "M"\nbatch_size = 16\nbudget_j = 9\nper = "day"\n',
    "unknown_model": '[[models]]\nmodel = "no_such_net"\nbatch_size = 16\nbudget_j = 9\n',
    "missing_model_file": '[[models]]\nmodel = "nope/layers.json"\nbatch_size = 16\nbudget_j = 9\n',
    "joules_without_energy": '[[models]]\nmodel = "M"\nbatch_size = 16\nbudget_j = 9\n',
    "two_time_estimators": '[[models]]\nmodel = "M"\nbatch_size = 16\nbudget_s = 9\n',
    "not_utf8": None,
}


@pytest.mark.parametrize("case", sorted(BAD_TOMLS))
def test_bad_budgets_file_exits_2(tmp_path, case):
    toml = tmp_path / "budgets.toml"
    if BAD_TOMLS[case] is None:
        toml.write_bytes(b'[[models]]\nmodel = "\xff\xfe"\n')
    else:
        toml.write_text(BAD_TOMLS[case].replace('"M"', json.dumps(str(LAYERS))))
    ests = {"joules_without_energy": [TIME], "two_time_estimators": [TIME, TIME]}.get(case, [ENERGY, TIME])
    junit = tmp_path / "report.xml"
    args = [a for e in ests for a in ("--estimator", e)]
    err = assert_input_error(*cli("--budgets", toml, *args, "--junit", junit), junit)
    if case == "joules_without_energy":
        assert "energy estimator" in err
    if case == "unknown_key":
        assert "budget_J" in err
    if case == "no_budget":
        assert "has no budget: give budget_j (joules) and/or budget_s (seconds)" in err


def test_bad_model_and_arguments_exit_2(tmp_path):
    junit = tmp_path / "r.xml"
    bad_py = tmp_path / "net.py"
    bad_py.write_text("raise RuntimeError('boom')\n")
    for args in (["--model", "no_such_net", *RUN, "--budget-s", 9],
                 ["--model", tmp_path / "nope.json", *RUN, "--budget-s", 9],
                 ["--model", f"{bad_py}:Net", "--input-shape", "3", *RUN, "--budget-s", 9],
                 ["--model", LAYERS, *RUN],  # no budget
                 ["--model", LAYERS, "--budget-s", 9],  # no batch size
                 ["--model", LAYERS, *RUN, "--budget-s", "nan"],
                 ["--model", LAYERS, *RUN, "--budget-s", "-1"],
                 ["--model", LAYERS, *RUN, "--budget-s", 9, "--confidence", 1.0],
                 ["--model", LAYERS, "--batch-size", 0, "--budget-s", 9],
                 ["--budgets", PASS_TOML, "--model", LAYERS]):
        assert_input_error(*cli("--estimator", TIME, *args, "--junit", junit), junit)
    other = _broken_estimator(tmp_path, runtime="torch", metric="energy", unit="J")
    line = assert_input_error(*cli("--estimator", TIME, "--estimator", other, "--model", LAYERS, *RUN,
                                   "--budget-s", 9, "--junit", junit), junit)
    assert "runtimes" in line
    other = _broken_estimator(tmp_path, device={"name": "pixel8"}, metric="energy", unit="J")
    assert "devices" in assert_input_error(*cli("--estimator", TIME, "--estimator", other, "--model", LAYERS, *RUN,
                                                "--budget-s", 9), junit)
    code, _, err = cli("--estimator", TIME, "--model", LAYERS, *RUN, "--budget-s", 9, "--junit", tmp_path / "no" / "r.xml")
    assert code == 2 and err.startswith("Error: cannot write --junit report") and "no such folder" in err


# ----------------------------------------------------------------------------- JUnit report
ISO = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}$")


def assert_junit_schema(root):
    """The rules of Windy Road's JUnit.xsd (Apache Ant's report; stricter than Jenkins' junit-10.xsd)."""
    assert root.tag == "testsuites" and not root.attrib
    suites = list(root)
    assert suites and all(s.tag == "testsuite" for s in suites)
    for i, s in enumerate(suites):
        for a in ("package", "id", "name", "timestamp", "hostname", "tests", "failures", "errors", "time"):
            assert s.get(a), a
        assert int(s.get("id")) == i and ISO.match(s.get("timestamp"))
        float(s.get("time"))
        tags = [c.tag for c in s]
        assert tags[0] == "properties" and tags[-2:] == ["system-out", "system-err"]
        assert set(tags[1:-2]) <= {"testcase"}
        for p in s.find("properties"):
            assert p.tag == "property" and p.get("name").strip() and p.get("value") is not None
        cases = s.findall("testcase")
        assert int(s.get("tests")) == len(cases)
        assert int(s.get("failures")) == sum(len(c.findall("failure")) for c in cases)
        for c in cases:
            assert c.get("name") and c.get("classname") and float(c.get("time")) >= 0
            assert len(list(c)) <= 1 and all(k.tag in ("failure", "error", "skipped") for k in c)
            for k in c:
                assert k.get("type")


def test_junit_report_structure(tmp_path):
    junit = tmp_path / "thor-check.xml"
    junit.write_text("old report")
    code, out, _ = cli("--budgets", FAIL_TOML, "--junit", junit)
    assert code == 1
    root = ET.parse(junit).getroot()
    assert_junit_schema(root)
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == 3  # a testcase per model and budget (time estimates without a budget are not cases)
    failures = [c for c in cases if c.find("failure") is not None]
    assert len(failures) == 2 == int(suite.get("failures"))
    report = thor_sdk.check(budgets=str(FAIL_TOML))
    for case, r in zip(failures, report.failures):
        msg = case.find("failure").get("message")
        assert r.model in msg and "upper bound" in msg and "> budget" in msg and "synthetic-phone / onnxruntime" in msg
        assert "costliest layers" in case.find("failure").text
    assert "PASS" in suite.find("system-out").text
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["device"] == "synthetic-phone" and props["runtime"] == "onnxruntime"
    assert sorted(os.listdir(tmp_path)) == ["thor-check.xml"]
    assert cli("--budgets", PASS_TOML, "--junit", junit)[0] == 0
    root = ET.parse(junit).getroot()
    assert_junit_schema(root)
    assert root.find("testsuite").get("failures") == "0" and not list(root.iter("failure"))


JUNIT_XSD = Path(__file__).parent / "fixtures" / "junit" / "junit-10.xsd"


def test_junit_report_validates_against_the_common_junit_schema(tmp_path):
    """Jenkins' junit-10.xsd (the file pytest validates its own --junitxml against), through xmlschema:
    the over-budget report (one <failure> per over-budget model and budget) and the passing one."""
    xmlschema = pytest.importorskip("xmlschema")
    schema = xmlschema.XMLSchema(str(JUNIT_XSD))
    junit = tmp_path / "thor-check.xml"
    assert cli("--budgets", FAIL_TOML, "--junit", junit)[0] == 1
    schema.validate(str(junit))
    report = thor_sdk.check(budgets=str(FAIL_TOML))
    assert len(ET.parse(junit).getroot().findall("testsuite/testcase/failure")) == len(report.failures) == 2
    assert cli("--budgets", PASS_TOML, "--junit", junit)[0] == 0
    schema.validate(str(junit))
    # the schema rejects what it should (so the checks above can fail): an attribute it does not know
    bad = junit.read_text().replace("<testsuite ", "<testsuite bogus=\"1\" ", 1)
    assert not schema.is_valid(bad)


def test_junit_text_is_valid_for_hostile_names(tmp_path):
    """Control characters, markup and runs of spaces in model names or warnings still give a valid file."""
    xmlschema = pytest.importorskip("xmlschema")
    from thor_sdk.check import junit

    schema = xmlschema.XMLSchema(str(JUNIT_XSD))
    report = thor_sdk.check(budgets=str(FAIL_TOML))
    for r in report.results:
        r.model = "a\x00b <c> & \"d\"\x1f   e\n"
    report.warnings.append("bell \x07 and ]]> end")
    schema.validate(junit.junit_xml(report))


def test_junit_write_is_atomic(tmp_path, monkeypatch):
    from thor_sdk.check import junit
    from thor_sdk.store import files

    path = tmp_path / "r.xml"
    path.write_text("previous")
    report = thor_sdk.check(budgets=str(FAIL_TOML))

    def broken(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", broken)
    with pytest.raises(ThorError, match="No space left"):
        junit.write_junit(report, path)
    assert path.read_text() == "previous" and os.listdir(tmp_path) == ["r.xml"]
    monkeypatch.undo()
    junit.write_junit(report, path)
    assert ET.parse(path).getroot().tag == "testsuites" and os.listdir(tmp_path) == ["r.xml"]


def test_junit_escapes_odd_names(tmp_path):
    toml = tmp_path / "b.toml"
    toml.write_text(f'estimators = [{json.dumps(str(TIME))}]\n[[models]]\nname = "a <b> & \\"c\\"\\u0001"\n'
                    f'model = {json.dumps(str(LAYERS))}\nbatch_size = 16\nbudget_s = 1e-9\n')
    junit = tmp_path / "r.xml"
    assert cli("--budgets", toml, "--junit", junit)[0] == 1
    assert_junit_schema(ET.parse(junit).getroot())


# ----------------------------------------------------------------------------- over budget: what to change
def test_explanation_names_costliest_layers_and_what_fits():
    est = load_estimator(ENERGY)
    from thor_sdk.layers import layers_of

    layers = layers_of(str(LAYERS)).layers
    step = est.estimate(layers, 16)
    want = sorted(step["layers"], key=lambda l: -l["mean"])[:3]
    budget = 0.8 * run_of(ENERGY, 16, 5000, 3)["run"]["upper"]  # 3 epochs over, fewer fit
    r = thor_sdk.check(str(LAYERS), str(ENERGY), batch_size=16, samples=5000, epochs=3, budget_j=budget).results[0]
    assert r.status == "fail" and r.explanation is not None
    ex = r.explanation
    assert [t["name"] for t in ex.costliest_layers] == [l["name"] for l in want]
    assert all(t["name"] in ex.lines[0] for t in ex.costliest_layers)
    assert ex.epochs is not None
    e = ex.epochs["epochs"]
    again = thor_sdk.check(str(LAYERS), str(ENERGY), batch_size=16, samples=5000, epochs=e, budget_j=budget)
    assert again.passed and again.results[0].upper == pytest.approx(ex.epochs["upper"], rel=1e-12)
    assert not thor_sdk.check(str(LAYERS), str(ENERGY), batch_size=16, samples=5000, epochs=e + 1,
                              budget_j=budget).passed
    assert any(f"epochs that fit at batch 16: {e}" in l for l in ex.lines)

    # per step: the largest batch that fits, re-checked, and every larger one below 16 does not
    budget = 0.8 * run_of(ENERGY, 16, None, 1)["step"]["upper"]
    r = thor_sdk.check(str(LAYERS), str(ENERGY), batch_size=16, budget_j=budget, per="step").results[0]
    fit = r.explanation.largest_batch_size
    assert r.status == "fail" and fit is not None and r.explanation.batch_search == "exhaustive"
    b = fit["batch_size"]
    assert thor_sdk.check(str(LAYERS), str(ENERGY), batch_size=b, budget_j=budget, per="step").passed
    for bigger in range(b + 1, 16):
        assert not thor_sdk.check(str(LAYERS), str(ENERGY), batch_size=bigger, budget_j=budget, per="step").passed
    assert any(f"largest batch size that fits: {b}" in l for l in r.explanation.lines)
    assert any("epochs does not change" in l for l in r.explanation.lines)


def test_explanation_when_nothing_fits():
    r = thor_sdk.check(str(LAYERS), str(ENERGY), batch_size=16, samples=5000, epochs=3, budget_j=1e-3).results[0]
    ex = r.explanation
    assert ex.nothing_fits and ex.largest_batch_size is None and ex.epochs is None
    assert any("no batch size below 16 fits" in l for l in ex.lines)
    assert any("not even 1 epoch fits" in l for l in ex.lines)
    assert ex.lines[-1].startswith("nothing fits")
    one = thor_sdk.check(str(LAYERS), str(ENERGY), batch_size=1, budget_j=1e-9, per="step").results[0]
    assert any("batch size 1 cannot be made smaller" in l for l in one.explanation.lines)


def test_large_batch_search_bisects_and_fits():
    budget = 0.5 * run_of(TIME, 1000, None, 1)["step"]["upper"]
    r = thor_sdk.check(str(LAYERS), str(TIME), batch_size=1000, budget_s=budget, per="step").results[0]
    fit = r.explanation.largest_batch_size
    assert r.explanation.batch_search == "bisection" and fit is not None
    assert thor_sdk.check(str(LAYERS), str(TIME), batch_size=fit["batch_size"], budget_s=budget, per="step").passed
    assert r.explanation.batch_sizes_tried < 200


# ----------------------------------------------------------------------------- run arithmetic
@pytest.mark.parametrize("samples,steps_per_epoch,last", [(5000, 313, 8), (4992, 312, 0), (10, 1, 10), (None, 1, 0)])
def test_epochs_and_partial_last_batch(samples, steps_per_epoch, last):
    est = load_estimator(TIME)
    from thor_sdk.layers import layers_of

    layers = layers_of(str(LAYERS)).layers
    r = thor_sdk.check(str(LAYERS), str(TIME), batch_size=16, samples=samples, epochs=3, budget_s=100,
                       confidence=0.9).results[0]
    assert (r.steps_per_epoch, r.last_batch, r.steps) == (steps_per_epoch, last, 3 * steps_per_epoch)
    s = 16 if samples is None else samples
    full, rest = divmod(s, 16)
    steps = [est.estimate(layers, 16)["total"]] * full + ([est.estimate(layers, rest)["total"]] if rest else [])
    mean = 3 * sum(x["mean"] for x in steps)
    std = 3 * sum(x["std"] for x in steps)  # model error shared by every step: stds add
    z = NormalDist().inv_cdf(0.9)
    assert r.run["mean"] == pytest.approx(mean, rel=1e-12) and r.run["std"] == pytest.approx(std, rel=1e-12)
    assert r.upper == pytest.approx(mean + z * std, rel=1e-12) and r.per == "run"
    assert r.passed == (r.upper <= 100)


# ----------------------------------------------------------------------------- a cold 150-layer check
def test_150_layer_list_cold_process_without_torch(tmp_path):
    """A cold check of a layer list imports no torch, numpy or scikit-learn (its wall time, < 1 s, is
    measured in bench/bench_check.py, not asserted here)."""
    doc = json.loads(LAYERS.read_text())
    body, head = doc["layers"][:-1], doc["layers"][-1]
    layers = [dict(body[i % len(body)], name=f"l{i}", role="input" if i == 0 else "hidden") for i in range(149)]
    big = tmp_path / "big150.json"
    big.write_text(json.dumps(dict(doc, name="big150", layers=[*layers, head])))
    junit = tmp_path / "r.xml"
    code = ("import sys\nfrom thor_sdk.cli.main import main\n"
            "try:\n"
            f"    main(['check', '--estimator', {str(ENERGY)!r}, '--estimator', {str(TIME)!r}, '--model', {str(big)!r},"
            " '--batch-size', '16', '--samples', '5000', '--epochs', '3', '--budget-j', sys.argv[1], '--budget-s', '1000',"
            f" '--junit', {str(junit)!r}])\n"
            "except SystemExit as e:\n"
            "    print('exit', e.code, sorted(m for m in ('torch', 'numpy', 'sklearn', 'onnx') if m in sys.modules),"
            " file=sys.stderr)\n")
    for budget, want in (("1000", 0), ("1", 1)):  # within; over (the explanation searches batch sizes)
        p = subprocess.run([sys.executable, "-c", code, budget], capture_output=True, text=True, timeout=60)
        assert p.stderr.strip().splitlines()[-1] == f"exit {want} []", p.stderr
        assert "big150: 3 epochs x 313 steps" in p.stdout


# ----------------------------------------------------------------------------- the budgets file, any values
_INT_BAD = st.one_of(st.integers(max_value=0), st.integers(min_value=10 ** 13, max_value=2 ** 63 - 1),
                     st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.text(max_size=5))
_NUM_BAD = st.one_of(st.floats(max_value=0.0), st.just(math.nan), st.just(math.inf), st.just(-math.inf),
                     st.floats(min_value=1.0000001e15), st.integers(max_value=0), st.integers(min_value=10 ** 16,
                                                                                              max_value=2 ** 63 - 1),
                     st.booleans(), st.text(max_size=5), st.lists(st.integers(), max_size=2))
_BAD = {"batch_size": st.one_of(_INT_BAD, st.integers(min_value=10 ** 9 + 1, max_value=2 ** 63 - 1)),
        "samples": st.one_of(_INT_BAD), "epochs": st.one_of(_INT_BAD, st.integers(min_value=10 ** 6 + 1,
                                                                                     max_value=2 ** 40)),
        "budget_j": _NUM_BAD, "budget_s": _NUM_BAD,
        "confidence": st.one_of(st.floats(max_value=0.4999), st.floats(min_value=0.99991), st.just(math.nan),
                                st.booleans(), st.text(max_size=3)),
        "per": st.one_of(st.text(max_size=6).filter(lambda s: s not in ("step", "epoch", "run")), st.integers())}


def _toml(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    return "[" + ", ".join(_toml(x) for x in v) + "]"


def _budgets_text(**fields):
    model = {"model": str(LAYERS), "batch_size": 16, "samples": 5000, "epochs": 3, "budget_j": 30.0, "budget_s": 20.0}
    model.update(fields)
    lines = [f"estimators = [{_toml(str(ENERGY))}, {_toml(str(TIME))}]", "[[models]]"]
    return "\n".join(lines + [f"{k} = {_toml(v)}" for k, v in model.items()]) + "\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), field=st.sampled_from(sorted(_BAD)))
def test_budgets_file_bad_values_exit_2_nothing_written(tmp_path, data, field):
    value = data.draw(_BAD[field], label=field)
    toml = tmp_path / "b.toml"
    toml.write_text(_budgets_text(**{field: value}))
    junit = tmp_path / "r.xml"
    assert_input_error(*cli("--budgets", toml, "--junit", junit), junit)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(budget_j=st.floats(min_value=1e-6, max_value=1e15), batch=st.integers(1, 64),
       samples=st.integers(1, 4000), epochs=st.integers(1, 5), per=st.sampled_from(["step", "epoch", "run"]),
       confidence=st.floats(min_value=0.5, max_value=0.9999))
def test_budgets_file_valid_values_verdict(tmp_path, budget_j, batch, samples, epochs, per, confidence):
    toml = tmp_path / "b.toml"
    toml.write_text(_budgets_text(budget_j=budget_j, batch_size=batch, samples=samples, epochs=epochs, per=per,
                                  confidence=confidence).replace("budget_s = 20.0\n", ""))
    junit = tmp_path / "r.xml"
    code, out, err = cli("--budgets", toml, "--junit", junit, "--json")
    doc = json.loads(out)
    energy = doc["results"][0]
    assert energy["metric"] == "energy" and energy["per"] == per
    assert code == doc["exit_code"] == (0 if energy["upper"] <= budget_j else 1)
    assert energy["upper"] == run_of(ENERGY, batch, samples, epochs, confidence)[per]["upper"]
    assert_junit_schema(ET.parse(junit).getroot())


def test_budgets_paths_are_relative_to_the_file(tmp_path):
    d = tmp_path / "app" / "budgets"
    (d / "est").mkdir(parents=True)
    shutil.copy(TIME, d / "est" / "time.json")
    shutil.copy(LAYERS, d / "model.json")
    (d / "b.toml").write_text('estimators = "est/time.json"\n[[models]]\nmodel = "model.json"\nbatch_size = 8\n'
                              'budget_s = 100\n')
    p = subprocess.run([*THOR, "check", "--budgets", "app/budgets/b.toml"], cwd=tmp_path, capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("PASS  example_cnn: 1 epoch x 1 step = ")


def test_budgets_file_with_a_python_model(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "net.py").write_text("from torch import nn\n"
                                     "class Net(nn.Sequential):\n"
                                     "    def __init__(self):\n"
                                     "        super().__init__(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))\n")
    (tmp_path / "b.toml").write_text(f'estimators = [{json.dumps(str(TIME))}]\n[[models]]\nmodel = "net.py:Net"\n'
                                     'input_shape = [64]\nbatch_size = 16\nsamples = 100\nbudget_s = 10\n')
    code, out, err = cli("--budgets", tmp_path / "b.toml")
    assert code == 0, err
    assert out.startswith("PASS  Net: 1 epoch x 7 steps = ")


# ----------------------------------------------------------------------------- the build scripts' commands
def test_gradle_task_command_passes_and_fails(tmp_path):
    gradle = (ROOT / "android_harness" / "gradle" / "thor-check.gradle").read_text()
    assert "commandLine(thorSdk + ['check', '--budgets', thorBudgets, '--junit', thorJunit])" in gradle
    assert "if (rc == 1)" in gradle and "if (rc != 0)" in gradle and "GradleException" in gradle
    # no Gradle here (none runs on this JDK 17): run the task's command line as it builds it
    for toml, want in ((PASS_TOML, 0), (FAIL_TOML, 1)):
        junit = tmp_path / f"{want}" / "thor-check.xml"
        junit.parent.mkdir()  # the task's doFirst
        p = subprocess.run([*THOR, "check", "--budgets", str(toml), "--junit", str(junit)], capture_output=True,
                           text=True)
        assert p.returncode == want, p.stderr
        assert int(ET.parse(junit).getroot().find("testsuite").get("failures")) == (2 if want else 0)


def test_xcode_build_phase_script(tmp_path):
    script = ROOT / "ios_harness" / "scripts" / "thor-check.sh"
    assert "set -euo pipefail" in script.read_text()
    env = dict(os.environ, THOR_SDK=f"{sys.executable} -m thor_sdk.cli.main", SRCROOT=str(tmp_path))
    for toml, want in ((PASS_TOML, 0), (FAIL_TOML, 1)):
        junit = tmp_path / f"r{want}.xml"
        p = subprocess.run(["bash", str(script)], env=dict(env, THOR_BUDGETS=str(toml), THOR_JUNIT=str(junit)),
                           capture_output=True, text=True)
        assert p.returncode == want, p.stdout + p.stderr
        assert junit.exists()
        if want:
            assert p.stdout.count("error: thor-sdk check: example_cnn") == 2 and "over budget" in p.stderr
    # no budgets file at $SRCROOT/thor-budgets.toml: exit 2, the build fails
    p = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert p.returncode == 2 and "error: thor-sdk check: no such budgets file" in p.stdout
    # THOR_ESTIMATORS replaces the file's: a joule budget without an energy estimator is an input error
    p = subprocess.run(["bash", str(script)], env=dict(env, THOR_BUDGETS=str(PASS_TOML), THOR_ESTIMATORS=str(TIME)),
                       capture_output=True, text=True)
    assert p.returncode == 2 and "energy estimator" in p.stdout


def test_example_estimators_are_labelled_synthetic():
    for path in (ENERGY, TIME):
        doc = json.loads(path.read_text())
        assert "SYNTHETIC" in doc["device"]["note"] and "SYNTHETIC" in doc["provenance"]["note"]


def test_library_errors_are_thor_errors():
    with pytest.raises(UsageError, match="energy estimator"):
        thor_sdk.check(str(LAYERS), str(TIME), batch_size=16, budget_j=1)
    with pytest.raises(FormatError):
        thor_sdk.check(budgets=str(ROOT / "README.md"))


def test_schema_and_parser_agree_on_model_keys():
    from thor_sdk.check.budgets import MODEL_KEYS

    schema = json.loads((ROOT / "thor_sdk" / "schemas" / "budgets.schema.json").read_text())
    assert set(schema["$defs"]["model"]["properties"]) == MODEL_KEYS


def _close(a, b, where="$"):
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), where
        for k in a:
            _close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        # the files hold 8 significant digits of a fit whose hyperparameters an optimiser finds: on another CPU (the
        # committed files came from an Intel Xeon, this check also runs on an AMD EPYC) its last digits move, up to
        # 8.5e-8 relative (2026-11-29); anything else the generator changes moves them far more than 1e-6
        assert abs(a - b) <= 1e-6 * max(abs(a), abs(b)) + 1e-300, f"{where}: {a} vs {b}"
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


def test_example_files_are_what_the_generator_makes(tmp_path):
    pytest.importorskip("sklearn")
    subprocess.run([sys.executable, str(EXAMPLE / "make_example.py"), str(tmp_path)], check=True, timeout=300)
    for name in ("synthetic-phone-time.json", "synthetic-phone-energy.json", "example_cnn.layers.json"):
        _close(json.loads((tmp_path / name).read_text()), json.loads((EXAMPLE / name).read_text()), name)
