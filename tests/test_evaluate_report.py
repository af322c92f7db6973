"""`thor-sdk evaluate --estimator ... --out DIR`: per-method results, the report files, and the HTML rendered by Chromium.

The estimator comes from a small profile of the fake device (planted costs through the real campaign, fit
and runtime code); the evaluation measures the fake device, so every number is deterministic.
"""

import json
import re
import shutil
import subprocess

import pytest

from fake_device import FakeDevice
from thor_sdk.api import fit, profile
from thor_sdk.campaign.prior import build_prior


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    from thor_sdk.evaluate import evaluate_unseen
    from thor_sdk.runtime import load_estimator
    from thor_sdk.store import Campaign

    d = tmp_path_factory.mktemp("eval")
    (d / "prior.json").write_text(json.dumps(build_prior(["lenet5", "har"])))
    dev = FakeDevice(noise=0.01)
    profile(device=dev, out=str(d / "p.db"), max_probes=40, prior_path=str(d / "prior.json"), reference_every_s=1e-9,
            calibration_models=[])
    fit(str(d / "p.db"), out=str(d / "e.json"))
    ticks = []
    # a per-epoch log whose cost settles at epoch 3 (warm-up 1.6, 1.3, 1.15 then 1.0 +- 1%)
    costs = [1.6, 1.3, 1.15, 1.0, 1.01, 0.99, 1.0, 1.005, 0.995, 1.0]
    (d / "run.csv").write_text("epoch,time_s\n" + "".join(f"{i},{c}\n" for i, c in enumerate(costs)))
    r = evaluate_unseen(str(d / "e.json"), ["cnn5", "lenet5", "lstm"], device=dev, batch_sizes=[8, 16],
                        reference="har", progress=lambda ev, info: ticks.append((ev, info)), tdp={},
                        pre_variants=("ridge",), step_logs=[str(d / "run.csv")])
    c = Campaign.open(str(d / "p.db"))
    samples = c.samples("time")
    c.close()
    return {"dir": d, "result": r, "ticks": ticks, "estimator": load_estimator(str(d / "e.json")), "samples": samples}


def test_every_method_is_scored_on_every_measured_model(evaluated):
    r = evaluated["result"]
    assert [(x["model"], x["batch_size"]) for x in r["rows"]] == [("cnn5", 8), ("cnn5", 16), ("lenet5", 8),
                                                                  ("lenet5", 16)]
    assert [(s["model"], s["batch_size"]) for s in r["skipped"]] == [("lstm", 8), ("lstm", 16)]
    # a tick per measurement (skipped models are said before measuring starts, not ticked)
    assert evaluated["ticks"][0] == ("start", 4) and len(evaluated["ticks"]) == 5
    assert list(r["methods"]) == ["THOR", "FLOPs", "TDP", "PRE ridge"]
    # PRE needs runs of 3 other models; two were measured: said, not estimated
    assert r["methods"]["PRE ridge"]["n"] == 0 and "at least 3 other models" in r["methods"]["PRE ridge"]["note"]
    assert r["methods"]["TDP"]["n"] == 4 and "leave one model out" in r["methods"]["TDP"]["note"]
    (step,) = r["step"]
    assert step["stabilised"] and step["stable_epoch"] == 3 and step["epochs_used"] == 6 and step["ape"] < 1
    for x in r["rows"]:
        th = x["estimates"]["THOR"]
        assert th["low95"] <= th["value"] <= th["high95"]
        assert th["covered95"] == (th["low95"] <= x["measured"] <= th["high95"])
        for name, e in x["estimates"].items():
            assert e["ape"] == pytest.approx(abs(e["value"] - x["measured"]) / x["measured"] * 100)
    for name, m in r["methods"].items():
        if not m["n"]:
            continue
        apes = [x["estimates"][name]["ape"] for x in r["rows"] if x["estimates"].get(name, {}).get("ape") is not None]
        assert m["n"] == len(apes) and m["mape"] == pytest.approx(sum(apes) / len(apes))
        assert m["max_ape"] == max(apes) and m["note"]
    assert r["methods"]["THOR"]["coverage95"] == sum(x["covered95"] for x in r["rows"]) / 4
    assert r["methods"]["THOR"]["mape"] < 10  # planted costs: the fit is close


