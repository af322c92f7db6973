"""Suite-wide set-up: one intra-op thread in every test process (pyproject runs the suite in two processes)."""

import os


def pytest_configure(config):
    """Before any test imports torch or xdist starts its workers (they inherit the environment): one OpenMP/MKL
    thread each unless the caller chose. On the 2-core VM of 2026-11-29 the whole suite took 608-655 s in one
    process (torch's default threads) and 787 s in one with one thread (the VM's speed moves); in two workers
    with torch's default threads 712 s (their OpenMP threads spin on each other's core), one thread each 481 s."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
