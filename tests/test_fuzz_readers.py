"""Property tests of every file reader: on any input it returns valid, finite data or raises a ThorError (never
another exception, never a NaN or infinity), deterministic in CI (derandomized, bounded example counts)."""

import copy
import csv
import io
import json
import math
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from thor_sdk.errors import ThorError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "check"
GOOD_ESTIMATOR = EXAMPLE / "synthetic-phone-time.json"
GOOD_LAYERS = EXAMPLE / "example_cnn.layers.json"
FUZZ = settings(derandomize=True, max_examples=200, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

#: JSON values, including what strict readers must refuse (NaN, infinities, integers far beyond a float)
SCALARS = (st.none() | st.booleans() | st.integers(min_value=-10 ** 40, max_value=10 ** 40)
           | st.sampled_from([0, -1, 1, 10 ** 400, -10 ** 400, 2 ** 63, 1e300, -1e300, 1e-300, 16.7])
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6))
JSON_VALUES = st.recursive(SCALARS, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c,
                                                                                         max_size=3), max_leaves=6)
#: CSV fields: numbers in and out of range, non-numbers, and text with the characters CSV and UTF-8 trip on
CSV_FIELDS = (st.sampled_from(["0", "-1", "1", "16", "16.7", "1e12", "1e308", "1e400", "nan", "inf", "-inf", "", "x",
                               "0x10", "1_000", "Input", "sideways", "hidden", "input", "output", "linear", "conv9d",
                               '"', "a,b", "\x00", "\ufeff"])
              | st.floats(allow_nan=True, allow_infinity=True).map(repr)
              | st.integers(min_value=-10 ** 30, max_value=10 ** 30).map(str) | st.text(max_size=8))


def _paths(doc, prefix=()):
    """Every path (tuple of keys/indices) into a JSON document, the root included."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, prefix + (i,))
    return out


@st.composite
def mutated_docs(draw, doc, n_max=3):
    """``doc`` with 1..n_max values replaced by arbitrary JSON values, or deleted."""
    d = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, n_max))):
        paths = [p for p in _paths(d) if p]
        if not paths:
            break
        numeric = [p for p in paths if _is_number(_at(d, p))]
        how = draw(st.integers(0, 9))
        if how < 5 and numeric:  # a number scaled or shifted: mostly still readable, so what follows is tested
            path = draw(st.sampled_from(numeric))
            parent = _at(d, path[:-1])
            parent[path[-1]] = draw(SCALINGS)(parent[path[-1]])
            continue
        path = draw(st.sampled_from(paths))
        parent = _at(d, path[:-1])
        if how == 9:
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(JSON_VALUES)
    return d


def _at(doc, path):
    for p in path:
        doc = doc[p]
    return doc


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


#: how a number in a good document is changed: scaled, negated, shifted, rounded, blown up or shrunk
SCALINGS = st.sampled_from([
    lambda x: x * 2, lambda x: x / 3, lambda x: -x, lambda x: x + 1, lambda x: x - 1, lambda x: 0,
    lambda x: x * 1e6, lambda x: x * 1e-6, lambda x: x * 1e300, lambda x: x * 1e-300, lambda x: round(x),
    lambda x: x + 0.5, lambda x: int(x) * 10 ** 25])


def _text(doc):
    """JSON text of a document that may hold NaN or infinities (written as the tokens a strict reader refuses)."""
    return json.dumps(doc, allow_nan=True)


def _write(name, data):
    """A file in this process's fuzz folder (one per name, overwritten by each example)."""
    folder = Path(tempfile.gettempdir()) / f"thor-fuzz-{os.getpid()}"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
    return str(path)


def _finite_numbers(obj):
    """Every number in a nested structure (dicts, lists, tuples) is finite."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return True
    if isinstance(obj, (int, float)):
        return math.isfinite(obj)
    if isinstance(obj, dict):
        return all(_finite_numbers(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return all(_finite_numbers(v) for v in obj)
    return True


def _good_layers():
    from thor_sdk.layers import read_layer_list

    return read_layer_list(str(GOOD_LAYERS)).layers


def _check_estimate(est, layers, batch_size=4):
    """An estimate is finite and non-negative, or a ThorError."""
    try:
        r = est.estimate(layers, batch_size)
    except ThorError as e:
        event(f"estimate refused: {type(e).__name__}")
        return
    event("estimated")
    assert math.isfinite(r["total"]["mean"]) and r["total"]["mean"] > 0, r["total"]
    assert math.isfinite(r["total"]["std"]) and r["total"]["std"] >= 0, r["total"]
    assert all(math.isfinite(l["mean"]) and math.isfinite(l["std"]) for l in r["layers"])
    json.dumps(r, allow_nan=False)  # what --json prints


# ----------------------------------------------------------------------------- estimator
@FUZZ
@given(mutated_docs(json.loads(GOOD_ESTIMATOR.read_text())))
@example(json.loads(GOOD_ESTIMATOR.read_text()))
def test_estimator_reader(doc):
    from thor_sdk.runtime import load_estimator

    path = _write("estimator.json", _text(doc))
    try:
        est = load_estimator(path)
    except ThorError as e:
        event(f"refused: {type(e).__name__}")
        return
    event("accepted")
    _check_estimate(est, _good_layers())


@FUZZ
@given(st.binary(max_size=300) | st.sampled_from([b"\xff\xfe{}", b'{"a": ' + b"[" * 5000 + b"]" * 5000 + b"}",
                                                  b'{"a": 1e999}', b'{"a": ' + b"9" * 400 + b"}", b"{\x00}"]))
def test_estimator_reader_on_bytes_agrees_with_the_shared_reader(data):
    """The runtime's own JSON reader and ``thor_sdk.store.files.read_json`` accept and refuse the same bytes."""
    from thor_sdk.runtime.estimator import read_json_file
    from thor_sdk.store.files import read_json

    path = _write("bytes.json", data)
    got = []
    for reader in (read_json_file, read_json):
        try:
            got.append(("ok", reader(path)))
        except ThorError:
            got.append(("error", None))
    assert got[0] == got[1], (data, got)
    if got[0][0] == "ok":
        assert _finite_numbers(got[0][1])


