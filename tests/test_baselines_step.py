"""STEP baseline: finds a known stabilisation point, projects the run, refuses what never stabilises, reads logs and CSVs."""

import json
import math
import random

import pytest

from thor_sdk.baselines.step import StepBaseline, read_epochs, stabilisation
from thor_sdk.errors import FormatError, NoMeterError, NotFoundError, ThorError, UsageError


def _series(s0, n=40, base=10.0, noise=0.01, seed=0):
    """Per-epoch times: epochs before ``s0`` carry a warm-up overhead decaying by 1.8x per epoch down to 10%
    at epoch ``s0 - 1``, then flat +- ``noise`` (relative)."""
    rng = random.Random(seed)
    out = []
    for e in range(1, n + 1):
        over = 0.1 * 1.8 ** (s0 - 1 - e) if e < s0 else 0.0
        out.append({"epoch": e, "time_s": base * (1 + over) * (1 + noise * rng.gauss(0, 1)), "energy_j": None})
    return out


@pytest.mark.parametrize("s0", [2, 3, 5, 8, 10])
@pytest.mark.parametrize("seed", range(6))
def test_finds_known_stabilisation_and_projects(s0, seed):
    xs = _series(s0, seed=seed)
    m = StepBaseline().fit(xs)
    r = m.estimate(n_epochs=40)
    assert r["stabilised"] is True
    assert abs(m.stable_epoch_ - s0) <= 1
    true = math.fsum(x["time_s"] for x in xs)
    assert abs(r["value"] - true) / true < 0.02
    assert r["epochs_used"] < 40 and r["epochs_used"] <= s0 + 1 + m.window  # needs only the first epochs
    assert r["metric"] == "time" and r["unit"] == "s" and r["per"] == "run" and r["measured"] is False


def test_projection_uses_only_observed_prefix():
    xs = _series(5)
    full = StepBaseline().fit(xs).estimate(n_epochs=100)["value"]
    prefix = StepBaseline().fit(xs[:9]).estimate(n_epochs=100)["value"]
    assert prefix == pytest.approx(full, rel=1e-12)
    m = StepBaseline().fit(xs[:9])
    assert m.estimate(n_epochs=100)["value"] == pytest.approx(m.warmup_cost_ + (100 - 4) * m.stable_cost_)


def test_never_stabilises_is_reported():
    rising = [{"epoch": e, "time_s": 10 * 1.12 ** e} for e in range(1, 30)]
    alternating = [{"epoch": e, "time_s": 10.0 if e % 2 else 14.0} for e in range(1, 30)]
    for xs in (rising, alternating):
        r = StepBaseline().fit(xs).estimate(n_epochs=50)
        assert r["stabilised"] is False and r["value"] is None
        assert "never stabilises" in r["reason"]
    short = StepBaseline(window=5).fit([{"epoch": 1, "time_s": 1.0}, {"epoch": 2, "time_s": 1.0}])
    assert short.estimate()["value"] is None


def test_rule_threshold_and_warmup():
    flat = [5.0] * 10
    assert stabilisation(flat, window=3, cv_threshold=0.05, min_warmup=0) == (0, 0.0)
    assert stabilisation(flat, window=3, cv_threshold=0.05, min_warmup=2)[0] == 2
    costs = [10.0, 10.0, 11.0, 9.0, 10.0, 10.0, 10.0]
    assert stabilisation(costs, window=3, cv_threshold=0.05, min_warmup=0)[0] == 0
    assert stabilisation(costs, window=3, cv_threshold=0.01, min_warmup=1)[0] == 4


def test_train_report_time_and_energy(tmp_path):
    report = {"format": "thor-sdk/train-run", "version": 1, "model": "mlp", "batch_size": 32,
              "epochs": _series(4, n=12)}
    p = tmp_path / "run.json"
    p.write_text(json.dumps(report))
    m = StepBaseline().fit(str(p))
    assert m.metric_ == "time"
    assert m.estimate()["model"] == "mlp" and m.estimate()["batch_size"] == 32
    with pytest.raises(NoMeterError):
        StepBaseline(metric="energy").fit(report)
    for e in report["epochs"]:
        e["energy_j"] = e["time_s"] * 3.0
    m = StepBaseline().fit(report)
    assert m.metric_ == "energy" and m.estimate()["unit"] == "J"
    assert m.stable_cost_ == pytest.approx(3.0 * StepBaseline(metric="time").fit(report).stable_cost_)


