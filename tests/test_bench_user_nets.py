"""bench/user_nets.py and bench/bench_stand_ins.py: the held-out user nets are not in the prior's zoo, each is split
into layers under --unknown-ops approx (the ones with operators lacking a kind through stand-ins, refused without),
and every stand-in case of the benchmark resolves to layers that build and chain their shapes."""

import pytest
from bench_module import load_bench

from thor_sdk.errors import UnsupportedOperatorError
from thor_sdk.layers import layers_of

# DilatedTCN: dilated convs are kinds; LoRAGPT is MiniGPT with adapters
STAND_IN_NETS = {"BiLSTM", "ManualAttn", "EinsumAttn", "StyleBlock", "MiniGPT", "LoRAGPT"}
#: nets that run blocks through torch.utils.checkpoint: refused by default, their layers' recompute added under approx
CHECKPOINTED_NETS = {"CheckpointedGPT", "CheckpointedResMLP", "CheckpointedCNN"}


def test_user_nets_are_held_out_from_the_zoo_and_split_under_approx():
    from thor_sdk import models

    nets = load_bench("user_nets")
    names = [n for n, _ in nets.NETS]
    assert len(names) == len(set(names)) and not set(n.lower() for n in names) & set(models.SPECS)
    assert STAND_IN_NETS <= set(names)
    for name, shape in nets.NETS:
        ref = f"{nets.__file__}:{name}"
        ml = layers_of(ref, input_shape=list(shape), unknown_ops="approx")
        stand_ins = [l for l in ml.layers if "approx" in l and l["kind"] != "elementwise"
                     and not l["approx"].startswith("its forward runs again")]  # a stand-in's reason comes first
        assert bool(stand_ins) == (name in STAND_IN_NETS | {"CheckpointedGPT"}), name  # MiniGPT's attention
        assert any("recompute" in l for l in ml.layers) == (name in CHECKPOINTED_NETS), name
        if name in STAND_IN_NETS | CHECKPOINTED_NETS:
            with pytest.raises(UnsupportedOperatorError):
                layers_of(ref, input_shape=list(shape))
    text = layers_of(f"{nets.__file__}:TextGRU", input_shape=[40])
    assert text.input_dtype == "int64"
    # nanoGPT: traced with its input's sizes (fx's symbolic trace refuses the mask sliced by T), token ids found
    assert layers_of(f"{nets.__file__}:MiniGPT", input_shape=[64], unknown_ops="approx").input_dtype == "int64"


def test_every_stand_in_case_builds_each_of_its_layers_alone():
    import torch

    from thor_sdk.layers.build import build_layer, example_input
    from thor_sdk.layers.kinds import get_kind

    bench = load_bench("bench_stand_ins")
    cases = bench._cases()
    assert len(cases) >= 15
    for label, module, shape, _ in cases:
        layers = layers_of(module, input_shape=list(shape), unknown_ops="approx").layers
        # a case read as its own kind (a LayerNorm over several dimensions, a MultiheadAttention) or as the layers
        # of its own kinds (a TransformerEncoderLayer) has no stand-in; every other has one
        assert any("approx" in l for l in layers) != label.endswith(("(its own kind)", "(its own kinds)")), label
        for layer in layers:
            kind = get_kind(layer["kind"])
            out = build_layer(layer["kind"], layer["config"])(example_input(kind, layer["config"], 2))
            out = out[0] if isinstance(out, tuple) else out
            assert tuple(out.shape[1:]) == tuple(int(s) for s in kind.out_shape(layer["config"])), (label, layer)
            assert torch.isfinite(out).all()