@FUZZ
@given(st.text(max_size=8) | st.sampled_from(["in_channels", "out_channels", "height", "batch_size", "role",
                                             "train_flops", "bias", ""]),
       st.text(alphabet="0123456789-+.e\u0663 ", max_size=6) | st.sampled_from(["8", "1", "1024", "1025", "08", "0"]),
       st.sampled_from([1, 3, 8, 9, 64, 2 ** 31, 1e300]) | st.floats(allow_nan=False, allow_infinity=False)
       | st.integers(-10 ** 20, 10 ** 20) | st.booleans() | st.text(max_size=3))
def test_padded_feature_names_and_values(base, digits, in_channels):
    """Any ``<base>_pad<digits>`` feature name in an estimator, and any value of the feature it pads: an estimate is
    finite and non-negative, or a ThorError (a padded feature is derived, never read; its base must be >= 1)."""
    from thor_sdk.runtime import Estimator

    doc = json.loads(GOOD_ESTIMATOR.read_text())
    feats = doc["kinds"]["conv2d"]["features"]
    feats[feats.index("in_channels_pad8")] = f"{base}_pad{digits}"
    try:
        est = Estimator(doc)
    except ThorError as e:  # e.g. the name duplicates another feature
        event(f"refused: {type(e).__name__}")
        return
    layers = copy.deepcopy(_good_layers())
    for layer in layers:
        if layer["kind"] == "conv2d":
            layer["config"]["in_channels"] = in_channels
    _check_estimate(est, layers)
    feats_in = dict(layers[0]["config"], batch_size=4, role="input")
    try:
        mean, std = est.predict_layer("conv2d", feats_in, cost=layers[0].get("cost"))
    except ThorError:
        return
    assert math.isfinite(mean) and mean > 0 and math.isfinite(std) and std >= 0


# ----------------------------------------------------------------------------- layer list
def _recomputed(doc):
    """``doc`` with its second layer checkpointed (``recompute``: its forward's share of its step run again)."""
    doc = copy.deepcopy(doc)
    doc["layers"][1]["recompute"] = 0.5
    return doc


@FUZZ
@given(mutated_docs(json.loads(GOOD_LAYERS.read_text()))
       | mutated_docs(_recomputed(json.loads(GOOD_LAYERS.read_text()))))
@example(json.loads(GOOD_LAYERS.read_text()))
@example(_recomputed(json.loads(GOOD_LAYERS.read_text())))
def test_layer_list_reader(doc):
    from thor_sdk.layers import read_layer_list
    from thor_sdk.layers.kinds import get_kind
    from thor_sdk.runtime import load_estimator
    from thor_sdk.runtime.terms import cost_terms

    path = _write("layers.json", _text(doc))
    try:
        ml = read_layer_list(path)
    except ThorError as e:
        event(f"refused: {type(e).__name__}")
        return
    event("accepted")
    assert ml.layers and all(isinstance(s, int) and s >= 1 for s in ml.input_shape)
    for layer in ml.layers:
        get_kind(layer["kind"]).check_config(layer["config"])  # what was read is within the kind's bounds
        assert _finite_numbers(cost_terms(layer["kind"], layer["config"], layer["role"]))
    _check_estimate(load_estimator(str(GOOD_ESTIMATOR)), ml.layers)


# ----------------------------------------------------------------------------- samples CSV
SAMPLES_HEADER = ["kind", "role", "batch_size", "time_s", "in_features", "out_features", "tokens", "bias"]
SAMPLES_ROWS = [["linear", "hidden", str(b), f"{1e-4 * b:.6g}", "32", "64", "1", "1"] for b in (8, 16, 32)]


@st.composite
def mutated_csv(draw, header, rows):
    """CSV text of ``header`` and ``rows`` with some cells, header names or row lengths changed."""
    header, rows = list(header), [list(r) for r in rows]
    for _ in range(draw(st.integers(1, 4))):
        what = draw(st.integers(0, 9))
        if what == 0:
            header[draw(st.integers(0, len(header) - 1))] = draw(CSV_FIELDS)
        elif what == 1 and rows:
            r = rows[draw(st.integers(0, len(rows) - 1))]
            if draw(st.booleans()):
                r.append(draw(CSV_FIELDS))
            elif r:
                r.pop()
        else:
            r = rows[draw(st.integers(0, len(rows) - 1))]
            i = draw(st.integers(0, len(r) - 1))
            try:
                x = float(r[i])
            except ValueError:
                x = None
            if what < 6 and x is not None and math.isfinite(x):  # a number changed: often still readable
                r[i] = repr(draw(SCALINGS)(x))
            else:
                r[i] = draw(CSV_FIELDS)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


