"""Bounds of the numbers a user gives as options or arguments: one check, one UsageError wording.

Every option that is a count, a size, a duration, a rate or a power goes through ``number`` before any
work is done or anything is written: finite, in its range, an integer where it counts something. The
limits below are the documented ones (``docs/``); a value beyond them is refused, never clamped.
"""

import math

from thor_sdk.errors import UsageError

#: batch size of an estimate (arithmetic only)
MAX_BATCH_SIZE = 10 ** 9
#: batch size of anything that allocates a batch (probe, measure, export, power profile, training)
MAX_RUN_BATCH_SIZE = 65536
#: a learning rate above this diverges for every model here; it is a typo
MAX_LR = 10.0
MAX_EPOCHS = 100000
MAX_STEPS = 1000000
#: watts (a power cap)
MAX_POWER_W = 1e6
#: seconds of any duration option (a year)
MAX_SECONDS = 3.2e7


def number(name, value, low=None, high=None, low_open=False, integer=False, optional=False):
    """``value`` if it is a finite number in ``[low, high]`` (``low_open``: ``(low, high]``), an integer
    when ``integer`` (None passes when ``optional``); UsageError naming the option otherwise."""
    if value is None and optional:
        return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    try:
        ok = ok and math.isfinite(value)
    except OverflowError:
        ok = False
    if ok and integer:
        ok = value == int(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value <= high
    if not ok:
        what = "an integer" if integer else "a finite number"
        rng = []
        if low is not None:
            rng.append(f"{'>' if low_open else '>='} {low:g}")
        if high is not None:
            rng.append(f"<= {high:g}")
        raise UsageError(f"{name} must be {what}{' ' + ' and '.join(rng) if rng else ''}, got {value!r}")
    return int(value) if integer else value


def batch_sizes(values, high=MAX_RUN_BATCH_SIZE, name="batch size"):
    """Distinct integer batch sizes in ``[1, high]``, as a list in the order given."""
    out = []
    for b in values:
        b = number(name, b, low=1, high=high, integer=True)
        if b in out:
            raise UsageError(f"{name} {b} is given twice")
        out.append(b)
    if not out:
        raise UsageError(f"give at least one {name}")
    return out
