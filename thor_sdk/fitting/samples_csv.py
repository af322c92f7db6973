"""Per-layer samples measured elsewhere, as CSV (``thor-sdk fit --samples layers.csv``).

Columns: ``kind``, ``role`` (input|hidden|output; optional, default hidden, output for kind
output), ``batch_size``, ``time_s`` and/or ``energy_j`` (at least one per row), and the kind's
feature columns (``thor-sdk kinds``). Columns of other kinds' features are left empty. Extra
columns are ignored. See docs/samples-csv.md.
"""

import csv
import math
import os

from thor_sdk.errors import FormatError, NotFoundError, ThorError
from thor_sdk.layers.kinds import get_kind

METRIC_COLUMNS = {"time": "time_s", "energy": "energy_j"}


def read_samples_csv(path):
    if not os.path.isfile(path):
        raise NotFoundError(f"no such samples file: {path}")
    out = []
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if not reader.fieldnames or "kind" not in reader.fieldnames or "batch_size" not in reader.fieldnames:
            raise FormatError(f"{path}: a samples CSV needs at least the columns kind, batch_size and time_s or energy_j")
        for line, row in enumerate(reader, start=2):
            try:
                kind = get_kind(row["kind"].strip())
            except ThorError as e:
                raise FormatError(f"{path}:{line}: {e}") from None
            role = (row.get("role") or "").strip() or ("output" if kind.name == "output" else "hidden")
            try:
                config = {f: float(row[f]) for f in kind.features}
                batch = int(float(row["batch_size"]))
            except (KeyError, TypeError, ValueError):
                raise FormatError(f"{path}:{line}: kind {kind.name} needs numeric columns "
                                  f"{', '.join(kind.features)} and batch_size") from None
            got_metric = False
            for metric, col in METRIC_COLUMNS.items():
                raw = (row.get(col) or "").strip()
                if not raw:
                    continue
                try:
                    value = float(raw)
                except ValueError:
                    raise FormatError(f"{path}:{line}: {col} is not a number: {raw!r}") from None
                if not math.isfinite(value):
                    raise FormatError(f"{path}:{line}: {col} is not finite")
                got_metric = True
                out.append({"kind": kind.name, "role": role, "batch_size": batch, "config": config,
                            "metric": metric, "value": value, "std": 0.0, "n": 1, "flagged": False,
                            "flag_reason": None, "source": f"{os.path.basename(path)}:{line}"})
            if not got_metric:
                raise FormatError(f"{path}:{line}: give time_s or energy_j")
    if not out:
        raise FormatError(f"{path}: no samples")
    return out