@FUZZ
@given(mutated_csv(SAMPLES_HEADER, SAMPLES_ROWS))
def test_samples_csv_reader(text):
    from thor_sdk.fitting.samples_csv import MAX_SAMPLE_COST, read_samples_csv
    from thor_sdk.layers.kinds import get_kind

    path = _write("samples.csv", text)
    try:
        samples = read_samples_csv(path)
    except ThorError as e:
        event(f"refused: {type(e).__name__}")
        return
    event("accepted")
    assert samples
    for s in samples:
        kind = get_kind(s["kind"])
        assert s["role"] in kind.roles
        assert isinstance(s["batch_size"], int) and s["batch_size"] >= 1
        assert math.isfinite(s["value"]) and 0 < s["value"] <= MAX_SAMPLE_COST
        kind.check_config(s["config"])


# ----------------------------------------------------------------------------- results (ingest's reader)
GOOD_RESULTS = {"format": "thor-sdk/results", "version": 1, "harness": "fuzz", "metric": "time",
                "parts": {"hidden": {"steps_per_window": 4, "time_s": [0.01, 0.011, 0.012],
                                     "energy_j": [], "window_times_s": [[0.0, 0.04], [0.05, 0.09], [0.1, 0.14]]}}}


@FUZZ
@given(mutated_docs(GOOD_RESULTS))
@example(GOOD_RESULTS)
def test_results_reader(doc):
    from thor_sdk.harness.results import validate_results_doc
    from thor_sdk.layers import read_json

    path = _write("results.json", _text(doc))
    try:
        out = validate_results_doc(read_json(path, "results"), "results")
    except ThorError as e:
        event(f"refused: {type(e).__name__}")
        return
    event("accepted")
    assert _finite_numbers(out)


# ----------------------------------------------------------------------------- power table
GOOD_TABLE = {
    "format": "thor-sdk/power-table", "version": 1, "simulated": True, "knob": "gpu_freq_hz", "model": "mlp",
    "device": {"name": "sim"}, "power_metric": "peak", "reference_batch_size": 64,
    "reference_samples_to_target": 1000.0, "reference_samples_source": "given", "target_accuracy": 0.9,
    "created_by": "tests", "sources": {"notes": []},
    "rows": [{"batch_size": b, "freq_hz": f, "time_per_sample_s": t, "peak_power_w": p, "mean_power_w": p * 0.8}
             for b, f, t, p in [(16, 306000000, 0.0039, 1.9), (16, 918000000, 0.0013, 3.8),
                                (64, 306000000, 0.0024, 2.5), (64, 918000000, 0.0008, 5.5)]],
    "ratios": [{"batch_size": 16, "ratio": 0.8}, {"batch_size": 64, "ratio": 1.0}]}


@FUZZ
@given(mutated_docs(GOOD_TABLE), st.sampled_from([0.5, 2.0, 3.0, 5.0, 100.0]))
@example(GOOD_TABLE, 5.0)
def test_power_table_reader(doc, cap_w):
    from thor_sdk.power.select import compare
    from thor_sdk.power.table import read_json

    path = _write("table.json", _text(doc))
    try:
        table = read_json(path)
    except ThorError as e:
        event(f"refused: {type(e).__name__}")
        return
    event("accepted")
    keys = [(r["batch_size"], r["freq_hz"]) for r in table["rows"]]
    assert len(keys) == len(set(keys))
    try:
        res = compare(table, cap_w)
    except ThorError as e:
        event(f"selection refused: {type(e).__name__}")
        return
    event("selected")
    json.dumps(res, allow_nan=True)
    sel = res["selected"]
    assert isinstance(sel["batch_size"], int) and math.isfinite(sel["time_per_sample_s"])
    assert sel["peak_power_w"] <= cap_w


# ----------------------------------------------------------------------------- GPU traces
POWER_HEADER = ["dataset", "network", "batch_size", "optimizer", "power_limit", "time_per_epoch", "average_power"]
POWER_ROWS = [["toy", "net", str(b), "sgd", str(pl), str(t), str(p)] for b, pl, t, p in
              [(8, 100, 3.0, 90.0), (8, 200, 1.5, 140.0), (32, 100, 2.0, 100.0), (32, 200, 1.0, 190.0)]]
TRAIN_HEADER = ["dataset", "network", "batch_size", "optimizer", "learning_rate", "run", "target_metric",
                "target_epoch"]
TRAIN_ROWS = [["toy", "net", str(b), "sgd", "0.1", str(r), "0.5", str(e)]
              for b, runs in {8: (10, 11, 12, 10), 32: (4, 5, 4, 5)}.items() for r, e in enumerate(runs)]


