"""Kind ``dropout2d``: channel dropout (nn.Dropout1d/2d/3d, F.dropout1d/2d/3d) read, built and costed as itself.

Measured before it became a kind (training step, one thread): nn.Dropout2d at 0.1x an nn.Dropout of the same
tensor, so neither ``dropout`` nor the generic elementwise kind stands for it."""

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from thor_sdk.errors import UnsupportedOperatorError, UsageError  # noqa: E402
from thor_sdk.layers.extract import layers_from_module  # noqa: E402
from thor_sdk.layers.kinds import get_kind  # noqa: E402

KIND = get_kind("dropout2d")


class _Net(nn.Module):
    def __init__(self, conv, drop, feats):
        super().__init__()
        self.conv, self.drop, self.fc = conv, drop, nn.Linear(feats, 2)

    def forward(self, x):
        return self.fc(torch.flatten(self.drop(self.conv(x)), 1))


@pytest.mark.parametrize("drop,pre,shape,channels,spatial", [
    (nn.Dropout2d(0.25), nn.Conv2d(3, 8, 3, padding=1), (3, 8, 6), 8, 48),
    (nn.Dropout1d(0.1), nn.Conv1d(3, 8, 3, padding=1), (3, 20), 8, 20),
    (nn.Dropout3d(0.5), nn.ReLU(), (4, 3, 4, 5), 4, 60),  # no conv3d kind: an activation before it
])
def test_a_channel_dropout_module_is_kind_dropout2d(drop, pre, shape, channels, spatial):
    layers = layers_from_module(_Net(pre, drop, channels * spatial), shape)
    (d,) = [l for l in layers if l["kind"] == "dropout2d"]
    assert d["config"] == {"channels": channels, "spatial": spatial, "p": drop.p}
    assert d["op"] == type(drop).__name__


def test_functional_channel_dropouts_and_p_zero():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.fc = nn.Conv2d(3, 8, 3, padding=1), nn.Linear(8 * 36, 2)

        def forward(self, x):
            x = F.dropout2d(F.relu(self.conv(x)), 0.2, training=self.training)
            x = F.dropout2d(x, p=0.0)  # PyTorch returns its input: no layer
            return self.fc(torch.flatten(x, 1))

    kinds = [(l["kind"], l["config"]) for l in layers_from_module(Net(), (3, 6, 6))]
    assert [c for k, c in kinds if k == "dropout2d"] == [{"channels": 8, "spatial": 36, "p": 0.2}]


def test_a_channel_dropout_on_an_input_of_another_rank_is_refused():
    net = _Net(nn.Conv1d(3, 8, 3, padding=1), nn.Dropout2d(0.2), 8 * 10)  # (C, L) read as one unbatched image
    with pytest.raises(UnsupportedOperatorError, match=r"Dropout2d\(an input of 2 axes per sample\)"):
        layers_from_module(net, (3, 10))


def test_the_probe_built_drops_whole_channels_and_its_shapes_and_terms():
    from thor_sdk.layers.build import build_layer

    c = {"channels": 64, "spatial": 100, "p": 0.5}
    m = build_layer("dropout2d", c)
    m.train()
    y = m(torch.ones(8, 64, 100))
    rows = y.reshape(8 * 64, 100)
    assert bool(((rows == 0).all(1) | (rows == 2.0).all(1)).all())  # a channel is all dropped or all kept
    assert 0.3 < float((rows == 0).all(1).float().mean()) < 0.7
    assert KIND.in_shape(c) == KIND.out_shape(c) == (64, 100)
    assert KIND.train_flops(c, 16, "hidden") == 2 * 2.0 * 64 * 100 * 16
    assert KIND.train_bytes(c, 16, "hidden") > KIND.train_bytes(c, 16, "input") > 0
    with pytest.raises(UsageError, match="p must be in"):
        KIND.check_config(dict(c, p=1.0))


def test_the_zoo_has_a_channel_dropout_and_the_prior_places_the_kind():
    from thor_sdk.campaign.prior import candidates, load_prior
    from thor_sdk.layers import layers_of

    assert {"channels": 20, "spatial": 64, "p": 0.5} in [l["config"] for l in layers_of("mnist_classic").layers
                                                         if l["kind"] == "dropout2d"]
    prior = load_prior()
    assert "dropout2d" in prior["kinds"]
    cands = candidates(prior, "dropout2d", 20)
    assert len(cands) == 20 and len({c["channels"] for c, _, _ in cands}) > 3
