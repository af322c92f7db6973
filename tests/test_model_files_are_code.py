"""`file.py:Class` runs that file's code: whatever it raises while imported, built or traced -- SystemExit and
KeyboardInterrupt included -- is one `Error:` line and exit 2, never a silent exit 0."""

import pytest

pytest.importorskip("torch")

from thor_sdk.cli.main import main  # noqa: E402
from thor_sdk.errors import ModelCodeError  # noqa: E402
from thor_sdk.layers import layers_of  # noqa: E402

NET = """from torch import nn
{top}
class Net(nn.Module):
    def __init__(self):
        {init}
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        {forward}
        return self.fc(x)
"""


def model_file(tmp_path, top="", init="pass", forward="pass"):
    path = tmp_path / "net.py"
    path.write_text(NET.format(top=top, init=init, forward=forward))
    return f"{path}:Net"


def run_cli(argv, capsys):
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code, capsys.readouterr().err


@pytest.mark.parametrize("where,code", [
    ("top", "import sys; sys.exit(0)"),
    ("top", "raise SystemExit"),
    ("top", "raise KeyboardInterrupt('from the file')"),
    ("top", "raise ValueError('broken file')"),
    ("init", "import sys; sys.exit()"),
    ("init", "raise KeyboardInterrupt"),
    ("init", "exit(3)"),
])
def test_a_model_file_that_exits_or_raises_while_loaded_is_one_error_line(tmp_path, capsys, where, code):
    ref = model_file(tmp_path, **{where: code})
    with pytest.raises(ModelCodeError):
        layers_of(ref, input_shape=[4])
    exit_code, err = run_cli(["layers", ref, "--input-shape", "4"], capsys)
    assert exit_code == ModelCodeError.exit_code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: could not ") and "Traceback" not in err


def test_a_forward_that_calls_sys_exit_never_reads_as_success(tmp_path, capsys):
    ref = model_file(tmp_path, forward="import sys; sys.exit(0)")
    exit_code, err = run_cli(["layers", ref, "--input-shape", "4"], capsys)
    lines = err.strip().splitlines()
    assert exit_code == 2 and len(lines) == 1 and lines[0].startswith("Error: ") and "sys.exit" in lines[0]


def test_a_forward_that_raises_keyboard_interrupt_or_exits_is_one_model_code_error(tmp_path):
    import thor_sdk
    from thor_sdk.harness.protocol import ProtocolSettings

    with pytest.raises(ModelCodeError, match="could not trace .*KeyboardInterrupt"):
        layers_of(model_file(tmp_path, forward="raise KeyboardInterrupt"), input_shape=[4])
    ref = model_file(tmp_path, init="self.calls = 0", forward="""self.calls += 1
        if self.calls > 3:
            import sys; sys.exit(0)""")
    with pytest.raises(ModelCodeError, match=r"measuring .*sys.exit\(0\)"):
        thor_sdk.measure(ref, input_shape=[4], batch_size=2,
                         settings=ProtocolSettings(min_rounds=2, max_rounds=2, min_window_s=0.002))


def test_a_well_behaved_model_file_still_loads(tmp_path):
    assert [l["kind"] for l in layers_of(model_file(tmp_path), input_shape=[4]).layers] == ["output"]
