"""The library API behind the CLI: probe, fit, estimate, measure.

Everything the ``thor-sdk`` commands do is callable from Python with the same arguments:

>>> import thor_sdk
>>> thor_sdk.probe(["lenet5"], device="host", batch_sizes=[32], out="lenet5.db")     # doctest: +SKIP
>>> doc = thor_sdk.fit("lenet5.db", out="host-estimator.json")                         # doctest: +SKIP
>>> thor_sdk.estimate("host-estimator.json", "lenet5", batch_size=32)["total"]         # doctest: +SKIP
>>> thor_sdk.measure("lenet5", device="host", batch_size=32)["mean"]                   # doctest: +SKIP
"""

import os
import statistics

from thor_sdk import __version__
from thor_sdk.errors import FormatError, UsageError

UNITS = {"time": "s", "energy": "J"}


def _check_metric(metric):
    if metric not in UNITS:
        raise UsageError(f"unknown metric {metric!r} (time or energy)")


def _device(device, meter=None, threads=None):
    """A Device object from a spec string (or the object itself)."""
    from thor_sdk.devices import get_device

    if hasattr(device, "measure_probe"):
        return device
    if threads is not None:
        if device != "host":
            raise UsageError("--threads applies to the host device only")
        if threads < 1:
            raise UsageError(f"--threads must be >= 1, got {threads}")
        return get_device(device, meter=meter, threads=threads)
    return get_device(device, meter=meter)


def _check_batch_sizes(batch_sizes):
    bs = [int(b) for b in batch_sizes]
    if not bs or any(b < 1 for b in bs):
        raise UsageError(f"batch sizes must be >= 1, got {list(batch_sizes)}")
    return bs


def probe(models, device="host", batch_sizes=(32,), metric="time", out="campaign.db", resume=False,
          max_probes=None, max_seconds=None, target_rel_std=None, runtime="torch", settings=None,
          input_shape=None, meter=None, progress=None, threads=None):
    """Run (or resume) a THOR probing campaign on ``device`` for the layers of ``models``."""
    from thor_sdk.fit.active import run_campaign
    from thor_sdk.harness.protocol import ProtocolSettings
    from thor_sdk.layers import ModelLayers, layers_of
    from thor_sdk.store import Campaign

    _check_metric(metric)
    if isinstance(models, str):
        models = [models]
    if resume:
        campaign = Campaign.open(out)
        meta = campaign.meta
        if threads is None and meta["device"].get("kind") == "host":
            threads = meta["device"].get("torch_threads")
        dev = _device(device, meter, threads)
        if models and sorted(models) != sorted(t["name"] for t in meta["targets"]):
            raise UsageError(f"{out} was started for {', '.join(t['name'] for t in meta['targets'])}; "
                             "--resume continues that campaign (leave --model out or give the same)")
        targets = [ModelLayers(t["name"], t["input_shape"], t["input_dtype"], t["layers"]) for t in meta["targets"]]
        batch_sizes, metric, runtime = meta["batch_sizes"], meta["metric"], meta["runtime"]
        settings = ProtocolSettings(**meta["protocol"])
    else:
        if not models:
            raise UsageError("give at least one --model")
        dev = _device(device, meter, threads)
        batch_sizes = _check_batch_sizes(batch_sizes)
        targets = [layers_of(m, input_shape=input_shape) for m in models]
        settings = settings or ProtocolSettings()
        dev.require_meter(metric)
        campaign = Campaign.create(out, {
            "device": dev.info(), "metric": metric, "unit": UNITS[metric], "batch_sizes": batch_sizes,
            "runtime": runtime, "protocol": settings.to_dict(), "targets": [t.to_dict() for t in targets],
            "producer": f"thor-sdk {__version__}",
        })
    with campaign:
        summary = run_campaign(campaign, dev, targets, batch_sizes, metric=metric, settings=settings,
                               runtime=runtime, max_probes=max_probes, max_seconds=max_seconds,
                               target_rel_std=target_rel_std, progress=progress)
    summary.update({"campaign": out, "device": dev.name, "metric": metric, "models": [t.name for t in targets],
                    "batch_sizes": batch_sizes})
    return summary


