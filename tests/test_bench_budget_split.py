"""bench/bench_budget_split.py: a campaign thinned to fewer probes of one kind (the first picked, or a random
subset), on a copy: the original untouched, the other kinds kept, and the copy still fits."""

import sqlite3

import pytest
from bench_module import load_bench

from thor_sdk.probes import Probe
from thor_sdk.store import Campaign


def _campaign(path):
    c = Campaign.create(path, {"metric": "time", "protocol": {}, "device": {"name": "synthetic"}, "runtime": "torch"})
    for i in range(12):
        for kind, config, value in (("relu", {"numel": 512 * (i + 1)}, 1e-5 * (1 + i)),
                                    ("linear", {"in_features": 8 * (i + 1), "out_features": 16, "tokens": 1,
                                                "bias": 1}, 2e-5 * (1 + i))):
            p = Probe(kind, config, 4, "hidden")
            c.plan(p)
            c.complete(p.id, [{"metric": "time", "value": value, "std": 0.01 * value, "n": 5, "flagged": False,
                               "flag_reason": None, "parts": {}}])
    c.close()


def _ids(path, kind):
    with sqlite3.connect(path) as db:
        return [r[0] for r in db.execute("SELECT id FROM probes WHERE kind = ? ORDER BY seq", (kind,))], \
            db.execute("SELECT COUNT(*) FROM samples").fetchone()[0]


@pytest.mark.parametrize("seed", [None, 3])
def test_thin_keeps_the_first_or_a_random_subset_of_one_kind_on_a_copy(tmp_path, seed):
    from thor_sdk import api

    bench = load_bench("bench_budget_split")
    src, out = str(tmp_path / "c.db"), str(tmp_path / "thin.db")
    _campaign(src)
    linear, samples = _ids(src, "linear")
    assert bench.thin(src, out, "linear", 5, seed) == (5, 17)
    kept, left = _ids(out, "linear")
    assert len(kept) == 5 and set(kept) <= set(linear) and (kept == linear[:5]) == (seed is None)
    assert len(_ids(out, "relu")[0]) == 12 and left == samples - 7  # its samples went with the probes
    assert _ids(src, "linear") == (linear, samples)  # the campaign itself untouched
    assert bench.thin(src, out, "linear", 50, seed) == (12, 24)  # more than it has: all kept
    doc = api.fit(campaign=out, out=str(tmp_path / "e.json"))
    assert doc is not None


def test_keep_and_seeds_are_positive_integers():
    bench = load_bench("bench_budget_split")
    with pytest.raises(SystemExit):
        bench.main(["--campaign", "x.db", "--results", "r.json", "--keep", "0,5", "--out-dir", "d"])
