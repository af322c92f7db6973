"""TDP baseline (Green Algorithms; CodeCarbon's fallback without a meter): energy = TDP x utilisation x time.

The time of a training step is its training FLOPs over an effective throughput (FLOP/s):

- given (``flops_per_s=``), or
- fitted from measured whole-model times (``fit(runs)``, ``runs`` of ``(model, batch_size, time_s)``):
  one throughput for the device, minimising the RELATIVE squared error of the predicted times
  ``sum((flops_i / (F * t_i) - 1)^2)``, i.e. ``1/F = sum(r_i) / sum(r_i^2)`` with ``r_i = flops_i / t_i``.

The TDP comes from ``tdp_w=`` or the device table shipped beside this file (``tdp_table.json``, each
entry with its source; ``lookup_tdp(name)``). The utilisation defaults to 0.5: CodeCarbon's constant
mode takes 50% of the CPU's TDP when no meter is readable; Green Algorithms' default core usage factor
is 1.0 (pass ``utilisation=1.0`` for it).

With ``metric="time"`` the answer is the FLOPs-throughput time and the result says energy needs a
meter. With ``metric="energy"`` the answer is TDP x utilisation x that time: an ASSUMED energy,
marked ``measured: False`` and ``assumed_power_w``; thor-sdk never reports it as a measurement.
"""

import math
import os
import re

from thor_sdk.errors import FormatError, NotFoundError, UsageError

from .base import Baseline, check_batch_size, check_metric, check_positive, model_layers, train_flops

TABLE_FORMAT = "thor-sdk/tdp-table"
CODECARBON_UTILISATION = 0.5  # CodeCarbon's constant mode: 50% of the TDP (maintainers, mlco2/codecarbon#524)
MAX_RUNS = 100_000


def _table_path():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "tdp_table.json")


def _key(name):
    return re.sub(r"[\s_\-]+", "", str(name).lower())


def load_tdp_table(path=None):
    """The device table (``{"format", "version", "devices": [{name, aliases, kind, tdp_w, source}]}``)."""
    path = path or _table_path()
    from thor_sdk.store.files import read_json

    doc = read_json(path, "TDP table")
    if not isinstance(doc, dict) or doc.get("format") != TABLE_FORMAT or not isinstance(doc.get("devices"), list):
        raise FormatError(f"{path}: not a {TABLE_FORMAT} document")
    for d in doc["devices"]:
        if not isinstance(d, dict) or not isinstance(d.get("name"), str) or not d.get("source"):
            raise FormatError(f"{path}: every device needs a name and a source")
        check_positive(f"{path}: tdp_w of {d.get('name')}", d.get("tdp_w"))
    return doc


def lookup_tdp(name, table=None):
    """The table entry for a device ``name`` (or one of its aliases; case, spaces, hyphens ignored);
    NotFoundError naming the known devices when absent."""
    doc = table or load_tdp_table()
    k = _key(name)
    for d in doc["devices"]:
        if k in {_key(d["name"])} | {_key(a) for a in d.get("aliases", [])}:
            return dict(d)
    names = ", ".join(d["name"] for d in doc["devices"])
    raise NotFoundError(f"no TDP known for {name!r}: give tdp_w (--tdp-w) or one of: {names}")