@FUZZ
@given(mutated_csv(POWER_HEADER, POWER_ROWS))
def test_power_trace_reader(text):
    from thor_sdk.power.replay import read_power_trace

    path = _write("power.csv", text)
    try:
        trace = read_power_trace(path)
    except ThorError as e:
        event(f"refused: {type(e).__name__}")
        return
    event("accepted")
    for cell in trace.values():
        for (bs, pl), (t, p) in cell.items():
            assert isinstance(bs, int) and bs >= 1
            assert all(math.isfinite(x) and x > 0 for x in (pl, t, p))


@FUZZ
@given(mutated_csv(TRAIN_HEADER, TRAIN_ROWS))
def test_train_trace_reader(text):
    from thor_sdk.power.replay import read_train_trace

    path = _write("train.csv", text)
    try:
        trace = read_train_trace(path)
    except ThorError as e:
        event(f"refused: {type(e).__name__}")
        return
    event("accepted")
    for by_target in trace.values():
        for target, per_bs in by_target.items():
            assert math.isfinite(target)
            for bs, runs in per_bs.items():
                assert isinstance(bs, int) and bs >= 1
                # an epoch is finite and positive, or infinite: the documented "never reached" (nan in the file)
                assert all(isinstance(r, int) and r >= 0 and e > 0 and not math.isnan(e) for r, e in runs.items())


def _csv(header, rows):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


@settings(derandomize=True, max_examples=40, deadline=None)
@given(st.just(_csv(POWER_HEADER, POWER_ROWS)) | mutated_csv(POWER_HEADER, POWER_ROWS),
       st.sampled_from([1e-9, 0.0, -1.0, math.nan, math.inf, 1e-300, 5.0, 10.0, 50.0, 50.0]),
       st.sampled_from([None, None, 1, 2, 0, 10 ** 9]))
def test_replay_returns_finite_figures_or_an_error(text, cap_step_w, splits):
    from thor_sdk.power.replay import replay

    power = _write("power-r.csv", text)
    train = _write("train-r.csv", _csv(TRAIN_HEADER, TRAIN_ROWS))
    try:
        res = replay(power, train, cap_step_w=cap_step_w, splits=splits)
    except ThorError as e:
        event(f"refused: {type(e).__name__}")
        return
    event("accepted")
    json.dumps(res, allow_nan=False)  # a figure that is not finite is written as null, never NaN


# ----------------------------------------------------------------------------- budgets TOML
BUDGET_VALUES = st.sampled_from(["0", "-1", "16", "16.7", "1e400", "nan", "inf", "-inf", "9" * 400, '"x"', "true",
                                 "[]", "{}", '""', "0.9999", "2.0", "[1, 2]"]) | st.sampled_from(
    ["8", "32", "1000", "5.0", "0.5", "0.95", '"step"', '"epoch"', '"run"', '"my model"'])


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(["batch_size", "samples", "epochs", "budget_s", "budget_j", "confidence",
                                           "per", "input_shape", "name", "model", "unknown"]), BUDGET_VALUES),
                min_size=1, max_size=3))
def test_budgets_reader(changes):
    from thor_sdk.check.budgets import read_budgets

    entries = {"model": f'"{GOOD_LAYERS}"', "batch_size": "16", "samples": "100", "budget_s": "100.0"}
    for key, value in changes:
        entries[key] = value
    text = (f'version = 1\nestimators = ["{GOOD_ESTIMATOR}"]\n\n[[models]]\n'
            + "".join(f"{k} = {v}\n" for k, v in entries.items()))
    path = _write("budgets.toml", text)
    try:
        bf = read_budgets(path)
    except ThorError as e:
        event(f"refused: {type(e).__name__}")
        return
    event("accepted")
    for m in bf.models:
        assert _finite_numbers({k: v for k, v in vars(m).items() if isinstance(v, (int, float))})


# ----------------------------------------------------------------------------- bench meter logs
METER_HEADER = ["time_s", "power_w"]
METER_ROWS = [[f"{0.1 * i:.1f}", f"{2.0 + 0.01 * i:.2f}"] for i in range(6)]


@FUZZ
@given(mutated_csv(METER_HEADER, METER_ROWS)
       | st.sampled_from([b"\xff\xfet\x00,\x00p\x00", b"time_s,power_w\n\xe9,1\n1,2\n", b"time_s,power_w\n1,\x002\n3,4\n",
                          b"time_s,power_w\n1," + b"9" * 140000 + b"\n2,3\n"]))
def test_meter_log_reader(data):
    from thor_sdk.meters.external import read_power_log

    path = _write("meter.csv", data)
    try:
        rows = read_power_log(path)
    except ThorError as e:
        event(f"refused: {type(e).__name__}")
        return
    event("accepted")
    assert all(math.isfinite(t) and math.isfinite(p) for t, p in rows)
    assert rows == sorted(rows)


@FUZZ
@given(st.lists(st.sampled_from(["model name", "flags", "Features", "Hardware", "Processor", "processor", "cpu model",
                                 "", "\x00", "model name\t"]) | st.text(max_size=12), max_size=6),
       st.lists(st.sampled_from(["avx2", "avx512f", "asimd", "sve", "AMD EPYC", ":", "", "\ufeff"]) | st.text(max_size=20),
                max_size=6),
       st.binary(max_size=64))
