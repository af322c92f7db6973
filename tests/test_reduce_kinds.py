"""Kinds reduce_sum and reduce_max: sums and maxima over adjacent axes as users write them (attention pooling's sum
over time, a text CNN's and PointNet's torch.max), refused where they are other operators, their
shapes, FLOPs and bytes, and the prior's neighbour that flips torch.max's argmax."""

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from thor_sdk.errors import UnsupportedOperatorError  # noqa: E402
from thor_sdk.layers import layers_of  # noqa: E402
from thor_sdk.layers.build import build_layer  # noqa: E402
from thor_sdk.layers.kinds import get_kind  # noqa: E402


class _Op(nn.Module):
    """A Linear over the last axis (so a gradient reaches the op), the reduction ``f``, a flatten and a Linear head."""

    def __init__(self, f, shape, *mods):
        super().__init__()
        self.f, self.mods = f, nn.ModuleList(mods)
        self.inp = nn.Linear(shape[-1], shape[-1])
        self.fc = nn.LazyLinear(3)

    def forward(self, x):
        return self.fc(torch.flatten(self.f(self, self.inp(x)), 1))


def _layers(f, shape, *mods):
    net = _Op(f, shape, *mods)
    net(torch.zeros(2, *shape))  # materialise the LazyLinear
    return layers_of(net, input_shape=list(shape)).layers


def _refused(f, shape, *mods):
    net = _Op(f, shape, *mods)
    net(torch.zeros(2, *shape))
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_of(net, input_shape=list(shape))
    return err.value.ops


@pytest.mark.parametrize("f, shape, kind, config", [
    (lambda s, x: x.sum(dim=1), [6, 8], "reduce_sum", dict(rows=1, reduced=6, inner=8)),  # attention pooling
    (lambda s, x: torch.sum(x, -1, keepdim=True), [6, 8], "reduce_sum", dict(rows=6, reduced=8, inner=1)),
    (lambda s, x: x.sum((2, 3)), [4, 5, 6], "reduce_sum", dict(rows=4, reduced=30, inner=1)),
    (lambda s, x: torch.max(x, 2)[0], [6, 8], "reduce_max", dict(rows=6, reduced=8, inner=1, indices=1)),
    (lambda s, x: x.max(dim=1).values, [6, 8], "reduce_max", dict(rows=1, reduced=6, inner=8, indices=1)),
    (lambda s, x: torch.max(x, 2, keepdim=True)[0], [6, 8], "reduce_max", dict(rows=6, reduced=8, inner=1, indices=1)),
    (lambda s, x: x.amax(dim=1, keepdim=True), [4, 5, 6], "reduce_max", dict(rows=1, reduced=4, inner=30, indices=0)),
    (lambda s, x: torch.amax(x, dim=(-2, -1)), [4, 5, 6], "reduce_max", dict(rows=4, reduced=30, inner=1, indices=0)),
])
def test_reductions_over_adjacent_axes_are_their_kinds(f, shape, kind, config):
    mods = ()
    (layer,) = [l for l in _layers(f, shape, *mods) if l["kind"] == kind]
    assert layer["config"] == config and layer["role"] == "hidden" and "approx" not in layer
    k = get_kind(kind)
    out = f(_Op(f, shape, *mods), torch.zeros(2, *shape))
    assert k.out_shape(config)[0] * k.out_shape(config)[1] == out[0].numel()
    built = build_layer(kind, config)
    x = torch.randn(2, *k.in_shape(config), requires_grad=True)
    y = built(x)
    assert tuple(y.shape[1:]) == tuple(k.out_shape(config))
    y.sum().backward()
    assert x.grad.shape == x.shape


@pytest.mark.parametrize("f, shape, why", [
    (lambda s, x: x.sum(0), [6, 8], "over the batch"),
    (lambda s, x: x.sum((1, 3)), [4, 5, 6], "not adjacent"),
    (lambda s, x: torch.max(x, x), [6, 8], "of two tensors"),
    (lambda s, x: x.sum() + x, [6, 8], "over every axis"),
    (lambda s, x: F.adaptive_max_pool1d(x, 2), [6, 8], "only global max pooling"),
    (lambda s, x: x.mean() + x, [4, 5, 6], "over every axis"),
])
def test_other_reductions_are_refused_with_the_reason(f, shape, why):
    ops = _refused(f, shape)
    assert any(why in op for op in ops), ops


def test_the_argmax_of_torch_max_is_in_its_bytes():
    c = dict(rows=6, reduced=8, inner=4)
    k = get_kind("reduce_max")
    with_ix, without = k.train_bytes(dict(c, indices=1), 4, "hidden"), k.train_bytes(dict(c, indices=0), 4, "hidden")
    assert with_ix - without == pytest.approx(4 * 2 * 8 * 6 * 4)
    assert k.train_flops(dict(c, indices=1), 4, "hidden") == k.train_flops(dict(c, indices=0), 4, "hidden") > 0


def test_a_sum_kind_and_a_max_kind_are_in_the_prior_with_the_other_argmax_among_candidates():
    from thor_sdk.campaign.prior import _valid, candidates, load_prior

    prior = load_prior()
    assert {c["config"]["indices"] for c in prior["kinds"]["reduce_max"]["configs"]} == {1}
    got = candidates(prior, "reduce_max", 60, seed=0)
    assert all(_valid("reduce_max", c) for c, _, _ in got)
    assert {c["indices"] for c, _, _ in got} == {0, 1}
    assert prior["kinds"]["reduce_sum"]["configs"]
