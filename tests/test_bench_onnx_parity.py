"""bench/bench_onnx_parity.py: one net's verdict through the real export and both readers -- the same layers, the
argmax torch keeps and ONNX does not, an ONNX refusal named, a torch.fx refusal named."""

import pytest
from bench_module import load_bench

torch = pytest.importorskip("torch")
nn = torch.nn


class _MaxOverTime(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 8, 3)
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc(self.conv(x).max(dim=2).values)


class _Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(8, 8)
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        q = self.q(x)
        return self.fc((q @ q.transpose(1, 2)).softmax(-1) @ q).mean(dim=1)


@pytest.mark.parametrize("label, factory, shape, status, detail", [
    ("har", None, None, "same", "layers"),
    ("maxovertime", _MaxOverTime, (4, 10), "differs", "reduce_max"),
])
def test_a_net_read_the_same_or_its_first_difference(tmp_path, label, factory, shape, status, detail):
    bench = load_bench("bench_onnx_parity")
    from thor_sdk import models

    if factory is None:
        shape = tuple(models.model_spec(label).input_shape)
        got = bench.compare(label, label, lambda: models.build_model(label), shape, None, str(tmp_path))
    else:  # the module itself is the torch.fx reader's source
        got = bench.compare(label, factory(), factory, shape, None, str(tmp_path))
    assert got[0] == status and detail in got[1]


class _SequenceFirstMHA(nn.Module):
    """Kind mha from torch.fx (which finds the batch axis wherever it is); its ONNX export moves the batch axis
    where no pattern reads it (a batch_first module is read as kind mha from ONNX too)."""

    def __init__(self):
        super().__init__()
        self.att = nn.MultiheadAttention(8, 2)
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        h = x.transpose(0, 1)
        return self.fc(self.att(h, h, h, need_weights=False)[0].mean(dim=0))


def test_refusals_are_named_by_the_reader_that_refuses(tmp_path):
    bench = load_bench("bench_onnx_parity")
    status, detail = bench.compare("attention", _Attention(), _Attention, (6, 8), None, str(tmp_path))
    assert status == "fx refuses" and "x @ y" in detail
    status, detail = bench.compare("mha", _SequenceFirstMHA(), _SequenceFirstMHA, (6, 8), None, str(tmp_path))
    assert status == "refused" and "MatMul(of two activations)" in detail