class TdpBaseline(Baseline):
    """Energy = TDP x utilisation x (training FLOPs / effective FLOP/s); time alone with ``metric="time"``.

    ``device``: a name in the TDP table; ``tdp_w``: the TDP itself (wins over ``device``);
    ``flops_per_s``: the effective throughput (else ``fit`` it from measured whole-model times)."""

    name = "tdp"
    _fitted = ("flops_per_s_",)

    def __init__(self, metric="energy", tdp_w=None, device=None, utilisation=CODECARBON_UTILISATION,
                 flops_per_s=None):
        self.metric = check_metric(metric)
        self.tdp_w = check_positive("tdp_w", tdp_w, allow_none=True)
        self.device = device
        u = check_positive("utilisation", utilisation)
        if u > 1.0:
            raise UsageError(f"utilisation is a fraction of the TDP in (0, 1], got {utilisation!r}")
        self.utilisation = u
        self.flops_per_s = check_positive("flops_per_s", flops_per_s, allow_none=True)
        self.tdp_source_ = None
        if self.tdp_w is not None:
            self.tdp_w_, self.tdp_source_ = self.tdp_w, "given (tdp_w)"
        elif device is not None:
            entry = lookup_tdp(device)
            self.tdp_w_, self.tdp_source_ = float(entry["tdp_w"]), f"{entry['name']}: {entry['source']}"
        elif self.metric == "energy":
            raise UsageError("the TDP baseline needs tdp_w (--tdp-w) or a device from its table for energy")
        if self.flops_per_s is not None:
            self.flops_per_s_, self.throughput_source_ = self.flops_per_s, "given (flops_per_s)"

    @property
    def assumptions(self):
        how = getattr(self, "throughput_source_", "not yet fitted")
        text = (f"a training step runs at one effective throughput for every model ({how}); time = training "
                "FLOPs / throughput")
        if self.metric == "energy":
            text += (f"; power = TDP x utilisation = {self.tdp_w_:g} W x {self.utilisation:g} (TDP {self.tdp_source_}); "
                     "energy = power x time, an assumption, not a measurement")
        else:
            text += "; energy is not estimated: it needs a meter (TDP x time would be an assumption)"
        return text

    def fit(self, runs):
        """Fit the effective FLOP/s from measured whole-model times: ``runs`` of ``(model, batch_size,
        time_s)`` (``model`` in any form ``estimate`` takes) or dicts with those keys; a dict with
        ``train_flops`` (a PRE run row) is used as it is, without rebuilding its model."""
        ratios = []
        for i, run in enumerate(runs):
            if i >= MAX_RUNS:
                raise UsageError(f"more than {MAX_RUNS} runs")
            if isinstance(run, dict) and "train_flops" in run:
                f = run["train_flops"]
                if isinstance(f, bool) or not isinstance(f, (int, float)) or not math.isfinite(f) or f < 0:
                    raise UsageError(f"run {i}: train_flops must be a finite number >= 0, got {f!r}")
                check_positive(f"run {i}: time_s", run.get("time_s"))
                if f > 0:
                    ratios.append(f / run["time_s"])
                continue
            model, b, t = (run["model"], run["batch_size"], run["time_s"]) if isinstance(run, dict) else run
            b, t = check_batch_size(b), check_positive(f"run {i}: time_s", t)
            f = train_flops(model_layers(model)[1], b)
            if f > 0:
                ratios.append(f / t)
        if not ratios:
            raise UsageError("the TDP baseline's throughput needs at least one measured run of a model with FLOPs")
        inv = math.fsum(ratios) / math.fsum(r * r for r in ratios)
        self.flops_per_s_ = 1.0 / inv
        self.n_runs_ = len(ratios)
        self.throughput_source_ = f"fitted on {len(ratios)} measured whole-model run(s), relative least squares"
        return self

    def estimate(self, model, batch_size, input_shape=None):
        self._check_fitted()
        batch_size = check_batch_size(batch_size)
        name, layers, _ = model_layers(model, input_shape)
        flops = train_flops(layers, batch_size)
        time_s = flops / self.flops_per_s_
        extra = {"model": name, "batch_size": batch_size, "train_flops": flops, "time_s": time_s,
                 "flops_per_s": self.flops_per_s_}
        if self.metric == "time":
            return self._result(time_s, note="time from a FLOPs throughput; energy needs a meter", **extra)
        power_w = self.tdp_w_ * self.utilisation
        return self._result(power_w * time_s, assumed_power_w=power_w, tdp_w=self.tdp_w_,
                            utilisation=self.utilisation, tdp_source=self.tdp_source_,
                            note="TDP x utilisation x time: an assumed energy, not a measurement", **extra)
