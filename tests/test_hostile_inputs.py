"""Hostile inputs through the real CLI, in-process: every reader and option rejects each with one `Error:` line,
exit 2, no traceback, nothing written, quickly; the clean-rejection rate is counted and printed."""

import contextlib
import copy
import csv
import io
import json
import os
import signal
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "check"
GOOD_ESTIMATOR = EXAMPLE / "synthetic-phone-time.json"
GOOD_LAYERS = EXAMPLE / "example_cnn.layers.json"
#: a case slower than this (seconds) is a hang: interrupted and counted as not rejected cleanly
HANG_S = 10.0
#: a case slower than this (seconds) is not clean either: every rejection comes before any real work
SLOW_CASE_S = 3.0
#: an error line longer than this buries its reason (e.g. a schema message quoting the whole input)
MAX_ERROR_CHARS = 1000

POWER_HEADER = ["dataset", "network", "batch_size", "optimizer", "power_limit", "time_per_epoch", "average_power"]
POWER_ROWS = [["toy", "net", b, "sgd", pl, t, p] for b, pl, t, p in
              [(8, 100, 3.0, 90.0), (8, 150, 2.0, 120.0), (8, 200, 1.5, 140.0),
               (32, 100, 2.0, 100.0), (32, 150, 1.2, 145.0), (32, 200, 1.0, 190.0)]]
TRAIN_HEADER = ["dataset", "network", "batch_size", "optimizer", "learning_rate", "run", "target_metric",
                "target_epoch"]
TRAIN_ROWS = [["toy", "net", b, "sgd", "0.1", r, 0.5, e] for b, runs in
              {8: {0: 10, 1: 11, 2: 12, 3: 10}, 32: {0: 4, 1: 5, 2: 4, 3: 5}}.items() for r, e in runs.items()]
SAMPLES_HEADER = ["kind", "role", "batch_size", "time_s", "in_features", "out_features", "tokens", "bias"]
SAMPLES_ROWS = [["linear", "hidden", b, f"{1e-4 * b * n / 64:.6g}", n, n, 1, 1]
                for b in (8, 16, 32) for n in (32, 64, 128)]


# ----------------------------------------------------------------------------- good inputs, mutated
def good_estimator():
    return json.loads(GOOD_ESTIMATOR.read_text())


def good_layers():
    return json.loads(GOOD_LAYERS.read_text())


def good_table():
    rows = [{"batch_size": b, "freq_hz": f, "time_per_sample_s": t, "peak_power_w": p, "mean_power_w": p * 0.8}
            for b, f, t, p in [(16, 306000000, 0.0039, 1.9), (16, 918000000, 0.0013, 3.8),
                               (64, 306000000, 0.0024, 2.5), (64, 918000000, 0.0008, 5.5)]]
    return {"format": "thor-sdk/power-table", "version": 1, "simulated": True, "knob": "gpu_freq_hz",
            "model": "mlp", "device": {"name": "sim"}, "power_metric": "peak", "reference_batch_size": 64,
            "reference_samples_to_target": 1000.0, "reference_samples_source": "given", "target_accuracy": 0.9,
            "created_by": "tests", "sources": {"notes": []}, "rows": rows,
            "ratios": [{"batch_size": 16, "ratio": 0.8}, {"batch_size": 64, "ratio": 1.0}]}


def kind0(doc):
    """The first kind model of an estimator document."""
    return next(iter(doc["kinds"].values()))


