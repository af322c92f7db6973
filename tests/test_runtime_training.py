"""Training-run estimates of the stdlib runtime (thor_sdk.runtime.training): the shared vectors in
tests/vectors/training_runs.json (and the layer lists they use) are what it answers now, they cover the
promised cases, the math's properties hold, and it needs no numpy."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from statistics import NormalDist

import pytest

from thor_sdk.errors import FormatError, NotFoundError, UsageError
from thor_sdk.runtime import load_estimator, training_run
from thor_sdk.runtime.training import MAX_EPOCHS, MAX_SAMPLES, quantile, steps_per_epoch

ROOT = Path(__file__).resolve().parents[1]
VECTORS = ROOT / "tests" / "vectors"
TRAINING = VECTORS / "training_runs.json"
RTOL = 1e-9
NUMBERS = ("mean", "std", "upper")
EXACT = ("metric", "unit", "device", "runtime", "batch_size", "samples", "epochs", "steps_per_epoch", "last_batch",
         "steps", "confidence")


def close(a, b, rtol=RTOL):
    return abs(a - b) <= rtol * abs(b) + 1e-300


def _vectors():
    return json.loads(TRAINING.read_text(encoding="utf-8"))


def _layers(name):
    return json.loads((VECTORS / name).read_text(encoding="utf-8"))["layers"]


def _make_vectors_module():
    spec = importlib.util.spec_from_file_location("thor_make_vectors", VECTORS / "make_vectors.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _same(a, b, where="$"):
    """``a`` equals ``b``: same structure, keys, strings, integers and booleans; floats to 1e-12 relative
    (another machine's libm may round exp or log1p in the last bit)."""
    assert type(a) is type(b), f"{where}: {a!r} vs {b!r}"
    if isinstance(a, dict):
        assert list(a) == list(b), f"{where}: keys {list(a)} vs {list(b)}"
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), f"{where}: {len(a)} items vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, float):
        assert close(a, b, 1e-12), f"{where}: {a!r} vs {b!r}"
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


def test_training_vectors_are_what_make_vectors_makes_now():
    """The committed training_runs.json and layers_*.json are what make_vectors.py writes today
    (regenerate with ``python tests/vectors/make_vectors.py --training-only`` after changing the runtime
    or the cases); the estimator vectors are untouched by that."""
    files = _make_vectors_module().training_files()
    assert set(files) == {"training_runs.json"} | {p.name for p in VECTORS.glob("layers_*.json")}
    for name, text in files.items():
        committed = (VECTORS / name).read_text(encoding="utf-8")
        if committed != text:  # byte-identical here; elsewhere the last bit of a float may differ
            _same(json.loads(committed), json.loads(text), name)


def _answer(q):
    est = load_estimator(VECTORS / q["estimator"])
    layers = _layers(q["layers"])
    try:
        if q["samples"] is None:
            return training_run(est, layers, q["batch_size"])
        return training_run(est, layers, q["batch_size"], samples=q["samples"], epochs=q["epochs"],
                            confidence=q["confidence"])
    except NotFoundError:
        return "not_found"
    except FormatError:
        return "format"
    except UsageError:
        return "usage"


def test_training_vectors_reproduced_by_the_python_runtime():
    vec = _vectors()
    for q in vec["cases"]:
        got, exp = _answer(q), q["expected"]
        assert isinstance(got, dict), (q["what"], got)
        for key in EXACT:
            assert got[key] == exp[key], (q["what"], key, got[key], exp[key])
        assert close(got["z"], exp["z"], 1e-15)
        for part in ("step", "epoch", "run"):
            for key in NUMBERS:
                assert close(got[part][key], exp[part][key]), (q["what"], part, key)
    for q in vec["errors"]:
        assert _answer(q) == q["error"], q


def test_training_vectors_cover_the_promised_cases():
    vec = _vectors()
    cases = vec["cases"]
    ests = ("estimator_time_profile.json", "estimator_energy_floored.json", "estimator_time_stand_in.json")
    assert {q["estimator"] for q in cases} == set(ests)
    for est in ests:
        mine = [q for q in cases if q["estimator"] == est]
        exp = [q["expected"] for q in mine]
        assert {e["batch_size"] for e in exp} >= {1, 7, 32, 256}
        assert any(e["last_batch"] == 0 and e["steps_per_epoch"] > 1 for e in exp)      # divisible
        assert any(e["last_batch"] > 0 and e["steps_per_epoch"] > 1 for e in exp)       # a last partial batch
        assert any(e["samples"] < e["batch_size"] and e["steps_per_epoch"] == 1 for e in exp)  # fewer than a batch
        assert {e["epochs"] for e in exp} >= {1, 3, MAX_EPOCHS}
        assert {e["confidence"] for e in exp} >= {0.5, 0.9, 0.95, 0.9999}
        assert any(e["samples"] == MAX_SAMPLES for e in exp)
        assert any(q["samples"] is None for q in mine)                                  # the defaults
        assert len({q["layers"] for q in mine}) >= 2
    assert any(q["expected"]["metric"] == "energy" and q["expected"]["unit"] == "J" for q in cases)
    assert all(q["expected"]["device"] == "synthetic" for q in cases)
    errors = {q["what"]: q["error"] for q in vec["errors"]}
    for what in ("batch size 0", "samples 0", "confidence 0.3", "confidence 1.0", "epochs 0"):
        assert errors[what] == "usage"
    assert "not_found" in errors.values()
    confidences = [q["confidence"] for q in vec["quantiles"]]
    assert len(confidences) == len(set(confidences)) == 200
    assert min(confidences) == 0.5 and max(confidences) == 0.9999
    assert any(c < 0.925 for c in confidences) and any(c > 0.925 for c in confidences)  # both AS 241 regions
    ps = [q["p"] for q in vec["ppnd16"]]
    assert min(ps) < 1e-11 and max(ps) > 1 - 1e-11  # the far tails (r > 5) too