def fit(campaign=None, samples_csv=None, out=None, metric=None, random_state=0):
    """Fit one GP per layer kind from a campaign and/or a samples CSV; returns the estimator dict."""
    from thor_sdk.baselines.flops import fit_unit_per_flop
    from thor_sdk.fit.estimator import build_estimator, write_estimator
    from thor_sdk.fit.gp import KindGP
    from thor_sdk.fit.samples_csv import read_samples_csv
    from thor_sdk.layers.kinds import feature_vector, gp_features
    from thor_sdk.store import Campaign

    if campaign is None and samples_csv is None:
        raise UsageError("give a campaign database and/or --samples CSV")
    samples, device, sources = [], {"name": "unknown"}, []
    if campaign is not None:
        with Campaign.open(campaign) as c:
            meta = c.meta
            metric = metric or meta["metric"]
            device = meta["device"]
            samples += c.samples(metric)
            sources.append(os.path.basename(campaign))
    if samples_csv is not None:
        metric = metric or "time"
        extra = [s for s in read_samples_csv(samples_csv) if s["metric"] == metric]
        samples += extra
        sources.append(os.path.basename(samples_csv))
    _check_metric(metric)
    good = [s for s in samples if not s["flagged"]]
    flagged = [{"kind": s["kind"], "role": s["role"], "config": s["config"], "reason": s["flag_reason"]}
               for s in samples if s["flagged"]]
    if not good:
        raise FormatError(f"no usable {metric} samples in {', '.join(sources)}")
    by_kind = {}
    for s in good:
        by_kind.setdefault(s["kind"], []).append(s)
    gps = {}
    for kind, rows in by_kind.items():
        X = [feature_vector(kind, r["config"], r["batch_size"], r["role"]) for r in rows]
        gps[kind] = KindGP(gp_features(kind), random_state=random_state).fit(
            X, [r["value"] for r in rows], noise_std=[r["std"] for r in rows])
    doc = build_estimator(
        gps, device=device, metric=metric, unit=UNITS[metric], flops_baseline=fit_unit_per_flop(good),
        provenance={"sources": sources, "n_samples": {k: len(v) for k, v in by_kind.items()},
                    "flagged_excluded": flagged, "producer": f"thor-sdk {__version__}"})
    if out:
        write_estimator(doc, out)
    return doc


def estimate(estimator, model, batch_size=32, input_shape=None):
    """THOR estimate (per layer and total, with std) plus the FLOPs baseline, as a plain dict."""
    from thor_sdk.baselines.flops import flops_estimate
    from thor_sdk.layers import layers_of
    from thor_sdk.runtime import load_estimator

    (batch_size,) = _check_batch_sizes([batch_size])
    est = load_estimator(estimator) if not hasattr(estimator, "estimate") else estimator
    ml = layers_of(model, input_shape=input_shape)
    result = est.estimate(ml.layers, batch_size)
    fb = flops_estimate(ml.layers, batch_size, (est.flops_baseline or {}).get("unit_per_flop"))
    for row, f in zip(result["layers"], fb["layers"]):
        row["flops_baseline"] = f
    result["model"] = ml.name
    result["flops_baseline"] = {"total": fb["total"], "train_flops": fb["flops"]}
    return result


def measure(model, device="host", batch_size=32, metric="time", runtime="torch", settings=None, out=None,
            meter=None, threads=None):
    """Measure a whole model's training step on ``device`` (the ground truth THOR is checked against)."""
    from thor_sdk.harness.protocol import ProtocolSettings
    from thor_sdk.models import model_spec

    _check_metric(metric)
    (batch_size,) = _check_batch_sizes([batch_size])
    model_spec(model)  # unknown names fail here, before any work
    dev = _device(device, meter, threads)
    settings = settings or ProtocolSettings()
    r = dev.measure_model(model, batch_size, metric=metric, settings=settings, runtime=runtime)
    values = r.values(metric)
    result = {"model": model, "device": dev.name, "runtime": runtime, "metric": metric, "unit": UNITS[metric],
              "batch_size": batch_size, "mean": statistics.fmean(values), "median": statistics.median(values),
              "std": statistics.stdev(values) if len(values) > 1 else 0.0, "n": len(values),
              "steps_per_window": r.steps_per_window}
    if out:
        from thor_sdk.store import Campaign

        with Campaign.open(out) as c:
            c.add_model_run(model, batch_size, metric, result["mean"], result["std"], result["n"], runtime,
                            {"median": result["median"], "values": values})
    return result