def test_cpuinfo_reader(keys, values, raw):
    """``/proc/cpuinfo`` (the host's device info reads it from a root): any text or bytes give a dict of a model
    string (at most 200 characters) and known instruction sets, or nothing; never an exception."""
    from thor_sdk.devices.state import CPU_ISA, cpu_identity

    text = "\n".join(f"{k}\t: {' '.join(values)}" for k in keys)
    path = Path(_write("proc_cpuinfo", raw if not keys else text))
    root = path.parent / "cpuinfo-root"
    (root / "proc").mkdir(parents=True, exist_ok=True)
    path.replace(root / "proc" / "cpuinfo")
    got = cpu_identity(root)
    event("model" if "cpu_model" in got else "no model")
    assert set(got) <= {"cpu_model", "cpu_isa"}
    assert "cpu_model" not in got or (isinstance(got["cpu_model"], str) and 0 < len(got["cpu_model"]) <= 200)
    assert "cpu_isa" not in got or (got["cpu_isa"] == sorted(set(got["cpu_isa"])) and set(got["cpu_isa"]) <= set(CPU_ISA))


# -- ONNX graphs: random chains of the operators the importer reads, stands in for or refuses ---------------------
_ONNX_OPS = ("Relu", "Softmax", "Transpose", "MatMulW", "MatMulSelf", "Conv", "ConvTranspose", "Flatten", "Split",
             "Einsum", "Pad", "PadFromShape", "Resize", "Concat", "Mul", "HardSwish", "Reduce", "GlobalMaxPool",
             "Sub", "Clip", "Pool", "BatchNorm", "GRU", "Swish", "GroupNorm", "Attention", "AttentionOp", "Expand")