def test_quantile_table_is_normal_dist():
    vec = _vectors()
    for q in vec["quantiles"]:
        assert quantile(q["confidence"]) == q["z"] == NormalDist().inv_cdf(q["confidence"])
    for q in vec["ppnd16"]:
        assert NormalDist().inv_cdf(q["p"]) == q["z"]
    assert quantile(0.5) == 0.0 and close(quantile(0.95), 1.6448536269514722, 1e-15)


def test_layer_lists_follow_the_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "thor_sdk" / "schemas" / "layers.schema.json").read_text())
    names = sorted(p.name for p in VECTORS.glob("layers_*.json"))
    assert len(names) >= 4
    for name in names:
        doc = json.loads((VECTORS / name).read_text())
        jsonschema.validate(doc, schema)
        assert all("role" in l and "cost" in l for l in doc["layers"])  # what the Java and Swift runtimes need


# ----------------------------------------------------------------------------- the math
@pytest.fixture(scope="module")
def time_case():
    return load_estimator(VECTORS / "estimator_time_profile.json"), _layers("layers_time_profile_0.json")


def test_epoch_counts_the_last_partial_batch(time_case):
    est, layers = time_case
    assert steps_per_epoch(5000, 16) == (312, 8)
    assert steps_per_epoch(4992, 16) == (312, 0)
    assert steps_per_epoch(3, 16) == (0, 3)
    r = training_run(est, layers, 16, samples=5000, epochs=3, confidence=0.95)
    assert (r["steps_per_epoch"], r["last_batch"], r["steps"]) == (313, 8, 939)
    step16, step8 = est.estimate(layers, 16)["total"], est.estimate(layers, 8)["total"]
    assert close(r["epoch"]["mean"], 312 * step16["mean"] + step8["mean"])
    assert close(r["epoch"]["std"], 312 * step16["std"] + step8["std"])  # model error: stds add linearly
    assert close(r["run"]["mean"], 3 * r["epoch"]["mean"]) and close(r["run"]["std"], 3 * r["epoch"]["std"])
    z = NormalDist().inv_cdf(0.95)
    for part in ("step", "epoch", "run"):
        assert close(r[part]["upper"], r[part]["mean"] + z * r[part]["std"])
    assert r["device"] == "synthetic" and r["runtime"] == "torch" and r["metric"] == "time"


def test_fewer_samples_than_a_batch_is_one_smaller_step(time_case):
    est, layers = time_case
    r = training_run(est, layers, 32, samples=5, confidence=0.5)
    small = est.estimate(layers, 5)["total"]
    assert (r["steps_per_epoch"], r["last_batch"], r["steps"]) == (1, 5, 1)
    assert r["epoch"]["mean"] == small["mean"] and r["epoch"]["std"] == small["std"]
    assert r["run"]["upper"] == r["run"]["mean"]  # z = 0 at confidence 0.5
    assert r["step"]["mean"] == est.estimate(layers, 32)["total"]["mean"]  # one step is always at the batch size


def test_defaults_are_one_batch_one_epoch_95(time_case):
    est, layers = time_case
    r = training_run(est, layers, 32)
    assert (r["samples"], r["epochs"], r["steps"], r["confidence"]) == (32, 1, 1, 0.95)
    assert r["step"] == r["epoch"] == r["run"]


@pytest.mark.parametrize("kw", [{"batch_size": 0}, {"batch_size": 16.0}, {"batch_size": True}, {"samples": 0},
                                {"samples": 2.5}, {"samples": MAX_SAMPLES + 1}, {"epochs": 0}, {"epochs": 1.0},
                                {"epochs": MAX_EPOCHS + 1}, {"confidence": 0.3}, {"confidence": 1.0},
                                {"confidence": float("nan")}, {"confidence": "0.95"}, {"confidence": True}])
def test_bad_inputs_are_usage_errors(time_case, kw):
    est, layers = time_case
    args = dict({"batch_size": 16, "samples": 100, "epochs": 2, "confidence": 0.9}, **kw)
    with pytest.raises(UsageError):
        training_run(est, layers, **args)


NO_NUMPY = r"""
import json, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("numpy", "scipy", "sklearn", "torch", "jsonschema"):
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
from thor_sdk.runtime import load_estimator, training_run
est = load_estimator(sys.argv[1])
layers = json.load(open(sys.argv[2]))["layers"]
print(json.dumps(training_run(est, layers, 32, samples=1000, epochs=3, confidence=0.95)["run"]))
"""


def test_training_run_needs_only_the_standard_library():
    proc = subprocess.run([sys.executable, "-c", NO_NUMPY, str(VECTORS / "estimator_time_profile.json"),
                           str(VECTORS / "layers_time_profile_0.json")], capture_output=True, text=True, timeout=60,
                          cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr
    want = training_run(load_estimator(VECTORS / "estimator_time_profile.json"), _layers("layers_time_profile_0.json"),
                        32, samples=1000, epochs=3, confidence=0.95)["run"]
    got = json.loads(proc.stdout)
    assert all(close(got[k], want[k]) for k in NUMBERS)