def test_report_files_are_complete_and_self_contained(evaluated, tmp_path):
    from thor_sdk.evaluate.report import write_report

    r = dict(evaluated["result"], command="thor-sdk evaluate --estimator e.json --out report")
    out = tmp_path / "report"
    info = write_report(r, out, estimator=evaluated["estimator"], samples=evaluated["samples"])
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["index.html", "report.md", "results.json", "estimated_vs_measured.png", "error_per_method.png",
         "kind_fits.png"])
    assert info["figures"] == ["error_per_method", "estimated_vs_measured", "kind_fits"] and info["note"] is None
    doc = json.loads((out / "results.json").read_text(), parse_constant=lambda c: pytest.fail(f"bare {c}"))
    assert doc["format"] == "thor-sdk/evaluation" and doc["version"] == 1 and "layers" not in doc
    assert doc["methods"]["THOR"]["mape"] == pytest.approx(r["methods"]["THOR"]["mape"])
    md = (out / "report.md").read_text()
    for name in ("THOR", "FLOPs", "TDP"):
        assert f"| {name} | 4 | {r['methods'][name]['mape']:.1f} |" in md
    assert "| PRE ridge | 0 | - |" in md and "## STEP on run logs" in md and "| run.csv | 10 | 6 | 3 |" in md
    assert "![Estimated vs measured](estimated_vs_measured.png)" in md and "Skipped lstm b8" in md
    page = (out / "index.html").read_text()
    srcs = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert len(srcs) == 3 and all(s.startswith("data:image/png;base64,") for s in srcs)  # nothing fetched
    assert "thor-sdk evaluate --estimator e.json" in page
    for png in out.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# a check run inside the page: every image decoded (natural size > 0) and not blank (more than one colour)
