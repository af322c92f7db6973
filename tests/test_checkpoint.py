"""Layers run through torch.utils.checkpoint: found while tracing, refused by default, and under --unknown-ops approx
estimated with their recomputed forward (``recompute``) by every runtime's rule."""

import json
import math

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.utils import checkpoint as cp  # noqa: E402

from thor_sdk.errors import FormatError, UnsupportedOperatorError, UsageError  # noqa: E402
from thor_sdk.layers import layers_of, read_layer_list  # noqa: E402
from thor_sdk.layers.kinds import get_kind  # noqa: E402
from thor_sdk.layers.trace import RECOMPUTED  # noqa: E402

from pathlib import Path  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "check"


def _block():
    return nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32))


class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp, self.block, self.head = nn.Linear(16, 32), _block(), nn.Linear(32, 4)

    def forward(self, x):
        return self.head(self.block(self.inp(x)))


class NonReentrant(Plain):
    def forward(self, x):
        return self.head(cp.checkpoint(self.block, self.inp(x), use_reentrant=False))


class Reentrant(Plain):
    def forward(self, x):
        from torch.utils.checkpoint import checkpoint  # bound to a name of its own, as user code does

        return self.head(checkpoint(self.block, self.inp(x), use_reentrant=True))


class _Inner(nn.Module):
    """A block that checkpoints its own part: checkpoint named in a submodule's forward."""

    def __init__(self):
        super().__init__()
        self.block = _block()

    def forward(self, x):
        return x + cp.checkpoint(self.block, x, use_reentrant=False)


class Nested(Plain):
    def __init__(self):
        super().__init__()
        self.block = _Inner()