def test_csv_with_power(tmp_path):
    p = tmp_path / "epochs.csv"
    rows = ["epoch,time_s,power_w"] + [f"{e},{2.0 if e > 2 else 3.0},{5.0}" for e in range(0, 10)]
    p.write_text("\n".join(rows) + "\n")
    m = StepBaseline(metric="energy").fit(str(p))
    r = m.estimate(n_epochs=10)
    assert m.stable_epoch_ == 3 and r["value"] == pytest.approx(3 * 15.0 + 7 * 10.0)
    assert read_epochs(str(p))[0] == {"epoch": 0, "time_s": 3.0, "energy_j": None, "power_w": 5.0}


@pytest.mark.parametrize("text", [
    "epoch,time_s\n1,1.0\n3,1.0\n",          # a gap
    "epoch,time_s\n2,1.0\n1,1.0\n",          # decreasing
    "epoch,time_s\n1.5,1.0\n",               # not an integer
    "epoch,time_s\n-1,1.0\n",                # negative epoch
    "epoch,time_s\n1,nan\n",                 # not finite
    "epoch,time_s\n1,inf\n",
    "epoch,time_s\n1,-2\n",                  # not positive
    "epoch,time_s\n1,0\n",
    "epoch,time_s\n1,abc\n",
    "epoch,time_s\n1,\n",                    # no value at all
    "epoch,power_w\n1,3\n",                  # no cost column
    "time_s\n1.0\n",                         # no epoch column
    "epoch,time_s\n",                        # no rows
    "",
])
def test_hostile_csv(tmp_path, text):
    p = tmp_path / "bad.csv"
    p.write_text(text)
    with pytest.raises(FormatError):
        StepBaseline().fit(str(p))


def test_hostile_json_and_limits(tmp_path):
    for doc in ({"format": "thor-sdk/other", "epochs": []}, {"epochs": "x"}, [{"epoch": True, "time_s": 1}],
                [{"epoch": 1, "time_s": True}], [{"time_s": 1.0}], [1, 2], [{"epoch": 1, "time_s": 1e400}]):
        with pytest.raises(FormatError):
            read_epochs(doc)
    p = tmp_path / "bad.json"
    for text in ("{not json", "[" * 100_000 + "]" * 100_000):
        p.write_text(text)
        with pytest.raises(FormatError):
            read_epochs(str(p))
    big = tmp_path / "big.csv"
    with open(big, "w") as f:
        f.write("epoch,time_s\n")
        f.write("1,1.0\n" * (16 * 1024 * 1024 // 6 + 10))
    with pytest.raises(FormatError, match="limit"):
        read_epochs(str(big))
    with pytest.raises(FormatError, match="more than"):
        read_epochs([{"epoch": e, "time_s": 1.0} for e in range(100_001)])
    with pytest.raises(NotFoundError):
        read_epochs(str(tmp_path / "absent.csv"))
    assert issubclass(FormatError, ThorError)


def test_settings_and_estimate_arguments():
    with pytest.raises(UsageError):
        StepBaseline(window=1)
    with pytest.raises(UsageError):
        StepBaseline(cv_threshold=0)
    with pytest.raises(UsageError):
        StepBaseline().estimate()  # not fitted
    m = StepBaseline().fit(_series(3, n=10))
    with pytest.raises(UsageError):
        m.estimate(n_epochs=0)
    assert m.estimate(n_epochs=1)["value"] == pytest.approx(m.costs_[0])  # inside the warm-up: measured epochs
    assert "warm-up" in m.assumptions


@pytest.mark.parametrize("n_warm", [0, 1, 4])
def test_constant_after_warmup_projects_exactly(n_warm):
    xs = [{"epoch": e, "energy_j": 50.0 + 10 * (n_warm - e)} for e in range(n_warm)]
    xs += [{"epoch": e, "energy_j": 7.0} for e in range(n_warm, n_warm + 5)]
    m = StepBaseline(min_warmup=n_warm).fit(xs)
    r = m.estimate(n_epochs=1000)
    assert m.stable_epoch_ == n_warm and r["metric"] == "energy"
    assert r["value"] == pytest.approx(math.fsum(x["energy_j"] for x in xs[:n_warm]) + (1000 - n_warm) * 7.0,
                                       rel=1e-12)