def raw_json_variants(good_text):
    """(label, bytes or an int: a sparse file of that size) of malformed JSON files, from a good file's text."""
    g = good_text.encode()
    deep = b'{"a": ' + b"[" * 100000 + b"]" * 100000 + b"}"
    deep_obj = b'{"a": ' + b'{"b": ' * 3000 + b"1" + b"}" * 3000 + b"}"
    return [
        ("empty", b""), ("whitespace", b"  \n\t "), ("null", b"null"), ("array", b"[]"), ("number", b"3"),
        ("string", b'"x"'), ("truncated", g[: len(g) // 2]), ("trailing garbage", g + b"}}"),
        ("utf16 bom", good_text.encode("utf-16")), ("utf16le no bom", good_text.encode("utf-16-le")),
        ("utf32", good_text.encode("utf-32")),
        ("latin1 byte", g.replace(b'"', b'"\xe9', 1)), ("lone continuation byte", b"\x80" + g),
        ("nul byte", g[:20] + b"\x00" + g[20:]), ("nul in string", g.replace(b'"', b'"\x00', 2)),
        ("deep arrays", deep), ("deep objects", deep_obj),
        ("nested 300", b'{"a": ' + b"[" * 300 + b"]" * 300 + b"}"),
        ("binary", bytes(range(256)) * 4),
        ("python literals", g[:-1] + b', "x": True}'),
        ("single quotes", g.replace(b'"', b"'")),
        ("duplicate top-level key", b'{"version": 0, ' + g[1:]),
        ("over the size cap (sparse 70 MiB)", 70 * 2 ** 20),
        ("duplicate nested key", g.replace(b'": {', b'": {"x": 1, "x": 2, ', 1)),
    ]


def number_variants():
    """(label, JSON text) of numbers no reader may take as a value."""
    return [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"), ("1e400", "1e400"),
            ("-1e400", "-1e400"), ("400 digits", "9" * 400), ("5000 digits", "1" + "0" * 4999)]


def with_token(doc, path, token):
    """``doc`` as JSON text with the value at ``path`` replaced by the raw JSON ``token``."""
    d = copy.deepcopy(doc)
    target = d
    for p in path[:-1]:
        target = target[p]
    target[path[-1]] = "@@TOKEN@@"
    return json.dumps(d).replace('"@@TOKEN@@"', token)


def mutated(doc, fn):
    d = copy.deepcopy(doc)
    fn(d)
    return json.dumps(d)


def setter(path, value):
    def fn(d):
        t = d
        for p in path[:-1]:
            t = t[p]
        if value is DELETE:
            del t[path[-1]]
        else:
            t[path[-1]] = value
    return fn


DELETE = object()


def csv_text(header, rows):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def raw_csv_variants(header, rows):
    """(label, bytes or an int: a sparse file of that size) of malformed encodings and structures of a CSV file."""
    good = csv_text(header, rows)
    g = good.encode()
    return [
        ("empty", b""), ("header only", csv_text(header, []).encode()), ("blank lines", b"\n\n\n"),
        ("utf16 bom", good.encode("utf-16")), ("utf16le no bom", good.encode("utf-16-le")),
        ("utf32", good.encode("utf-32")),
        ("latin1 byte", g.replace(b"\n", b"\xe9\n", 2)), ("nul byte", g[:10] + b"\x00" + g[10:]),
        ("nul in row", g.replace(b"\n", b"\n\x00", 2)),
        ("over the size cap (sparse 70 MiB)", 70 * 2 ** 20),
        ("field over the csv limit", csv_text(header, [rows[0][:-1] + ["x" * 140000]] + rows[1:]).encode()),
        ("binary", bytes(range(256)) * 4),
        ("unterminated quote", g.replace(b"\n", b'\n"', 2)),
        ("duplicate column", csv_text(header + [header[2]], [r + [r[2]] for r in rows]).encode()),
        ("duplicate first column", csv_text([header[0]] + header, [[r[0]] + r for r in rows]).encode()),
        ("missing column", csv_text(header[:1] + header[3:], [r[:1] + r[3:] for r in rows]).encode()),
        ("too many fields", csv_text(header, [rows[0] + ["extra", "more"]] + rows[1:]).encode()),
        ("too few fields", csv_text(header, [rows[0][:2]] + rows[1:]).encode()),
    ]


def csv_cell(header, rows, column, value, row=0):
    i = header.index(column)
    rows = [list(r) for r in rows]
    rows[row][i] = value
    return csv_text(header, rows).encode()


# ----------------------------------------------------------------------------- the cases
def estimator_cases():
    """(label, estimator text or bytes) of hostile estimator files."""
    doc = good_estimator()
    kname = next(iter(doc["kinds"]))
    kp = ["kinds", kname]
    cases = [(f"raw {label}", data) for label, data in raw_json_variants(json.dumps(doc))]
    for label, tok in number_variants():
        for path in (kp + ["mean_function", "overhead"], kp + ["kernel", "constant"], kp + ["residual_offset"],
                     kp + ["n_samples"], ["whole_model", "rel_std"], ["flops_baseline", "unit_per_flop"]):
            cases.append((f"{'.'.join(map(str, path[2:] if path[0] == 'kinds' else path))} = {label}",
                          with_token(doc, path, tok)))
        cases.append((f"x_mean[0] = {label}", with_token(doc, kp + ["x_mean", 0], tok)))
        cases.append((f"alpha[0] = {label}", with_token(doc, kp + ["alpha", 0], tok)))
    nd = len(kind0(doc)["features"])
    m = len(kind0(doc)["inducing"])
    muts = {
        "format wrong": setter(["format"], "thor-sdk/layers"), "no format": setter(["format"], DELETE),
        "version 1": setter(["version"], 1), "version '2'": setter(["version"], "2"),
        "version true": setter(["version"], True), "version 2.5": setter(["version"], 2.5),
        "metric power": setter(["metric"], "power"), "unit mismatch": setter(["unit"], "J"),
        "kinds empty": setter(["kinds"], {}), "kinds list": setter(["kinds"], []),
        "kind not object": setter(kp, [1, 2]), "features empty": setter(kp + ["features"], []),
        "features duplicate": lambda d: kind0(d)["features"].__setitem__(1, kind0(d)["features"][0]),
        "features numbers": setter(kp + ["features"], list(range(nd))),
        "feature_transform log": setter(kp + ["feature_transform"], "log"),
        "mean_function missing": setter(kp + ["mean_function"], DELETE),
        "overhead 0": setter(kp + ["mean_function", "overhead"], 0), "overhead -1": setter(kp + ["mean_function", "overhead"], -1),
        "overhead string": setter(kp + ["mean_function", "overhead"], "1e-3"),
        "overhead true": setter(kp + ["mean_function", "overhead"], True),
        "per_flop -1": setter(kp + ["mean_function", "per_flop"], -1.0),
        "per_byte -1e-9": setter(kp + ["mean_function", "per_byte"], -1e-9),
        "nu 1.5": setter(kp + ["kernel", "nu"], 1.5), "kernel missing": setter(kp + ["kernel"], DELETE),
        "x_mean short": setter(kp + ["x_mean"], [0.0] * (nd - 1)), "x_scale 0": setter(kp + ["x_scale"], [0.0] * nd),
        "x_scale negative": setter(kp + ["x_scale"], [-1.0] * nd),
        "length_scale 1e-300": setter(kp + ["kernel", "length_scale"], [1e-300] * nd),
        "length_scale 0": setter(kp + ["kernel", "length_scale"], [0.0] * nd),
        "length_scale 1e300": setter(kp + ["kernel", "length_scale"], [1e300] * nd),
        "length_scale long": setter(kp + ["kernel", "length_scale"], [1.0] * (nd + 3)),
        "constant 0": setter(kp + ["kernel", "constant"], 0.0), "constant 1e10": setter(kp + ["kernel", "constant"], 1e10),
        "noise -1": setter(kp + ["kernel", "noise_level"], -1.0),
        "residual_offset 1000": setter(kp + ["residual_offset"], 1000.0),
        "inducing empty": setter(kp + ["inducing"], []), "inducing ragged": setter(kp + ["inducing"], [[0.0]] * m),
        "inducing strings": setter(kp + ["inducing"], [["a"] * nd] * m),
        "inducing 5000 rows": setter(kp + ["inducing"], [[0.0] * nd] * 5000),
        "inducing 600 rows": lambda d: kind0(d).update(inducing=[[0.01 * i] * nd for i in range(600)],
                                                      alpha=[0.0] * 600, var_factor=[[0.0] * 600]),
        "var_factor 600 rows": lambda d: kind0(d).update(var_factor=[[0.0] * m] * 600),
        "1.2 million model numbers": lambda d: d["kinds"].update(
            {f"k{i}": dict(kind0(d), inducing=[[0] * nd] * 512, alpha=[0] * 512, var_factor=[[0] * 512] * 64)
             for i in range(30)}),
        "alpha short": setter(kp + ["alpha"], [0.0] * (m - 1)), "alpha 1e300": setter(kp + ["alpha"], [1e300] * m),
        "var_factor wide": setter(kp + ["var_factor"], [[0.0] * (m + 1)]),
        "var_factor empty": setter(kp + ["var_factor"], []),
        "n_samples 0": setter(kp + ["n_samples"], 0), "n_samples 1.5": setter(kp + ["n_samples"], 1.5),
        "n_samples true": setter(kp + ["n_samples"], True),
        "rel_std -1": setter(["whole_model", "rel_std"], -1.0), "rel_std 100": setter(["whole_model", "rel_std"], 100.0),
        "rel_std string": setter(["whole_model", "rel_std"], "x"), "whole_model list": setter(["whole_model"], [1]),
        "flops_baseline missing": setter(["flops_baseline"], DELETE),
        "unit_per_flop string": setter(["flops_baseline", "unit_per_flop"], "x"),
        "device string": setter(["device"], "phone"), "runtime number": setter(["runtime"], 3),
    }
    cases += [(label, mutated(doc, fn)) for label, fn in muts.items()]
    return cases


def layer_list_cases():
    doc = good_layers()
    cases = [(f"raw {label}", data) for label, data in raw_json_variants(json.dumps(doc))]
    conv = ["layers", 0, "config"]
    for label, tok in number_variants():
        cases.append((f"conv out_channels = {label}", with_token(doc, conv + ["out_channels"], tok)))
        cases.append((f"input_shape[1] = {label}", with_token(doc, ["input_shape", 1], tok)))
        cases.append((f"cost flops_per_sample = {label}", with_token(doc, ["layers", 0, "cost", "flops_per_sample"], tok)))
    lin = next(i for i, l in enumerate(doc["layers"]) if l["kind"] in ("linear", "output"))
    muts = {
        "format wrong": setter(["format"], "thor-sdk/estimator"), "version 2": setter(["version"], 2),
        "layers empty": setter(["layers"], []), "layers object": setter(["layers"], {}),
        "kind unknown": setter(["layers", 0, "kind"], "conv9d"), "kind number": setter(["layers", 0, "kind"], 7),
        "config missing": setter(["layers", 0, "config"], DELETE),
        "config feature missing": setter(conv + ["kernel"], DELETE),
        "out_channels 0": setter(conv + ["out_channels"], 0), "out_channels -1": setter(conv + ["out_channels"], -1),
        "out_channels 1e12": setter(conv + ["out_channels"], 1e12), "out_channels 16.5": setter(conv + ["out_channels"], 16.5),
        "out_channels string": setter(conv + ["out_channels"], "16"),
        "out_channels true": setter(conv + ["out_channels"], True),
        "kernel larger than input": setter(conv + ["kernel"], 99),
        "height 99999999999": setter(conv + ["height"], 99999999999),
        "groups not dividing": setter(conv + ["groups"], 5), "bias 2": setter(conv + ["bias"], 2),
        "linear out_features 0": setter(["layers", lin, "config", "out_features"], 0),
        "role sideways": setter(["layers", 0, "role"], "sideways"), "role Input": setter(["layers", 0, "role"], "Input"),
        "role output first": setter(["layers", 0, "role"], "output"),
        "input_shape [0]": setter(["input_shape"], [0]), "input_shape [-3]": setter(["input_shape"], [-3]),
        "input_dtype float64": setter(["input_dtype"], "float64"),
        "cost negative": setter(["layers", 0, "cost", "flops_fixed"], -1.0),
        "cost 1e300 per sample": setter(["layers", 0, "cost", "flops_per_sample"], 1e300),
        "layer not object": setter(["layers", 0], "conv2d"),
        "name number": setter(["name"], 5),
        "5000 distinct layers": lambda d: d.update(layers=[{"kind": "relu", "config": {"numel": 100 + i}}
                                                           for i in range(5000)] + d["layers"][-1:]),
    }
    cases += [(label, mutated(doc, fn)) for label, fn in muts.items()]
    return cases


def samples_cases():
    h, rows = SAMPLES_HEADER, SAMPLES_ROWS
    cases = [(f"raw {label}", data) for label, data in raw_csv_variants(h, rows)]
    for col, values in {
        "role": ["Input", "sideways", "HIDDEN", "output", "1"],
        "batch_size": ["0", "-1", "16.7", "1e12", "x", "nan", "inf", ""],
        "time_s": ["1e308", "nan", "inf", "-inf", "-1e-3", "x", "", "1e400", "0x10"],
        "in_features": ["0", "-1", "nan", "inf", "1e400", "x", "", "2.5", "1e12"],
        "kind": ["conv9d", "", "Linear"],
        "bias": ["2", "0.5"],
    }.items():
        for v in values:
            cases.append((f"{col} = {v!r}", csv_cell(h, rows, col, v, row=3)))
    cases.append(("no metric columns", csv_text(h[:3] + h[4:], [r[:3] + r[4:] for r in rows]).encode()))
    return cases


def table_cases():
    doc = good_table()
    cases = [(f"raw {label}", data) for label, data in raw_json_variants(json.dumps(doc))]
    for label, tok in number_variants():
        for key in ("batch_size", "freq_hz", "time_per_sample_s", "peak_power_w"):
            cases.append((f"rows[0].{key} = {label}", with_token(doc, ["rows", 0, key], tok)))
        cases.append((f"ratio = {label}", with_token(doc, ["ratios", 0, "ratio"], tok)))
    muts = {
        "format wrong": setter(["format"], "thor-sdk/layers"), "version 2": setter(["version"], 2),
        "rows empty": setter(["rows"], []), "ratios empty": setter(["ratios"], []),
        "duplicate (batch, freq) row": lambda d: d["rows"].append(dict(d["rows"][0], peak_power_w=0.5)),
        "duplicate ratio": lambda d: d["ratios"].append({"batch_size": 16, "ratio": 0.2}),
        "batch 0": setter(["rows", 0, "batch_size"], 0), "batch 16.5": setter(["rows", 0, "batch_size"], 16.5),
        "freq -1": setter(["rows", 0, "freq_hz"], -1), "time 0": setter(["rows", 0, "time_per_sample_s"], 0),
        "peak -1": setter(["rows", 0, "peak_power_w"], -1.0), "peak string": setter(["rows", 0, "peak_power_w"], "1"),
        "ratio 0": setter(["ratios", 0, "ratio"], 0), "ratio -1": setter(["ratios", 0, "ratio"], -1.0),
        "ratio batch 0": setter(["ratios", 0, "batch_size"], 0),
        "no ratio matches a row": setter(["ratios"], [{"batch_size": 7, "ratio": 1.0}]),
        "row not object": setter(["rows", 0], [16, 1, 2, 3]),
        "reference_samples_to_target -5": setter(["reference_samples_to_target"], -5.0),
    }
    cases += [(label, mutated(doc, fn)) for label, fn in muts.items()]
    return cases


def trace_cases():
    """(label, power trace bytes, train trace bytes)."""
    pg, tg = csv_text(POWER_HEADER, POWER_ROWS).encode(), csv_text(TRAIN_HEADER, TRAIN_ROWS).encode()
    cases = [(f"power {label}", data, tg) for label, data in raw_csv_variants(POWER_HEADER, POWER_ROWS)]
    cases += [(f"train {label}", pg, data) for label, data in raw_csv_variants(TRAIN_HEADER, TRAIN_ROWS)]
    for col, values in {"batch_size": ["0", "-8", "16.7", "x", "nan", "1e12"],
                        "power_limit": ["nan", "inf", "-1", "0", "1e400", "x"],
                        "time_per_epoch": ["nan", "inf", "0", "-1", "1e308"],
                        "average_power": ["nan", "inf", "-5", "x"]}.items():
        for v in values:
            cases.append((f"power {col} = {v!r}", csv_cell(POWER_HEADER, POWER_ROWS, col, v), tg))
    for col, values in {"batch_size": ["0", "16.7", "x"], "run": ["x", "1.5", "-1", "1e400"],
                        "target_metric": ["inf", "x", "1e400"], "target_epoch": ["-1", "x", "inf", "0"]}.items():
        for v in values:
            cases.append((f"train {col} = {v!r}", pg, csv_cell(TRAIN_HEADER, TRAIN_ROWS, col, v)))
    return cases


def budgets_cases():
    good = (f'version = 1\nestimators = ["{GOOD_ESTIMATOR}"]\n\n[[models]]\nmodel = "{GOOD_LAYERS}"\n'
            'batch_size = 16\nsamples = 100\nbudget_s = 100.0\n')
    g = good.encode()
    return [
        ("empty", b""), ("utf16 bom", good.encode("utf-16")), ("latin1 byte", g.replace(b"\n", b"# \xe9\n", 1)),
        ("nul byte", g[:5] + b"\x00" + g[5:]), ("deep arrays", b"a = " + b"[" * 50000 + b"]" * 50000),
        ("400 digits", g.replace(b"samples = 100", b"samples = " + b"9" * 400)),
        ("batch_size 0", g.replace(b"batch_size = 16", b"batch_size = 0")),
        ("batch_size 16.7", g.replace(b"batch_size = 16", b"batch_size = 16.7")),
        ("budget nan", g.replace(b"budget_s = 100.0", b"budget_s = nan")),
        ("budget inf", g.replace(b"budget_s = 100.0", b"budget_s = inf")),
        ("budget -1", g.replace(b"budget_s = 100.0", b"budget_s = -1.0")),
        ("no budget", g.replace(b"budget_s = 100.0", b"")),
        ("confidence 2", g.replace(b"version = 1", b"version = 1\nconfidence = 2.0")),
        ("unknown key", g.replace(b"batch_size = 16", b"batch_size = 16\nbatchsize = 4")),
        ("not toml", b"[[models]\nmodel ="),
        ("estimator missing", g.replace(str(GOOD_ESTIMATOR).encode(), b"/nonexistent/e.json")),
        ("utf16le no bom", good.encode("utf-16-le")), ("over the size cap (sparse 70 MiB)", 70 * 2 ** 20),
        ("deep tables", b"a = " + b"{b = " * 3000 + b"1" + b"}" * 3000),
    ]


def option_cases():
    """(label, argv, outputs: file names under the case folder that must not be written)."""
    est, lay = str(GOOD_ESTIMATOR), str(GOOD_LAYERS)
    cases = []
    for b in ["0", "-1", "16.7", "x", "1000000000000", "nan", ""]:
        cases.append((f"estimate --batch-size {b!r}", ["estimate", "--estimator", est, "--model", lay,
                                                      "--batch-size", b, "--json"], []))
        cases.append((f"check --batch-size {b!r}", ["check", "--estimator", est, "--model", lay, "--batch-size", b,
                                                   "--samples", "100", "--budget-s", "10", "--junit", "{d}/j.xml"],
                      ["j.xml"]))
    check = ["check", "--estimator", est, "--model", lay, "--batch-size", "16", "--junit", "{d}/j.xml"]
    for opt, values in {"--samples": ["0", "-5", "x", "1e3"], "--epochs": ["0", "-1", "2.5"],
                        "--budget-s": ["nan", "inf", "-1", "x"], "--budget-j": ["nan", "-inf"],
                        "--confidence": ["nan", "1.5", "0", "-0.5", "1"]}.items():
        for v in values:
            extra = [] if opt.startswith("--budget") else ["--budget-s", "10"]
            cases.append((f"check {opt} {v}", check + ["--samples", "100", opt, v] + extra
                          if opt != "--samples" else check + [opt, v, "--budget-s", "10"], ["j.xml"]))
    for shape in ["0,3", "3,-1", "a,b", "", "4,99999999999", "1,1,1,1,1,1,1,1,1,1,1,1,1", "3x0", "nan"]:
        cases.append((f"layers --input-shape {shape!r}", ["layers", "{d}/net.py:Net", "--input-shape", shape,
                                                          "--out", "{d}/l.json"], ["l.json"]))
        cases.append((f"estimate --input-shape {shape!r}", ["estimate", "--estimator", est, "--model",
                                                            "{d}/net.py:Net", "--input-shape", shape], []))
    measure = ["measure", "--model", "har", "--batch-size", "2"]  # (--out names an existing campaign)
    for opt, values in {"--window-s": ["nan", "inf", "0", "-1", "1e9"], "--min-rounds": ["0", "-1"],
                        "--max-rounds": ["0", "-3"], "--cv-target": ["nan", "-1", "inf"], "--threads": ["0", "-2"],
                        "--batch-size": ["0", "-4", "1000000000000"]}.items():
        for v in values:
            cases.append((f"measure {opt} {v}", measure + [opt, v], []))
    for meter in ["external:{d}/log.csv,offset=1e999", "external:{d}/log.csv,offset=-1e10", "external:", "rapl9"]:
        cases.append((f"measure --meter {meter}", measure + ["--metric", "energy", "--meter", meter], []))
    cases.append(("measure min-rounds > max-rounds", measure + ["--min-rounds", "9", "--max-rounds", "3"], []))
    cases.append(("measure --vocab 0", ["measure", "--model", "{d}/net.py:Net", "--input-shape", "8",
                                        "--input-dtype", "int64", "--vocab", "0"], []))
    probe = ["probe", "--model", "har", "--out", "{d}/p.db", "-q"]
    for opt, values in {"--batch-size": ["0", "-1", "1000000000000"], "--max-probes": ["0", "-1"],
                        "--max-seconds": ["nan", "-1", "0"], "--target-std": ["nan", "-0.1"],
                        "--window-s": ["nan", "-1"], "--min-rounds": ["0"], "--cv-target": ["nan"]}.items():
        for v in values:
            cases.append((f"probe {opt} {v}", probe + [opt, v], ["p.db"]))
    profile = ["profile", "--out", "{d}/pr.db", "-q", "--max-seconds", "60"]
    for opt, values in {"--max-seconds": ["nan", "-1", "inf"], "--reference-every": ["inf", "nan", "-5"],
                        "--kind": ["conv9d"], "--max-probes": ["0"], "--prior": ["{d}/prior.json"],
                        "--seed": ["-1", "99999999999999"], "--calibration-model": ["nonet"],
                        "--target-std": ["nan", "0"]}.items():
        for v in values:
            cases.append((f"profile {opt} {v}", profile + [opt, v], ["pr.db"]))
    export = ["export", "--model", "har", "--format", "onnx", "--out", "{d}/x.onnx"]
    for opt, values in {"--lr": ["nan", "inf", "-0.1", "0", "1e300"], "--batch-size": ["0", "-1", "1000000000000"]}.items():
        for v in values:
            cases.append((f"export {opt} {v}", export + [opt, v], ["x.onnx"]))
    return cases


def replay_option_cases():
    """(label, extra argv) for `table replay` on good traces."""
    out = []
    for v in ["1e-9", "0", "-1", "nan", "inf", "1e-300"]:
        out.append((f"--cap-step {v}", ["--cap-step", v]))
    for v in ["0", "-1", "1000000000"]:
        out.append((f"--splits {v}", ["--splits", v]))
    for v in ["toy=nan", "toy=inf", "=1", "toy", "toy=0.123"]:
        out.append((f"--target {v}", ["--target", v]))
    return out


def power_option_cases():
    """(label, argv, outputs) of the power commands' options (table select/profile/ratios, train)."""
    cases = []
    for v in ["nan", "-1", "0", "x", "-inf"]:
        cases.append((f"table select --power-cap {v}", ["table", "select", "{d}/t.json", "--power-cap", v], []))
    tp = ["table", "profile", "--device", "sim", "--sysfs-root", "{d}/sys", "--out", "{d}/tp.db", "-q"]
    for opt, values in {"--steps": ["0", "-1"], "--batch-sizes": ["0,8", "x", "16.7", "", "-8", "8,8"],
                        "--power-cap": ["nan", "-1", "0"]}.items():
        for v in values:
            cases.append((f"table profile {opt} {v!r}", tp + [opt, v], ["tp.db"]))
    tr = ["table", "ratios", "--out", "{d}/r.json", "-q", "--proxy", "synthetic"]
    for opt, values in {"--target-accuracy": ["2", "nan", "0", "-0.5"], "--seeds": ["x", "", "1.5", "-1"],
                        "--base-lr": ["nan", "0", "-1", "inf"], "--max-epochs": ["0", "-1"],
                        "--batch-sizes": ["0,8", "x"]}.items():
        for v in values:
            cases.append((f"table ratios {opt} {v!r}", tr + [opt, v], ["r.json"]))
    train = ["train", "--device", "host", "--out", "{d}/run.json", "--data", "synthetic", "--max-epochs", "1"]
    for opt, values in {"--power-cap": ["nan", "-1"], "--base-lr": ["nan", "-1", "0"], "--max-epochs": ["0", "-1"],
                        "--batch-size": ["0", "-1"], "--target-accuracy": ["2", "nan"]}.items():
        for v in values:
            cases.append((f"train {opt} {v}", train + [opt, v], ["run.json"]))
    cases.append(("train --table hostile", train + ["--table", "{d}/t.json", "--power-cap", "5"], ["run.json"]))
    return cases


NET_PY = "class Net:\n    pass\n"


def all_cases():
    """Every hostile case: (id, setup(d) -> (argv, outputs))."""
    cases = []

    def add(cid, files, argv, outputs=()):
        cases.append((cid, files, argv, list(outputs)))

    for label, data in estimator_cases():
        add(f"estimator/estimate: {label}", {"e.json": data},
            ["estimate", "--estimator", "{d}/e.json", "--model", str(GOOD_LAYERS), "--batch-size", "4", "--json"])
    for label, data in estimator_cases()[::3]:  # the check command reads it too (exit 2: not the verdict)
        add(f"estimator/check: {label}", {"e.json": data},
            ["check", "--estimator", "{d}/e.json", "--model", str(GOOD_LAYERS), "--batch-size", "16",
             "--samples", "100", "--budget-s", "10", "--junit", "{d}/j.xml"], ["j.xml"])
    for label, data in layer_list_cases():
        add(f"layer list/estimate: {label}", {"l.json": data},
            ["estimate", "--estimator", str(GOOD_ESTIMATOR), "--model", "{d}/l.json", "--batch-size", "4", "--json"])
    for label, data in layer_list_cases()[::2]:
        add(f"layer list/layers: {label}", {"l.json": data}, ["layers", "{d}/l.json", "--out", "{d}/out.json"],
            ["out.json"])
    for label, data in samples_cases():
        add(f"samples csv/fit: {label}", {"s.csv": data}, ["fit", "--samples", "{d}/s.csv", "--out", "{d}/est.json"],
            ["est.json"])
    for label, data in table_cases():
        add(f"power table/select: {label}", {"t.json": data},
            ["table", "select", "{d}/t.json", "--power-cap", "5", "--json"])
    for label, pdata, tdata in trace_cases():
        add(f"traces/replay: {label}", {"p.csv": pdata, "t.csv": tdata},
            ["table", "replay", "--power-trace", "{d}/p.csv", "--train-trace", "{d}/t.csv", "--json", "-q"])
    for label, data in budgets_cases():
        add(f"budgets/check: {label}", {"b.toml": data}, ["check", "--budgets", "{d}/b.toml", "--junit", "{d}/j.xml"],
            ["j.xml"])
    good_traces = {"p.csv": csv_text(POWER_HEADER, POWER_ROWS).encode(),
                   "t.csv": csv_text(TRAIN_HEADER, TRAIN_ROWS).encode()}
    for label, extra in replay_option_cases():
        add(f"options/table replay {label}", good_traces,
            ["table", "replay", "--power-trace", "{d}/p.csv", "--train-trace", "{d}/t.csv", "--json", "-q", *extra])
    prior_bad = b'{"format": "thor-sdk/prior", "version": 1, "kinds": {"linear": NaN}}'
    for label, data in [("garbage", b"garbage\x00\xff" * 10), ("empty", b""), ("text", b"x" * 100),
                        ("utf16 text", "not onnx".encode("utf-16"))]:
        add(f"onnx/estimate: {label}", {"m.onnx": data},
            ["estimate", "--estimator", str(GOOD_ESTIMATOR), "--model", "{d}/m.onnx", "--batch-size", "4"])
    for label, argv, outputs in option_cases():
        add(f"options/{label}", {"net.py": NET_PY.encode(), "prior.json": prior_bad}, argv, outputs)
    bad_table = mutated(good_table(), lambda d: d["rows"].append(dict(d["rows"][0])))
    for label, argv, outputs in power_option_cases():
        add(f"options/{label}", {"t.json": json.dumps(good_table()) if "select" in label else bad_table}, argv,
            outputs)
    return cases


# ----------------------------------------------------------------------------- running one case
class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def run_case(case, folder):
    """Run one case in ``folder``: a dict with the verdict ``clean`` and, when not, ``why``."""
    from thor_sdk.cli.main import main

    cid, files, argv, outputs = case
    folder.mkdir(parents=True)
    for name, data in files.items():
        if isinstance(data, int):  # a sparse file of that many bytes (zeros), made without writing them
            with open(folder / name, "wb") as f:
                f.truncate(data)
            continue
        (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    (folder / "sys").mkdir()
    argv = [a.replace("{d}", str(folder)) for a in argv]
    before = set(os.listdir(folder))
    out, err = io.StringIO(), io.StringIO()
    code, crash = 0, None
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, HANG_S)
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(argv)
    except SystemExit as e:
        code = e.code
    except Hang:
        crash = f"hang (over {HANG_S:g} s)"
    except BaseException as e:  # noqa: BLE001 - a traceback is what this suite looks for
        crash = f"traceback: {type(e).__name__}: {str(e)[:200]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    seconds = time.perf_counter() - t0
    lines = err.getvalue().strip().splitlines()
    errors = [line for line in lines if line.startswith("Error:")]
    written = sorted(set(os.listdir(folder)) - before)
    why = []
    if crash:
        why.append(crash)
    elif not code:
        why.append("accepted (exit 0)")
    elif code != 2:
        why.append(f"exit {code}, not 2 (a bad input; 1 is for work that failed, and check's over-budget verdict)")
    if not crash and code:
        if not lines or not lines[-1].startswith("Error:"):
            why.append(f"last stderr line is not 'Error:': {lines[-1:]!r}")
        if len(errors) != 1:
            why.append(f"{len(errors)} 'Error:' lines")
        if "Traceback" in err.getvalue():
            why.append("traceback on stderr")
        if errors and len(errors[-1]) > MAX_ERROR_CHARS:
            why.append(f"an error line of {len(errors[-1])} characters")
    bad_writes = [w for w in written if w in outputs or ".tmp" in w]
    if bad_writes:
        why.append(f"wrote {bad_writes}")
    if seconds > SLOW_CASE_S and not crash:
        why.append(f"slow ({seconds:.1f} s)")
    return {"id": cid, "clean": not why, "why": "; ".join(why), "seconds": seconds, "error": errors[-1:]}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """Every case run once: ``{id: outcome}``."""
    base = tmp_path_factory.mktemp("hostile")
    res = {}
    for i, case in enumerate(all_cases()):
        res[case[0]] = run_case(case, base / f"c{i}")
    return res


CASE_IDS = [c[0] for c in all_cases()]


def good_cases():
    """The unmutated inputs through the same commands: each must succeed, or every rejection above is moot."""
    budgets = (f'version = 1\nestimators = ["{GOOD_ESTIMATOR}"]\n\n[[models]]\nmodel = "{GOOD_LAYERS}"\n'
               'batch_size = 16\nsamples = 100\nbudget_s = 100.0\n')
    traces = {"p.csv": csv_text(POWER_HEADER, POWER_ROWS), "t.csv": csv_text(TRAIN_HEADER, TRAIN_ROWS)}
    return [
        ("estimate", {"e.json": GOOD_ESTIMATOR.read_text(), "l.json": GOOD_LAYERS.read_text()},
         ["estimate", "--estimator", "{d}/e.json", "--model", "{d}/l.json", "--batch-size", "4", "--json"], []),
        ("check", {"e.json": GOOD_ESTIMATOR.read_text()},
         ["check", "--estimator", "{d}/e.json", "--model", str(GOOD_LAYERS), "--batch-size", "16", "--samples", "100",
          "--budget-s", "10", "--junit", "{d}/j.xml"], ["j.xml"]),
        ("layers", {"l.json": GOOD_LAYERS.read_text()}, ["layers", "{d}/l.json", "--out", "{d}/out.json"], ["out.json"]),
        ("fit", {"s.csv": csv_text(SAMPLES_HEADER, SAMPLES_ROWS)},
         ["fit", "--samples", "{d}/s.csv", "--out", "{d}/est.json"], ["est.json"]),
        ("table select", {"t.json": json.dumps(good_table())}, ["table", "select", "{d}/t.json", "--power-cap", "5"], []),
        ("table replay", traces, ["table", "replay", "--power-trace", "{d}/p.csv", "--train-trace", "{d}/t.csv", "-q",
                                  "--cap-step", "10"], []),
        ("budgets", {"b.toml": budgets}, ["check", "--budgets", "{d}/b.toml", "--junit", "{d}/j.xml"], ["j.xml"]),
    ]


@pytest.mark.parametrize("case", good_cases(), ids=lambda c: c[0])
def test_good_inputs_are_accepted(case, tmp_path):
    """Control: the files every hostile case mutates are accepted as they are, and write their outputs."""
    o = run_case(case, tmp_path / "c")
    assert o["why"] == "accepted (exit 0)" or (o["why"].startswith("accepted (exit 0); wrote")), o
    for name in case[3]:
        assert (tmp_path / "c" / name).is_file()


def test_suite_is_large_and_ids_are_unique():
    assert len(CASE_IDS) >= 300
    assert len(set(CASE_IDS)) == len(CASE_IDS), [c for c in CASE_IDS if CASE_IDS.count(c) > 1]


@pytest.mark.parametrize("cid", CASE_IDS)
def test_rejected_cleanly(outcomes, cid):
    o = outcomes[cid]
    assert o["clean"], o["why"]


def test_clean_rejection_rate(outcomes, capsys):
    bad = [o for o in outcomes.values() if not o["clean"]]
    n = len(outcomes)
    rate = (n - len(bad)) / n
    total_s = sum(o["seconds"] for o in outcomes.values())
    with capsys.disabled():
        print(f"\nhostile inputs: {n - len(bad)}/{n} rejected cleanly ({rate:.1%}), {total_s:.1f} s in all")
        for o in bad:
            print(f"  NOT CLEAN {o['id']}: {o['why']}")
    assert not bad, f"{len(bad)} of {n} cases not rejected cleanly: " + "; ".join(
        f"{o['id']}: {o['why']}" for o in bad)