class Sequential(nn.Module):
    """checkpoint_sequential over 6 modules in 3 segments: torch checkpoints the first two, runs the last plainly."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(16, 32)
        self.seq = nn.Sequential(*[m for _ in range(3) for m in (nn.Linear(32, 32), nn.ReLU())])
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        return self.head(cp.checkpoint_sequential(self.seq, 3, self.inp(x), use_reentrant=False))


class Sized(Plain):
    """Traced with its input's sizes (fx's symbolic trace refuses ``range`` of a size), checkpointed."""

    def forward(self, x):
        x = self.inp(x)
        for _ in range(x.size(0) // x.size(0)):
            x = cp.checkpoint(self.block, x, use_reentrant=False)
        return self.head(x)


def _names(layers, recomputed=True):
    return [l["name"] for l in layers if ("recompute" in l) == recomputed]


@pytest.mark.parametrize("cls", [NonReentrant, Reentrant, Nested, Sized])
def test_a_checkpointed_block_is_refused_by_default_naming_its_layers(cls):
    with pytest.raises(UnsupportedOperatorError) as e:
        layers_of(cls(), input_shape=[16])
    assert "torch.utils.checkpoint (3 layers, block." in str(e.value) and "runs again in backward" in str(e.value)


@pytest.mark.parametrize("cls", [NonReentrant, Reentrant, Nested, Sized])
def test_under_approx_the_checkpointed_layers_carry_their_forward_share(cls):
    plain = layers_of(Plain(), input_shape=[16]).layers
    got = layers_of(cls(), input_shape=[16], unknown_ops="approx").layers
    strip = [{k: v for k, v in l.items() if k not in ("recompute", "approx", "name", "op")} for l in got]
    kinds = [{k: v for k, v in l.items() if k not in ("name", "op")} for l in plain]
    if cls is Nested:  # the residual sum is a layer of its own, outside the checkpoint
        assert [l["kind"] for l in got] == ["linear", "linear", "relu", "linear", "add", "output"]
        strip = [l for l in strip if l["kind"] != "add"]
    assert strip == kinds  # the same layers as the plain model
    recomputed = [l for l in got if "recompute" in l]
    assert [l["kind"] for l in recomputed] == ["linear", "relu", "linear"]
    assert all(l["name"].startswith("block.") for l in recomputed)
    assert [l["recompute"] for l in recomputed] == pytest.approx([1 / 3, 1 / 2, 1 / 3])
    assert all("torch.utils.checkpoint" in l["approx"] for l in recomputed)
    assert not any(RECOMPUTED in l for l in got)  # the tracer's mark stays inside the reader


def test_checkpoint_sequential_leaves_its_last_segment_as_it_is():
    got = layers_of(Sequential(), input_shape=[16], unknown_ops="approx").layers
    assert _names(got) == ["seq.0", "seq.1", "seq.2", "seq.3"]
    assert _names(got, recomputed=False) == ["inp", "seq.4", "seq.5", "head"]


def test_tracing_puts_torch_and_the_user_module_back():
    import sys

    before = cp.checkpoint, cp.checkpoint_sequential
    layers_of(Nested(), input_shape=[16], unknown_ops="approx")
    with pytest.raises(UnsupportedOperatorError):
        layers_of(NonReentrant(), input_shape=[16])
    assert (cp.checkpoint, cp.checkpoint_sequential) == before
    assert vars(sys.modules[__name__])["cp"] is cp
    # and a checkpointed model still trains as torch runs it
    m = NonReentrant()
    m(torch.randn(4, 16)).sum().backward()
    assert m.block[0].weight.grad is not None


@pytest.mark.parametrize("kind, config, role, share", [
    ("linear", {"in_features": 8, "out_features": 8, "tokens": 1, "bias": 1}, "hidden", 1 / 3),
    ("linear", {"in_features": 8, "out_features": 8, "tokens": 1, "bias": 1}, "input", 1 / 2),
    ("relu", {"numel": 100}, "hidden", 1 / 2),
    ("relu", {"numel": 100}, "input", 1.0),  # an input relu's step is its forward alone
])
def test_forward_share(kind, config, role, share):
    assert get_kind(kind).forward_share(config, role) == pytest.approx(share)


def _estimator():
    from thor_sdk.runtime import load_estimator

    return load_estimator(str(EXAMPLE / "synthetic-phone-time.json"))


def test_every_runtime_rule_recompute_multiplies_the_layer_and_the_total():
    est = _estimator()
    layers = read_layer_list(str(EXAMPLE / "example_cnn.layers.json")).layers
    base = est.estimate(layers, 8)
    i = next(j for j, l in enumerate(layers) if l["kind"] == "conv2d" and l["role"] == "hidden")
    marked = [dict(l) for l in layers]
    marked[i] = dict(marked[i], recompute=0.25)
    got = est.estimate(marked, 8)
    assert got["layers"][i]["mean"] == pytest.approx(1.25 * base["layers"][i]["mean"], rel=1e-12)
    assert got["layers"][i]["std"] == pytest.approx(1.25 * base["layers"][i]["std"], rel=1e-12)
    added = 0.25 * base["layers"][i]["mean"]
    assert got["total"]["mean"] == pytest.approx(base["total"]["mean"] + added, rel=1e-12)
    assert got["layers_total"]["std"] > base["layers_total"]["std"]
    zero = [dict(l) for l in layers]
    zero[i] = dict(zero[i], recompute=0)
    assert est.estimate(zero, 8)["total"] == base["total"]


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan, math.inf, True, "0.5", None])
def test_a_bad_recompute_is_refused(bad):
    est = _estimator()
    layers = read_layer_list(str(EXAMPLE / "example_cnn.layers.json")).layers
    with pytest.raises(UsageError, match="recompute must be a number in"):
        est.estimate([dict(layers[0], recompute=bad)] + layers[1:], 8)


def test_the_layer_list_file_keeps_recompute_and_its_schema_bounds_it(tmp_path):
    ml = layers_of(NonReentrant(), input_shape=[16], unknown_ops="approx")
    path = tmp_path / "ck.json"
    path.write_text(json.dumps(ml.to_dict()))
    back = read_layer_list(str(path)).layers
    assert [l.get("recompute") for l in back] == [l.get("recompute") for l in ml.layers]
    doc = ml.to_dict()
    doc["layers"][1]["recompute"] = 1.5
    path.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match="recompute"):
        read_layer_list(str(path))


def test_the_estimate_warns_of_recomputed_layers_apart_from_stand_ins():
    from thor_sdk.layers import approximation_warnings

    est = _estimator()
    layers = read_layer_list(str(EXAMPLE / "example_cnn.layers.json")).layers
    i = next(j for j, l in enumerate(layers) if l["kind"] == "conv2d" and l["role"] == "hidden")
    why = "its forward runs again in backward (torch.utils.checkpoint): 0.33 of its training step added"
    marked = [dict(l) for l in layers]
    marked[i] = dict(marked[i], recompute=1 / 3, approx=why)
    approximated = est.estimate(marked, 8)["approximated"]
    assert [a["recompute"] for a in approximated] == [pytest.approx(1 / 3)]
    (line,) = approximation_warnings(approximated)
    assert "1 layer(s) run under torch.utils.checkpoint" in line
    # a stand-in inside the checkpoint is both
    marked[i]["approx"] = "ConvTranspose2d has no kind: a stand-in; " + why
    lines = approximation_warnings(est.estimate(marked, 8)["approximated"])
    assert len(lines) == 2 and "stand in for operators" in lines[1]
