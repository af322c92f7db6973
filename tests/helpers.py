"""Helpers several test modules share: running the CLI in-process and a tiny layer-list model."""

import pytest


def cli(argv, capsys):
    """(exit code, stdout, stderr) of ``thor-sdk ARGV`` run in this process."""
    from thor_sdk.cli.main import main

    with pytest.raises(SystemExit) as ei:
        main(argv)
    cap = capsys.readouterr()
    return ei.value.code, cap.out, cap.err


#: a four-layer MLP as a layer list (format thor-sdk/layers): linear, relu, linear, output
TINY = {"format": "thor-sdk/layers", "version": 1, "name": "tiny", "input_shape": [16], "input_dtype": "float32",
        "layers": [
            {"name": "0", "kind": "linear", "role": "input", "config": {"in_features": 16, "out_features": 8,
                                                                         "tokens": 1, "bias": 1}},
            {"name": "1", "kind": "relu", "role": "hidden", "config": {"numel": 8}},
            {"name": "2", "kind": "linear", "role": "hidden", "config": {"in_features": 8, "out_features": 8,
                                                                          "tokens": 1, "bias": 1}},
            {"name": "3", "kind": "output", "role": "output", "config": {"in_features": 8, "out_features": 4,
                                                                          "tokens": 1}}]}
