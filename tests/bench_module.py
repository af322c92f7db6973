"""Loads a benchmark script of bench/ (not a package) as a module, for the tests that run one."""

import importlib.util
import os

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench")


def load_bench(name):
    """``bench/<name>.py`` as a fresh module."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(BENCH, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