_CHECK = """<script>
window.addEventListener('load', () => {
  const out = [];
  for (const img of document.images) {
    const c = document.createElement('canvas');
    c.width = img.naturalWidth; c.height = img.naturalHeight;
    let colours = 0;
    if (img.naturalWidth > 0) {
      const g = c.getContext('2d'); g.drawImage(img, 0, 0);
      const px = g.getImageData(0, 0, c.width, c.height).data, seen = new Set();
      for (let i = 0; i < px.length && seen.size < 50; i += 4 * 97) seen.add(px[i] + ',' + px[i+1] + ',' + px[i+2]);
      colours = seen.size;
    }
    out.push({id: img.id, w: img.naturalWidth, h: img.naturalHeight, colours: colours});
  }
  const pre = document.createElement('pre'); pre.id = 'thor-check'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def test_html_report_renders_in_headless_chromium_with_every_figure(evaluated, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    from thor_sdk.evaluate.report import write_report

    out = tmp_path / "report"
    write_report(evaluated["result"], out, estimator=evaluated["estimator"], samples=evaluated["samples"])
    page = (out / "index.html").read_text().replace("</body>", _CHECK + "</body>")
    probe = tmp_path / "probe.html"
    probe.write_text(page)
    p = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
                        f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", probe.as_uri()],
                       capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="thor-check">(.*?)</pre>', p.stdout, re.S)
    assert m, p.stderr[-2000:]
    images = json.loads(m.group(1).replace("&quot;", '"'))
    assert [i["id"] for i in images] == ["fig-estimated_vs_measured", "fig-error_per_method", "fig-kind_fits"]
    for i in images:
        assert i["w"] > 200 and i["h"] > 200 and i["colours"] >= 5, i


def _cli(*args):
    """``thor-sdk ARGS`` in this process through the real entry point: (exit code, stdout + stderr)."""
    import contextlib
    import io

    from thor_sdk.cli.main import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            main([*map(str, args)])
            code = 0
        except SystemExit as e:
            code = e.code
    return code, buf.getvalue()


def test_evaluate_cli_refuses_a_bad_report_folder_before_measuring(evaluated, tmp_path):
    est = str(evaluated["dir"] / "e.json")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for args, msg in ((["--estimator", est, "--out", str(tmp_path / "no" / "such" / "dir")], "no such folder"),
                      (["--estimator", est, "--out", str(blocker)], "is a file"),
                      (["--out", str(tmp_path / "r")], "goes with --estimator"),
                      (["--unseen"], "needs --estimator"),
                      (["--estimator", est, "--model", "no_such_net"], "no_such_net")):
        code, output = _cli("evaluate", *args)
        lines = output.strip().splitlines()
        assert code == 2 and lines[-1].startswith("Error:") and msg in lines[-1], output
        assert "Traceback" not in output
    assert blocker.read_text() == "x" and not (tmp_path / "r").exists()


def test_zoo_groups_expand_in_order_without_repeats():
    from thor_sdk.models import expand_models, list_models

    got = expand_models(["lenet5", "zoo:reference", " zoo:heldout", "m.py:Net", "mlp5"])
    assert got == ["lenet5", *[n for n in list_models("reference") if n != "lenet5"], *list_models("heldout"),
                   "m.py:Net"]


def test_pre_and_tdp_never_see_the_model_they_estimate():
    """Leave one model out: a model's PRE and TDP estimates equal those of baselines fitted on the other
    models alone, however wild its own measurements are."""
    from thor_sdk.baselines.pre import PreBaseline
    from thor_sdk.baselines.tdp import TdpBaseline
    from thor_sdk.evaluate.methods import finish_methods

    def layers(width):
        return [{"kind": "linear", "config": {"in_features": 64, "out_features": width, "tokens": 1, "bias": 1},
                 "role": "input"},
                {"kind": "relu", "config": {"numel": width}, "role": "hidden"},
                {"kind": "output", "config": {"in_features": width, "out_features": 10, "tokens": 1}, "role": "output"}]

    rows = []
    for i, w in enumerate((32, 64, 128, 256, 512)):
        for b in (8, 32):
            from thor_sdk.baselines.base import train_flops

            f = train_flops(layers(w), b)
            measured = 1e-9 * f + 1e-4
            if i == 2:
                measured *= 100.0  # model m2's own runs are wildly off: they must not move its estimate
            feats = {"batch_size": b, "input_size": 64, "train_flops": f, "params": 64 * w + 10 * w,
                     "n_layers": 3, "kinds": {"linear": 1, "relu": 1, "output": 1}, "cpu_count": 2, "threads": 1}
            rows.append({"model": f"m{i}", "batch_size": b, "measured": measured, "estimates": {},
                         "_context": {"layers": layers(w), "batch_size": b, "features": feats}})
    notes, names = finish_methods(rows, "time", tdp={}, pre_variants=("ridge",))
    assert names == ["THOR", "FLOPs", "TDP", "PRE ridge"]
    others = [r for r in rows if r["model"] != "m2"]
    pre = PreBaseline("ridge", "time").fit([dict(r["_context"]["features"], model=r["model"], time_s=r["measured"])
                                            for r in others])
    tdp = TdpBaseline(metric="time").fit([{"model": r["_context"]["layers"], "batch_size": r["batch_size"],
                                           "time_s": r["measured"]} for r in others])
    for r in rows:
        if r["model"] == "m2":
            assert r["estimates"]["PRE ridge"]["value"] == pytest.approx(
                pre.predict_rows([r["_context"]["features"]])[0], rel=1e-12)
            assert r["estimates"]["TDP"]["value"] == pytest.approx(
                tdp.estimate(r["_context"]["layers"], r["batch_size"])["value"], rel=1e-12)
            assert r["estimates"]["PRE ridge"]["ape"] > 90  # it could not have learnt m2's 100x


def test_each_model_group_is_scored_apart(evaluated):
    """Held-out nets (never in the profile's prior) are what a generalization claim rests on: the result and
    the printed table score each group on its own rows."""
    import copy

    from thor_sdk.cli.evaluate import unseen_table
    from thor_sdk.evaluate.unseen import group_summaries

    r = evaluated["result"]
    assert list(r["groups"]) == ["reference"] and r["groups"]["reference"]["n"] == 4
    assert r["groups"]["reference"]["thor_mape"] == pytest.approx(r["thor_mape"])
    rows = [{"group": "heldout", "thor_ape": 10.0, "flops_ape": 30.0, "covered95": True, "thor_level_adjusted_ape": 5.0,
             "measured_passes": [1.0, 1.0]},
            {"group": "heldout", "thor_ape": 30.0, "flops_ape": 50.0, "covered95": False,
             "thor_level_adjusted_ape": None, "measured_passes": [2.0, 2.0]},
            {"group": "reference", "thor_ape": 4.0, "flops_ape": None, "covered95": True,
             "thor_level_adjusted_ape": None},
            {"group": None, "thor_ape": 8.0, "flops_ape": 8.0, "covered95": True, "thor_level_adjusted_ape": 9.0}]
    g = group_summaries(rows)
    assert g["heldout"] == {"n": 2, "thor_mape": 20.0, "flops_mape": 40.0, "flops_over_thor": 2.0, "coverage95": 0.5,
                            "thor_level_adjusted_mape": 5.0, "measurement_floor_mape": 0.0,
                            "canary": None}  # passes that agree; no canary read
    assert g["reference"]["measurement_floor_mape"] is None  # one pass, or none recorded: no spread to read
    assert g["reference"]["flops_mape"] is None and g["reference"]["flops_over_thor"] is None
    assert g["other"]["n"] == 1 and g["other"]["thor_level_adjusted_mape"] == 9.0
    mixed = copy.deepcopy(r)
    mixed["rows"][0]["group"] = mixed["rows"][1]["group"] = "heldout"
    mixed["groups"] = group_summaries(mixed["rows"])
    text = unseen_table(mixed)
    held = mixed["groups"]["heldout"]
    assert f"  heldout (2): THOR MAPE {held['thor_mape']:.1f}%" in text and "  reference (2): THOR MAPE" in text
    assert "  reference (" not in unseen_table(r)  # one group: the overall line says it all


def test_each_row_says_how_much_of_its_estimate_extrapolates(evaluated):
    """``extrapolated_share``: the part of THOR's estimate from layers outside the profile's sampled range.
    The profile's prior came from lenet5 and har, so cnn5's wider convs lie partly outside it."""
    from thor_sdk.layers import layers_of

    est = evaluated["estimator"]
    by = {(x["model"], x["batch_size"]): x for x in evaluated["result"]["rows"]}
    for (model, b), row in by.items():
        e = est.estimate(layers_of(model).layers, b)
        outside = [l for l in e["layers"] if l.get("outside")]
        assert row["extrapolated_share"] == pytest.approx(sum(l["mean"] for l in outside) / sum(l["mean"] for l in e["layers"]))
        assert 0.0 <= row["extrapolated_share"] <= 1.0
    assert by[("cnn5", 16)]["extrapolated_share"] > by[("lenet5", 16)]["extrapolated_share"]
    assert by[("cnn5", 16)]["extrapolated_share"] > 0.2


def test_the_report_says_how_the_estimators_kinds_read_configs_they_never_saw(evaluated, tmp_path):
    """An estimator fitted with ``--cv`` carries its per-kind cross-validation; the evaluation's facts say it beside
    the nets. Without it, nothing is said."""
    from thor_sdk.evaluate.report import _facts
    from thor_sdk.evaluate.unseen import kind_cv_summary

    assert evaluated["result"]["estimator"]["cross_validation"] is None
    assert not any("never saw" in f for f in _facts(evaluated["result"]))
    doc = fit(str(evaluated["dir"] / "p.db"), cv_folds=3)
    cv = kind_cv_summary(doc["provenance"])
    assert cv["folds"] == 3 and cv["kinds"] == len(doc["provenance"]["cross_validation"]["kinds"]) > 0
    r = dict(evaluated["result"], estimator=dict(evaluated["result"]["estimator"], cross_validation=cv))
    (line,) = [f for f in _facts(r) if "never saw" in f]
    assert f"3-fold cross-validation at fit, {cv['kinds']} kinds, {cv['heldout']} held-out samples" in line
    assert f"{100 * cv['covered95']:.1f}% inside their 95% intervals" in line


def test_the_cli_summary_says_it_too(evaluated):
    from thor_sdk.cli.evaluate import unseen_table

    r = evaluated["result"]
    assert "never saw" not in unseen_table(r)
    cv = {"folds": 5, "kinds": 3, "heldout": 90, "mape": 12.34, "median_ape": 8.0, "covered95": 0.95}
    text = unseen_table(dict(r, estimator=dict(r["estimator"], cross_validation=cv)))
    assert ("the estimator's layer kinds on configs they never saw (5-fold cross-validation at fit, 3 kinds, 90 "
            "held-out samples): MAPE 12.3% (median APE 8.0%), 95.0% inside their 95% intervals") in text