def test_a_run_written_before_the_best_scale_figures_renders_them_from_its_rows():
    import json
    import os

    from thor_sdk.evaluate.unseen import best_scale_mape

    bench = load_bench("bench_user_nets")
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "results",
                        "user-nets-host-20261129-0348.json")
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    assert "thor_best_scale_mape" not in doc["groups"]["all"]  # as that run wrote it
    text = "\n".join(bench.render(doc))
    rows = doc["rows"]
    thor = best_scale_mape([(r["measured"], r["thor"]) for r in rows])
    flops = best_scale_mape([(r["measured"], r["flops"]) for r in rows])
    assert f"each at its best single scale (a machine uniformly faster or slower than profiled taken out) THOR " \
           f"{thor:.1f}%, FLOPs {flops:.1f}%" in text
    assert thor < doc["groups"]["all"]["thor_mape"]  # a common scale of 1 is among those tried
    # and the measurement floor, from the rows' passes, which that run kept
    from thor_sdk.evaluate.unseen import measurement_floor

    floor = measurement_floor(rows)["mape"]
    assert f"measurement floor {floor:.1f}% (what the passes' spread leaves a perfect estimate)" in text


def test_the_best_scale_mape_takes_out_a_common_factor_only():
    from thor_sdk.evaluate.unseen import best_scale_mape

    assert best_scale_mape([(1.0, 1.3), (2.0, 2.6), (4.0, 5.2)]) == pytest.approx(0.0, abs=0.4)
    assert best_scale_mape([(1.0, 1.1), (1.0, 0.9)]) == pytest.approx(100 * 0.1 / 1.1, abs=0.01)
    assert best_scale_mape([]) is None and best_scale_mape([(0.0, 1.0), (1.0, float("nan"))]) is None


def test_a_row_is_scored_at_the_canary_level_with_the_estimates_at_the_profiles_level():
    bench = load_bench("bench_user_nets")
    row = {"net": "x", "measured": 2.0, "measured_passes": [2.0, 2.1, 1.9], "thor": 1.6, "flops": 1.2,
           "thor_ape": 20.0, "flops_ape": 40.0, "covered95": False, "approximated": [],
           "unleveled": {"thor": 1.0, "flops": 0.8},
           "canary": {"measured": 1.0, "measured_passes": [1.0, 1.0, 1.0], "thor_ape": 0.0, "flops_ape": 20.0,
                      "covered95": True}}
    got = bench.at_canary(row)
    assert (got["measured"], got["thor"], got["flops"], got["thor_ape"], got["covered95"]) == (1.0, 1.0, 0.8, 0.0, True)
    g = bench.groups_of([got])["all"]
    assert g["thor_mape"] == 0.0 and g["flops_mape"] == 20.0 and g["covered"] == 1


def test_rescore_scores_every_estimator_on_the_same_measurements(tmp_path):
    from pathlib import Path

    bench = load_bench("bench_user_nets")
    nets = dict(load_bench("user_nets").NETS)
    rows = [{"net": "a", "measured": 1.0, "canary": 2.0, "thor": 1.5, "thor_std": 0.1, "flops": 1.0},
            {"net": "b", "measured": 2.0, "canary": None, "thor": 2.0, "thor_std": 0.5, "flops": 3.0}]
    assert bench.rescore_scores(rows, "measured") == (2, 25.0, 25.0, 1)
    assert bench.rescore_scores(rows, "canary") == (1, 25.0, 50.0, 0)
    assert bench.rescore_scores(rows[1:], "canary") == (0, None, None, 0)
    vectors = Path(__file__).resolve().parent / "vectors"
    run = {"command": "python bench/bench_user_nets.py --estimator x.json", "stamp": "20261130-0000", "batch_size": 8,
           "rows": [{"net": "PReLUMLP", "shape": list(nets["PReLUMLP"]), "batch_size": 8, "measured": 1e-3,
                     "canary": {"measured": 1.2e-3}}]}
    one, two = str(vectors / "estimator_time_step_bytes.json"), str(vectors / "estimator_time_profile.json")
    doc = bench.rescore(run, [one, two])
    assert [e["estimator"] for e in doc["estimators"]] == [one, two]
    a, b = (e["rows"][0] for e in doc["estimators"])
    assert a["measured"] == b["measured"] == 1e-3 and a["canary"] == b["canary"] == 1.2e-3
    assert a["thor"] > 0 and b["thor"] > 0 and a["thor"] != b["thor"]  # each estimator's own estimate
    text = "\n".join(bench.render_rescore(dict(doc, command="c")))
    assert "THOR / canary, per net" in text
    assert f"| PReLUMLP | {a['thor'] / 1.2e-3:.2f} | {b['thor'] / 1.2e-3:.2f} |" in text
