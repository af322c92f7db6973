"""The kinds' training terms by role: FLOPs against torch's own counter (the input role skips its input's gradient),
and a forward-only recurrent layer's saved gates."""

import math

import pytest

torch = pytest.importorskip("torch")

# layers whose backward torch's FlopCounterMode sees op by op on a CPU (nn.LSTM runs one fused kernel it does not
# count; lstm shares lstm_cell's per-step formula)
CASES = [
    ("linear", {"in_features": 10, "out_features": 20, "tokens": 1, "bias": 1}),
    ("conv2d", {"in_channels": 3, "out_channels": 8, "kernel": 3, "stride": 1, "padding": 1, "groups": 1,
                "height": 8, "width": 8, "bias": 1}),
    ("gru", {"input_size": 10, "hidden_size": 32, "seq_len": 7, "num_layers": 1}),
    ("gru", {"input_size": 10, "hidden_size": 32, "seq_len": 7, "num_layers": 2}),
    ("gru_cell", {"input_size": 12, "hidden_size": 24, "steps": 5}),
    ("lstm_cell", {"input_size": 12, "hidden_size": 24, "steps": 5}),
    ("mha", {"embed_dim": 32, "num_heads": 4, "seq_len": 6, "kv_len": 6, "cross": 0, "need_weights": 0, "p": 0,
             "mask": 0, "causal": 0}),
    ("mha", {"embed_dim": 32, "num_heads": 4, "seq_len": 6, "kv_len": 9, "cross": 1, "need_weights": 0, "p": 0,
             "mask": 0, "causal": 0}),
    ("transformer_block", {"d_model": 32, "n_heads": 4, "head_dim": 8, "d_ff": 64, "seq_len": 6}),
]


def _per_sample(fn, config, role):
    """The per-sample slope of one of a kind's step terms (``train_flops``, ``train_bytes``), affine in the batch size."""
    return fn(config, 2, role) - fn(config, 1, role)


def _counted_flops(kind, config, role, batch_size=3):
    """FLOPs torch counts in one forward and backward of the layer, its input needing a gradient as ``hidden``."""
    from torch.utils.flop_counter import FlopCounterMode

    from thor_sdk.layers.build import build_layer
    from thor_sdk.layers.kinds import get_kind

    torch.manual_seed(0)
    layer = build_layer(kind, config)
    x = torch.randn(batch_size, *get_kind(kind).in_shape(config), requires_grad=role == "hidden")
    with FlopCounterMode(display=False) as counter:
        y = layer(x)
        (y[0] if isinstance(y, tuple) else y).sum().backward()
    return counter.get_total_flops()


@pytest.mark.parametrize("kind,config", CASES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(CASES)])
def test_the_input_role_skips_what_torch_skips(kind, config):
    """Hidden minus input FLOPs per step are exactly what torch's counter finds between the two roles: the whole
    data gradient of a single operation, only the first projection's of a recurrent layer (its state's gradient runs
    back through every step whatever the role: counted as 2x the forward, a trained input GRU read 20-30% short) and
    none of a pre-LN transformer block's (its norm's weights need the gradient of everything after it)."""
    from thor_sdk.layers.kinds import get_kind

    k = get_kind(kind)
    b = 3
    kind_diff = k.train_flops(config, b, "hidden") - k.train_flops(config, b, "input")
    torch_diff = _counted_flops(kind, config, "hidden", b) - _counted_flops(kind, config, "input", b)
    assert kind_diff == pytest.approx(torch_diff, rel=1e-9, abs=1e-6)
    assert k.input_grad_flops(config) * b == pytest.approx(torch_diff, rel=1e-9, abs=1e-6)