@st.composite
def onnx_graphs(draw):
    """``(model bytes, unknown_ops)``: an input of rank 3 or 4 (batch symbolic or fixed, small sides) and a chain of
    up to five operators with random attributes and weights of random shapes (often not fitting: shape inference
    and the importer must then refuse with a ThorError)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rank = draw(st.sampled_from([3, 4]))
    dims = [draw(st.sampled_from(["N", 1, 2]))] + [draw(st.integers(1, 6)) for _ in range(rank - 1)]
    nodes, inits, cur = [], [], "x"
    for i in range(draw(st.integers(1, 5))):
        op, out = draw(st.sampled_from(_ONNX_OPS)), f"t{i}"
        small = st.integers(1, 4)
        if op == "Softmax":
            nodes.append(helper.make_node("Softmax", [cur], [out], axis=draw(st.integers(-4, 3))))
        elif op == "Transpose":
            nodes.append(helper.make_node("Transpose", [cur], [out], perm=draw(st.permutations(range(rank)))))
        elif op == "MatMulW":
            w = f"w{i}"
            inits.append(numpy_helper.from_array(np.zeros((draw(small), draw(small)), np.float32), w))
            nodes.append(helper.make_node("MatMul", [cur, w], [out]))
        elif op == "MatMulSelf":
            nodes.append(helper.make_node("Transpose", [cur], [f"{out}T"],
                                          perm=list(range(rank - 2)) + [rank - 1, rank - 2]))
            nodes.append(helper.make_node("MatMul", [cur, f"{out}T"], [out]))
        elif op in ("Conv", "ConvTranspose"):
            w, k = f"w{i}", draw(st.integers(1, 3))
            shape = (draw(small), draw(small), k, k) if draw(st.booleans()) else (draw(small), draw(small), k)
            inits.append(numpy_helper.from_array(np.zeros(shape, np.float32), w))
            n_sides, dilated = len(shape) - 2, draw(st.integers(0, 2))  # none, one per side, hostile per side
            attrs = {} if not dilated else {"dilations": [draw(st.integers(1, 3))] * n_sides} if dilated == 1 else \
                {"dilations": draw(st.lists(st.integers(-1, 4), min_size=n_sides, max_size=n_sides + 1))}
            if op == "ConvTranspose" and draw(st.booleans()):
                attrs["strides"] = [draw(st.integers(1, 2))] * (len(shape) - 2)
            if op == "Conv" and draw(st.booleans()):  # pads of any length and sign, or an auto_pad
                if draw(st.booleans()):
                    attrs["pads"] = draw(st.lists(st.integers(-1, 3), min_size=1, max_size=2 * n_sides + 1))
                else:
                    attrs["auto_pad"] = draw(st.sampled_from(["SAME_UPPER", "SAME_LOWER", "VALID", "NOTSET"]))
            nodes.append(helper.make_node(op, [cur, w], [out], **attrs))
        elif op == "Pool":  # 1-D or 2-D windows (maybe not the input's rank), any pads, strides, ceil_mode, dilations
            sides = draw(st.integers(1, 2))
            attrs = {"kernel_shape": draw(st.lists(st.integers(1, 7), min_size=sides, max_size=sides))}
            for key, values, lo in (("strides", st.integers(1, 3), 0), ("pads", st.integers(0, 2), 0),
                                    ("dilations", st.integers(1, 2), 0)):
                if draw(st.booleans()):
                    n = sides * (2 if key == "pads" else 1)
                    attrs[key] = draw(st.lists(values, min_size=n, max_size=n))
            attrs["ceil_mode"] = draw(st.integers(0, 1))
            nodes.append(helper.make_node(draw(st.sampled_from(["MaxPool", "AveragePool"])), [cur], [out], **attrs))
        elif op == "BatchNorm":  # its scale, bias, mean and variance sized for axis 1, or not
            n = draw(small)
            names = [f"bn{i}_{j}" for j in range(4)]
            inits += [numpy_helper.from_array(np.ones((n,), np.float32), name) for name in names]
            nodes.append(helper.make_node("BatchNormalization", [cur, *names], [out]))
        elif op == "GRU":  # GRU or LSTM: weights of random sizes, either layout, any direction, either reset placement
            rnn = draw(st.sampled_from(["GRU", "LSTM"]))
            gates = 3 if rnn == "GRU" else 4
            hidden, directions = draw(small), draw(st.integers(1, 2))
            wi, ri = f"gw{i}", f"gr{i}"
            inits += [numpy_helper.from_array(np.zeros((directions, gates * hidden, draw(small)), np.float32), wi),
                      numpy_helper.from_array(np.zeros((directions, gates * hidden, hidden), np.float32), ri)]
            options = {"linear_before_reset": draw(st.integers(0, 1))} if rnn == "GRU" else {}
            nodes.append(helper.make_node(
                rnn, [cur, wi, ri], [out], hidden_size=hidden, layout=draw(st.integers(0, 1)),
                direction=draw(st.sampled_from(["forward", "reverse", "bidirectional"])), **options))
        elif op == "GroupNorm":  # GroupNorm's export, its groups, reshapes, scales and affine sized right or not
            groups, shp, back = draw(small), f"gs{i}", f"gb{i}"
            inits += [numpy_helper.from_array(np.array([0, groups, -1], np.int64), shp),
                      numpy_helper.from_array(np.ones((draw(small),), np.float32), f"gsc{i}"),
                      numpy_helper.from_array(np.zeros((groups,), np.float32), f"gbi{i}"),
                      numpy_helper.from_array(np.ones((draw(small), 1), np.float32), f"gw{i}")]
            nodes += [helper.make_node("Reshape", [cur, shp], [f"{out}r"]),
                      helper.make_node("InstanceNormalization", [f"{out}r", f"gsc{i}", f"gbi{i}"], [f"{out}n"]),
                      helper.make_node("Shape", [cur], [f"{out}s"]),
                      helper.make_node("Reshape", [f"{out}n", f"{out}s" if draw(st.booleans()) else shp], [back]),
                      helper.make_node("Mul", [back, f"gw{i}"], [out])]
        elif op == "Swish":  # x * sigmoid(x), either order
            nodes.append(helper.make_node("Sigmoid", [cur], [f"{out}s"]))
            pair = [cur, f"{out}s"]
            nodes.append(helper.make_node("Mul", pair[::-1] if draw(st.booleans()) else pair, [out]))
        elif op == "Attention":  # softmax(x x^T (scaled, masked)) (dropped out) x, every part hostile or missing
            t, kt = f"{out}s", f"{out}T"
            nodes.append(helper.make_node("Transpose", [cur], [kt], perm=list(range(rank - 2)) + [rank - 1, rank - 2]))
            if draw(st.booleans()):  # k^T through a Reshape round trip (the dynamo exporter's), sizes right or not
                merge, split = f"{out}mg", f"{out}sp"
                inits += [numpy_helper.from_array(np.array(draw(st.sampled_from([[-1, 0], [-1, 1, 0], [0, -1], [2, -1]]))
                                                           [:rank], np.int64), merge),
                          numpy_helper.from_array(np.array(draw(st.lists(st.integers(-1, 6), min_size=rank,
                                                                         max_size=rank)), np.int64), split)]
                nodes += [helper.make_node("Reshape", [kt, merge], [f"{out}km"]),
                          helper.make_node("Reshape", [f"{out}km", split], [f"{out}kr"])]
                kt = f"{out}kr"
            nodes.append(helper.make_node("MatMul", [cur, kt], [t]))
            if draw(st.booleans()):  # a scale: any number, maybe not one
                inits.append(numpy_helper.from_array(np.full(draw(st.sampled_from([(), (1,), (2,)])), draw(
                    st.sampled_from([0.5, 0.0, float("nan"), float("inf")])), np.float32), f"{out}c"))
                nodes.append(helper.make_node(draw(st.sampled_from(["Mul", "Div"])), [t, f"{out}c"], [f"{out}sc"]))
                t = f"{out}sc"
            mask = draw(st.sampled_from(["none", "add", "where", "huge"]))
            if mask in ("add", "where"):  # of any small shape, values causal or not, hostile fills
                side = [draw(st.integers(1, 6)) for _ in range(draw(st.integers(0, 3)))]
                values = np.triu(np.ones(side[-2:], bool), draw(st.integers(-1, 2))) if len(side) >= 2 else \
                    np.ones(side, bool)
                values = np.broadcast_to(values, side).copy()
                fill = draw(st.sampled_from([float("-inf"), -1e9, float("nan"), 0.0, 1.0]))
                if mask == "add":
                    inits.append(numpy_helper.from_array(np.where(values, fill, 0.0).astype(np.float32), f"{out}m"))
                    nodes.append(helper.make_node("Add", [t, f"{out}m"], [f"{out}mk"]))
                else:
                    inits += [numpy_helper.from_array(values, f"{out}m"),
                              numpy_helper.from_array(np.array(fill, np.float32), f"{out}f")]
                    nodes.append(helper.make_node("Where", [f"{out}m", f"{out}f", t], [f"{out}mk"]))
                t = f"{out}mk"
            elif mask == "huge":  # a mask a file asks to be made of 10^10 elements: never made
                inits.append(numpy_helper.from_array(np.array([100_000, 100_000], np.int64), f"{out}hs"))
                inits.append(numpy_helper.from_array(np.array(float("-inf"), np.float32), f"{out}f"))
                nodes += [helper.make_node("ConstantOfShape", [f"{out}hs"], [f"{out}h"],
                                           value=numpy_helper.from_array(np.array([1], np.bool_))),
                          helper.make_node("Trilu", [f"{out}h"], [f"{out}ht"], upper=1),
                          helper.make_node("Where", [f"{out}ht", f"{out}f", t], [f"{out}mk"])]
                t = f"{out}mk"
            nodes.append(helper.make_node("Softmax", [t], [f"{out}p"], axis=draw(st.sampled_from([-1, 1, rank - 1]))))
            t = f"{out}p"
            if draw(st.booleans()):
                inits.append(numpy_helper.from_array(np.array(draw(st.sampled_from([0.1, 0.0, 1.0, -0.5, float("nan")])),
                                                              np.float32), f"{out}r"))
                nodes.append(helper.make_node("Dropout", [t, f"{out}r"], [f"{out}d"]))
                t = f"{out}d"
            nodes.append(helper.make_node("MatMul", [t, cur], [out]))
        elif op == "AttentionOp":  # ONNX's Attention (opset 23) on the activation as q, k and v: any heads, mask, flags
            attrs = {"is_causal": draw(st.integers(0, 1))}
            if draw(st.booleans()):
                attrs.update(q_num_heads=draw(st.integers(0, 4)), kv_num_heads=draw(st.integers(0, 4)))
            if draw(st.booleans()):
                attrs["softcap"] = draw(st.sampled_from([0.0, 30.0]))
            ins = [cur, cur, cur]
            if draw(st.booleans()):
                inits.append(numpy_helper.from_array(np.zeros([draw(small) for _ in range(2)], np.float32), f"{out}m"))
                ins.append(f"{out}m")
            nodes.append(helper.make_node("Attention", ins, [out], **attrs))
        elif op == "Split":
            nodes.append(helper.make_node("Split", [cur], [out, f"{out}b"], axis=draw(st.integers(1, rank - 1)),
                                          num_outputs=2))
        elif op == "Einsum":
            nodes.append(helper.make_node("Einsum", [cur, cur], [out], equation="...i,...i->...i"))
        elif op == "Pad":  # constant pads, maybe negative, in any mode
            pads = f"p{i}"
            inits.append(numpy_helper.from_array(
                np.array([draw(st.integers(-1, 2)) for _ in range(2 * rank)], np.int64), pads))
            nodes.append(helper.make_node("Pad", [cur, pads], [out],
                                          mode=draw(st.sampled_from(["constant", "reflect", "edge"]))))
        elif op == "PadFromShape":  # pads computed from the input's shape: folded before shape inference knows them
            one = f"one{i}"
            inits.append(numpy_helper.from_array(np.array(draw(st.integers(0, 1)), np.int64), one))
            nodes += [helper.make_node("Shape", [cur], [f"{out}s"]),
                      helper.make_node("Sub", [f"{out}s", f"{out}s"], [f"{out}z"]),
                      helper.make_node("Add", [f"{out}z", one], [f"{out}o"]),
                      helper.make_node("Concat", [f"{out}z", f"{out}o"], [f"{out}p"], axis=0),
                      helper.make_node("Pad", [cur, f"{out}p"], [out])]
        elif op == "Resize":
            scales = f"r{i}"
            inits.append(numpy_helper.from_array(
                np.array([1.0] * (rank - 2) + [draw(st.sampled_from([1.0, 1.5, 2.0, 3.0])) for _ in range(2)],
                         np.float32), scales))
            nodes.append(helper.make_node("Resize", [cur, "", scales], [out],
                                          mode=draw(st.sampled_from(["nearest", "linear", "cubic"]))))
        elif op == "Concat":
            nodes.append(helper.make_node("Concat", [cur, cur], [out], axis=draw(st.integers(-rank, rank - 1))))
        elif op in ("Mul", "Sub"):  # of itself, a scalar or a constant tensor; a Sub's operands either way round
            other = draw(st.sampled_from(["self", "scalar", "tensor"]))
            if other != "self":
                c = f"c{i}"
                inits.append(numpy_helper.from_array(
                    np.ones(() if other == "scalar" else (draw(small),), np.float32), c))
            pair = [cur, cur if other == "self" else c]
            nodes.append(helper.make_node(op, pair[::-1] if op == "Sub" and draw(st.booleans()) else pair, [out]))
        elif op == "Expand":  # a reduced copy (or the activation) expanded to a shape of any fit, times the activation
            shape, src = f"e{i}", draw(st.sampled_from(["reduced", "self"]))
            inits.append(numpy_helper.from_array(np.array(draw(st.lists(st.integers(1, 6), min_size=1, max_size=rank)),
                                                          np.int64), shape))
            if src == "reduced":
                nodes.append(helper.make_node("ReduceMean", [cur], [f"{out}r"], axes=[-1], keepdims=1))
            nodes += [helper.make_node("Expand", [f"{out}r" if src == "reduced" else cur, shape], [f"{out}e"]),
                      helper.make_node("Mul", [cur, f"{out}e"] if draw(st.booleans()) else [f"{out}e", cur], [out])]
        elif op == "Clip":  # bounds: numbers in any order (NaN, infinities too), left out, or the activation itself
            names = []
            for j, bound in enumerate(draw(st.lists(st.sampled_from([-1.0, 0.0, 6.0, float("inf"), float("nan"),
                                                                      "self", "empty"]), max_size=2))):
                if bound == "self" or bound == "empty":
                    names.append(cur if bound == "self" else "")
                    continue
                inits.append(numpy_helper.from_array(np.array(bound, np.float32), f"b{i}_{j}"))
                names.append(f"b{i}_{j}")
            nodes.append(helper.make_node("Clip", [cur, *names], [out]))
        elif op == "Reduce":  # axes an attribute (older opsets) or an input, any of them, maybe the batch's
            red = draw(st.sampled_from(["ReduceSum", "ReduceMean", "ReduceMax"]))
            axes = draw(st.lists(st.integers(-rank, rank - 1), max_size=3))
            if draw(st.booleans()):
                given_axes = {"axes": axes} if axes else {}  # none: every axis
                nodes.append(helper.make_node(red, [cur], [out], keepdims=draw(st.integers(0, 1)), **given_axes))
            else:
                ax = f"a{i}"
                inits.append(numpy_helper.from_array(np.array(axes, np.int64), ax))
                nodes.append(helper.make_node(red, [cur, ax], [out], keepdims=draw(st.integers(0, 1))))
        else:
            nodes.append(helper.make_node(op, [cur], [out]))
        cur = out
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info(cur, TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", draw(st.sampled_from([11, 13, 18, 23])))])
    return model.SerializeToString(), draw(st.sampled_from(["error", "approx"]))


@FUZZ
@given(onnx_graphs())
def test_onnx_reader(graph):
    """Any chain of these operators: a layer list whose every layer passes its kind's bounds (stand-ins marked, a
    linear stand-in never the loss head), or a ThorError."""
    from thor_sdk.layers.kinds import get_kind
    from thor_sdk.layers.onnx_import import layers_from_onnx

    data, unknown_ops = graph
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "g.onnx")
        with open(path, "wb") as f:
            f.write(data)
        try:
            ml = layers_from_onnx(path, unknown_ops=unknown_ops)
        except ThorError as e:
            event(type(e).__name__)
            return
    event("read")
    assert ml.layers
    for layer in ml.layers:
        get_kind(layer["kind"]).check_config(layer["config"])
        assert "approx" not in layer or unknown_ops == "approx"
    assert ml.layers[-1]["kind"] != "output" or "approx" not in ml.layers[-1]


def test_an_overhead_near_the_float_range_is_refused_not_an_overflow():
    """Found by test_estimator_reader: a mean function's overhead of 1.96e295 made the whole-model term's square
    raise OverflowError (a float ** 2 raises where a product gives inf); now a UsageError, as every too-large
    estimate is."""
    import pytest

    from thor_sdk.errors import UsageError
    from thor_sdk.runtime import load_estimator

    doc = json.loads(GOOD_ESTIMATOR.read_text())
    doc["kinds"]["conv2d"]["mean_function"]["overhead"] = 1.9630793e+295
    est = load_estimator(doc)
    with pytest.raises(UsageError, match="too large to represent"):
        est.estimate(_good_layers(), 4)
    with pytest.raises(UsageError, match="too large to represent"):
        est.estimate(_good_layers(), 4, level={"level": 1.0, "log_std": 0.01})


# ----------------------------------------------------------------------------- an estimator's cross-validation record
GOOD_CV = {"cross_validation": {"folds": 5, "seed": 0,
                                "kinds": {"relu": {"n": 60, "heldout": 58, "nonpositive": 2, "mape": 3.1,
                                                   "median_ape": 2.2, "median_ln": -0.01, "covered95": 0.97}},
                                "pooled": {"heldout": 58, "mape": 3.1, "median_ape": 2.2, "covered95": 0.97}}}


@FUZZ
@given(mutated_docs(GOOD_CV) | JSON_VALUES)
@example(GOOD_CV)
def test_cross_validation_record_reader(provenance):
    """``evaluate``'s summary of ``provenance.cross_validation`` (free-form in the format): None or finite figures
    in range, never an error."""
    from thor_sdk.evaluate.unseen import kind_cv_summary

    got = kind_cv_summary(provenance)
    event("read" if got else "none")
    if got is not None:
        assert _finite_numbers(got) and 0 <= got["covered95"] <= 1 and got["mape"] >= 0 and got["heldout"] >= 0
        assert isinstance(got["folds"], int) and isinstance(got["kinds"], int)
        json.dumps(got, allow_nan=False)
