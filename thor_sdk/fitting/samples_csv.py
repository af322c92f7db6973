"""Per-layer samples measured elsewhere, as CSV (``thor-sdk fit --samples layers.csv``).

Columns: ``kind``, ``role`` (input|hidden|output; optional, default hidden, output for kind
output), ``batch_size``, ``time_s`` and/or ``energy_j`` (at least one per row), and the kind's
feature columns (``thor-sdk kinds``; a defaulted one, a conv's ``dilation``, a layer's ``frozen`` or an
activation's ``inplace``, may be empty: it reads as its default). Columns of other kinds' features are left empty. Extra columns are ignored. See
docs/samples-csv.md.

Read strictly (``thor_sdk.store.files.read_csv``): UTF-8, no NUL bytes, no duplicate column, every row
as wide as the header. Every value is checked before anything is fitted: a role the kind has, a batch
size that is an integer in [1, MAX_BATCH_SIZE], features within the kind's bounds
(``Kind.check_config``), and costs that are finite, positive and at most MAX_SAMPLE_COST.
"""

import os

from thor_sdk.errors import FormatError, ThorError
from thor_sdk.layers.kinds import DEFAULT_FEATURES, get_kind

METRIC_COLUMNS = {"time": "time_s", "energy": "energy_j"}
#: the largest batch size a row may give (as the estimator runtime's)
MAX_BATCH_SIZE = 10 ** 9
#: the largest cost of one layer in one training step a row may give (seconds or joules)
MAX_SAMPLE_COST = 1e6
#: rows read from one file (a device profile stores a few hundred samples; fitting is linear in rows)
MAX_ROWS = 100_000


def read_samples_csv(path):
    from thor_sdk.store.files import csv_number, read_csv

    path = os.fspath(path)
    header, rows = read_csv(path, ("kind", "batch_size"), "samples CSV")
    if not any(c in header for c in METRIC_COLUMNS.values()):
        raise FormatError(f"samples CSV {path}: a samples CSV needs at least the columns kind, batch_size and "
                          "time_s or energy_j")
    if len(rows) > MAX_ROWS:
        raise FormatError(f"samples CSV {path}: {len(rows)} rows; at most {MAX_ROWS} are read")
    out = []
    for line, row in rows:
        where = f"{path}:{line}"
        try:
            kind = get_kind(row["kind"])
        except ThorError as e:
            raise FormatError(f"{where}: {e}") from None
        default = "hidden" if "hidden" in kind.roles else kind.roles[0]  # output: output; embedding: input
        role = row.get("role") or default
        if role not in kind.roles:
            raise FormatError(f"{where}: role {role!r} is not one of kind {kind.name}'s roles "
                              f"({', '.join(kind.roles)}; empty: {default})")
        defaults = DEFAULT_FEATURES.get(kind.name, {})  # dilation 1, frozen and inplace 0 where left empty
        missing = [f for f in kind.features if not row.get(f) and f not in defaults]
        if missing:
            raise FormatError(f"{where}: kind {kind.name} needs numeric columns "
                              f"{', '.join(f for f in kind.features if f not in defaults)} and batch_size (empty: "
                              f"{', '.join(missing)})")
        config = {f: csv_number(row[f], where, f) if row.get(f) else defaults[f] for f in kind.features}
        try:
            kind.check_config(config)
        except ThorError as e:
            raise FormatError(f"{where}: {e}") from None
        batch = csv_number(row["batch_size"], where, "batch_size", integer=True, low=1, high=MAX_BATCH_SIZE)
        got_metric = False
        for metric, col in METRIC_COLUMNS.items():
            raw = row.get(col) or ""
            if not raw:
                continue
            value = csv_number(raw, where, col, low=0, low_open=True, high=MAX_SAMPLE_COST)
            got_metric = True
            out.append({"kind": kind.name, "role": role, "batch_size": batch, "config": config,
                        "metric": metric, "value": value, "std": 0.0, "n": 1, "flagged": False,
                        "flag_reason": None, "source": f"{os.path.basename(path)}:{line}"})
        if not got_metric:
            raise FormatError(f"{where}: give time_s or energy_j")
    if not out:
        raise FormatError(f"{path}: no samples")
    return out