def test_a_recurrent_input_layer_counts_its_state_gradient():
    """A trained input GRU's step is its forward three times less the first layer's input projection's data
    gradient, not twice its forward; frozen, the input layer is its forward alone and a hidden one its forward and
    input gradient (two forwards)."""
    from thor_sdk.layers.kinds import get_kind

    k = get_kind("gru")
    c = {"input_size": 10, "hidden_size": 32, "seq_len": 7, "num_layers": 2}
    fwd = k.forward_flops(c)
    assert _per_sample(k.train_flops, c, "input") == pytest.approx(3 * fwd - 6.0 * 7 * 32 * 10)
    assert _per_sample(k.train_flops, c, "input") > 2.5 * fwd
    assert _per_sample(k.train_flops, c, "hidden") == pytest.approx(3 * fwd)
    frozen = dict(c, frozen=1)
    for role, n in (("input", 1), ("hidden", 2)):  # no weight gradient, no update: nothing per step
        assert k.train_flops(frozen, 4, role) == pytest.approx(4 * n * fwd)
    lin = get_kind("linear")
    cl = {"in_features": 10, "out_features": 20, "tokens": 1, "bias": 1}
    assert _per_sample(lin.train_flops, cl, "input") == pytest.approx(2 * lin.forward_flops(cl))


@pytest.mark.parametrize("kind,config,per_step", [
    ("lstm", {"input_size": 10, "hidden_size": 32, "seq_len": 7, "num_layers": 2}, 5 * 32 * 7 * 2),
    ("gru", {"input_size": 10, "hidden_size": 32, "seq_len": 7, "num_layers": 1}, 4 * 32 * 7),
    ("lstm_cell", {"input_size": 12, "hidden_size": 24, "steps": 5}, 5 * 24 * 5),
    ("gru_cell", {"input_size": 12, "hidden_size": 24, "steps": 5}, 4 * 24 * 5),
])
def test_a_forward_only_recurrent_layer_writes_its_gates_once(kind, config, per_step):
    """The gates and states a recurrent layer keeps per step are written by its forward and read back by its backward
    (2 x 4 bytes each); frozen and reading the data, it has no backward: written once (counted twice, its forward-only
    samples sat under the lstm law and decided against its per-call cost)."""
    from thor_sdk.layers.kinds import _prod, get_kind

    k = get_kind(kind)
    frozen = dict(config, frozen=1)
    assert not k.backward_runs("input", frozen) and k.backward_runs("input", config)
    generic_fwd = 4.0 * _prod(k.in_shape(config)) + 4.0 * _prod(k.out_shape(config))
    assert _per_sample(k.train_bytes, frozen, "input") == pytest.approx(generic_fwd + 4.0 * per_step)
    # trained, the same gates written and read back
    trained, generic_train = _per_sample(k.train_bytes, config, "input"), 2 * generic_fwd
    assert trained == pytest.approx(generic_train + 8.0 * per_step)


def test_a_frozen_attention_layer_reading_the_data_writes_its_saved_activations_once():
    """transformer_block and mha whose backward never runs (frozen, role input) count their saved activations once
    (written, never read back), a trained one twice; sdpa keeps two passes either way (written once, its forward-only
    samples sat over the law on two profiles)."""
    from thor_sdk.layers.kinds import _EXTRA_BYTES, get_kind

    cases = {
        "transformer_block": {"d_model": 64, "n_heads": 4, "head_dim": 16, "d_ff": 128, "seq_len": 16},
        "mha": {"embed_dim": 64, "num_heads": 4, "seq_len": 16, "kv_len": 16, "cross": 0, "need_weights": 1,
                "p": 0.1, "causal": 0, "mask": 0},
    }
    for kind, c in cases.items():
        spec = get_kind(kind)
        frozen = dict(c, frozen=1)
        assert not spec.backward_runs("input", frozen) and spec.backward_runs("hidden", frozen)
        once, twice = _EXTRA_BYTES[kind](frozen, False), _EXTRA_BYTES[kind](frozen, True)
        assert once > 0 and twice == pytest.approx(2.0 * once)
        # the whole per-sample bytes of the forward-only layer: its input and output once, its saved work once
        n_in, n_out = math.prod(spec.in_shape(frozen)), math.prod(spec.out_shape(frozen))
        per_sample = spec.train_bytes(frozen, 2, "input") - spec.train_bytes(frozen, 1, "input")
        assert per_sample == pytest.approx(4.0 * n_in + 4.0 * n_out + once)
    sdpa = {"num_heads": 2, "seq_len": 8, "kv_len": 8, "head_dim": 16, "p": 0.1, "causal": 0}
    assert _EXTRA_BYTES["sdpa"](sdpa, False) == _EXTRA_BYTES["sdpa"](sdpa, True) > 0
