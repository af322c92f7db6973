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


#: intra-op threads on the host unless told otherwise: one thread is what a phone's training loop
#: typically gets, and several threads on a shared machine make timings swing many-fold
HOST_THREADS = 1


def _device(device, meter=None, threads=None):
    """A Device object from a spec string (or the object itself); the host runs ``HOST_THREADS``
    intra-op threads unless ``threads`` says otherwise (recorded in its ``info()``)."""
    from thor_sdk.devices import get_device

    if hasattr(device, "measure_probe"):
        return device
    if threads is not None:
        if device != "host":
            raise UsageError("--threads applies to the host device only")
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise UsageError(f"--threads must be an integer >= 1, got {threads!r}")
        return get_device(device, meter=meter, threads=threads)
    if device == "host":
        return get_device(device, meter=meter, threads=HOST_THREADS)
    return get_device(device, meter=meter)


def _check_batch_sizes(batch_sizes, high=None):
    """Integer batch sizes in [1, high] (default ``thor_sdk.bounds.MAX_BATCH_SIZE``: arithmetic only; what
    allocates a batch passes MAX_RUN_BATCH_SIZE); 16.7 or 0 is a UsageError, never rounded."""
    from thor_sdk.bounds import MAX_BATCH_SIZE, number

    bs = [number("batch size", b, low=1, high=high or MAX_BATCH_SIZE, integer=True) for b in batch_sizes]
    if not bs:
        raise UsageError("give at least one batch size")
    return bs


def _check_limits(max_probes=None, max_seconds=None, target_rel_std=None):
    """A campaign's stopping rules: a positive probe count, a positive finite duration (at most a year), a
    relative std in (0, 1]; None: no such rule."""
    from thor_sdk.bounds import MAX_SECONDS, number

    number("max_probes", max_probes, low=1, high=10 ** 9, integer=True, optional=True)
    number("max_seconds", max_seconds, low=0, low_open=True, high=MAX_SECONDS, optional=True)
    number("target_rel_std", target_rel_std, low=0, low_open=True, high=1, optional=True)


def probe(models, device="host", batch_sizes=(32,), metric="time", out="campaign.db", resume=False,
          max_probes=None, max_seconds=None, target_rel_std=None, runtime="torch", settings=None,
          input_shape=None, meter=None, progress=None, threads=None, unknown_ops="error"):
    """Run (or resume) a THOR probing campaign on ``device`` for the layers of ``models``.

    With ``resume``, models not yet among the campaign's targets are added to it (a campaign grows):
    the probes already measured are reused, and only the configs the new models add are measured.
    On the host, one intra-op thread unless ``threads`` says otherwise (recorded in the campaign)."""
    from thor_sdk.campaign.targets import run_campaign
    from thor_sdk.harness.protocol import ProtocolSettings
    from thor_sdk.layers import ModelLayers, layers_of
    from thor_sdk.store import Campaign
    from thor_sdk.store.campaign import check_new

    _check_metric(metric)
    _check_limits(max_probes=max_probes, max_seconds=max_seconds, target_rel_std=target_rel_std)
    if isinstance(models, str):
        models = [models]
    if resume:
        campaign = Campaign.open(out, writer=True)
        meta = campaign.meta
        if threads is None and meta["device"].get("kind") == "host":
            threads = meta["device"].get("torch_threads")
        if meta.get("campaign_kind") == "profile":
            campaign.close()
            raise UsageError(f"{out} is a device profile; continue it with `thor-sdk profile --resume`")
        dev = _device(device, meter, threads)
        targets = [ModelLayers(t["name"], t["input_shape"], t["input_dtype"], t["layers"]) for t in meta["targets"]]
        known = {t.name: t for t in targets}
        added = []
        try:
            for m in dict.fromkeys(models or ()):
                if m in known:
                    continue
                ml = layers_of(m, input_shape=input_shape, unknown_ops=unknown_ops)
                same = known.get(ml.name)
                if same is not None and _layer_keys(same) != _layer_keys(ml):
                    raise UsageError(f"{out} already has a target named {ml.name!r} with other layers; "
                                     "rename the new model")
                if same is None:
                    known[ml.name] = ml
                    added.append(ml)
        except Exception:
            campaign.close()
            raise
        if added:  # the campaign grows: new targets are recorded, and only their missing configs get probed
            targets += added
            campaign.set_meta("targets", [t.to_dict() for t in targets])
        batch_sizes, metric, runtime = meta["batch_sizes"], meta["metric"], meta["runtime"]
        settings = ProtocolSettings(**meta["protocol"])
    else:
        if not models:
            raise UsageError("give at least one --model")
        from thor_sdk.bounds import MAX_RUN_BATCH_SIZE

        batch_sizes = _check_batch_sizes(batch_sizes, MAX_RUN_BATCH_SIZE)
        check_new(out)  # a bad --out is refused before any model is built
        dev = _device(device, meter, threads)
        targets = [layers_of(m, input_shape=input_shape, unknown_ops=unknown_ops) for m in models]
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


def _layer_keys(ml):
    return [(l["kind"], l["role"], l["config"]) for l in ml.layers]


def profile(device="host", metric="time", out="profile.db", resume=False, runtime="torch", max_probes=None,
            max_seconds=None, target_rel_std=None, settings=None, meter=None, threads=None, models=(),
            input_shape=None, kinds=None, seed=0, reference_every_s=120.0, calibration_models=None,
            progress=None, prior_path=None, unknown_ops="error"):
    """Profile ``device`` once over the model zoo's prior (``thor-sdk profile``); see
    ``thor_sdk.campaign.profile``. ``models``: optional app models whose layers weigh more in the prior.
    On the host, one intra-op thread unless ``threads`` says otherwise (recorded)."""
    from thor_sdk.campaign.prior import load_prior, proxy_cost_s
    from thor_sdk.campaign.profile import DEFAULT_CALIBRATION, ProfilePlan, run_profile
    from thor_sdk.harness.protocol import ProtocolSettings
    from thor_sdk.layers import layers_of
    from thor_sdk.store import Campaign
    from thor_sdk.store.campaign import check_new

    _check_metric(metric)
    _check_limits(max_probes=max_probes, max_seconds=max_seconds, target_rel_std=target_rel_std)
    from thor_sdk.bounds import MAX_SECONDS, number

    number("reference_every_s (0: never)", reference_every_s, low=0, high=MAX_SECONDS, optional=True)
    number("seed", seed, low=0, high=2 ** 32 - 1, integer=True)
    if resume:
        campaign = Campaign.open(out, writer=True)
        meta = campaign.meta
        if meta.get("campaign_kind") != "profile":
            campaign.close()
            raise UsageError(f"{out} is a target-driven campaign; continue it with `thor-sdk probe --resume`")
        if threads is None and meta["device"].get("kind") == "host":
            threads = meta["device"].get("torch_threads")
        dev = _device(device, meter, threads)
        metric, runtime, seed = meta["metric"], meta["runtime"], meta["seed"]
        settings = ProtocolSettings(**meta["protocol"])
        prior, kinds = meta["prior"], meta.get("profile_kinds")
        calibration_models = meta.get("calibration_models", [])
    else:
        check_new(out)  # a bad --out is refused before any work
        dev = _device(device, meter, threads)
        dev.require_meter(metric)
        prior = load_prior(prior_path)
        n_zoo = max(len(prior.get("models") or ()), 1)
        for m in ([models] if isinstance(models, str) else list(models or ())):
            app = layers_of(m, input_shape=input_shape, unknown_ops=unknown_ops).layers
            app_s = sum(proxy_cost_s(l["kind"], l["config"], l["role"]) for l in app)
            for layer in app:  # an app's net weighs as much as 5 zoo nets
                entry = prior["kinds"].setdefault(layer["kind"], {"share": 0.0, "rel_share": 0.0, "configs": []})
                unit = proxy_cost_s(layer["kind"], layer["config"], layer["role"])
                share, rel = 5.0 * unit, 5.0 * unit / app_s / n_zoo
                entry["configs"].insert(0, {"config": layer["config"], "role": layer["role"], "count": 5,
                                            "share": share, "rel_share": rel, "rel_weight": 5.0 / app_s ** 2,
                                            "models": [str(m)]})
                entry["share"] += share
                entry["rel_share"] = entry.get("rel_share", entry["share"]) + rel
        if kinds is not None:
            unknown = sorted(set(kinds) - set(prior["kinds"]))
            if unknown:
                raise UsageError(f"kinds not in the prior: {', '.join(unknown)}")
        calibration_models = list(DEFAULT_CALIBRATION if calibration_models is None else calibration_models)
        from thor_sdk.models import model_spec

        for name in calibration_models:  # measured last: an unknown name must fail now, not after the budget
            model_spec(name)
        # a profile buys many probes: at most 8 rounds each (the fit weighs each by its own noise)
        settings = settings or ProtocolSettings(min_rounds=4, max_rounds=8)
        campaign = Campaign.create(out, {
            "campaign_kind": "profile", "device": dev.info(), "metric": metric, "unit": UNITS[metric],
            "runtime": runtime, "protocol": settings.to_dict(), "prior": prior, "seed": seed,
            "profile_kinds": None if kinds is None else sorted(kinds), "calibration_models": calibration_models,
            "targets": [], "batch_sizes": [], "producer": f"thor-sdk {__version__}",
        })
    plan = ProfilePlan(prior, kinds=kinds, seed=seed)
    with campaign:
        summary = run_profile(campaign, dev, plan, metric=metric, settings=settings, runtime=runtime,
                              max_probes=max_probes, max_seconds=max_seconds, target_rel_std=target_rel_std,
                              reference_every_s=reference_every_s, calibration_models=calibration_models,
                              progress=progress)
    summary.update({"campaign": out, "device": dev.name, "runtime": runtime, "metric": metric})
    return summary


def fit(campaign=None, samples_csv=None, out=None, metric=None, random_state=0, runtime=None, progress=None):
    """Fit one cost model per layer kind from campaign(s) and/or a samples CSV; returns the estimator dict.

    ``campaign``: a path or a list of paths; several campaigns are merged when they share the device
    and the runtime (refused otherwise: costs differ many-fold between runtimes). ``runtime`` names
    what ran a samples CSV's steps (default ``torch``; a campaign records its own).
    """
    from thor_sdk.fitting.pipeline import build
    from thor_sdk.fitting.samples_csv import read_samples_csv
    from thor_sdk.store import Campaign

    if campaign is None and samples_csv is None:
        raise UsageError("give a campaign database and/or --samples CSV")
    if out:
        from thor_sdk.store.files import check_output

        check_output(out, "estimator")  # before any fitting
    paths = [] if campaign is None else [campaign] if isinstance(campaign, (str, os.PathLike)) else list(campaign)
    samples, model_runs, sources = [], [], []
    device, runtimes, device_keys = None, set(), set()
    metrics = set()
    for path in paths:
        with Campaign.open(path) as c:
            meta = c.meta
            metrics.add(meta["metric"])
            device = device or meta["device"]
            device_keys.add(_device_key(meta["device"]))
            runtimes.add(meta.get("runtime", "torch"))
            samples += c.samples()
            model_runs += [r for r in c.model_runs() if r["runtime"] == meta.get("runtime", "torch")]
            sources.append(os.path.basename(os.fspath(path)))
    if len(device_keys) > 1:
        raise UsageError(f"campaigns {', '.join(sources)} come from different devices "
                         f"({', '.join(sorted(device_keys))}); fit one estimator per device")
    if runtime is not None and runtimes and runtime not in runtimes:
        raise UsageError(f"--runtime {runtime} but the campaigns were measured with {', '.join(sorted(runtimes))}")
    if len(runtimes) > 1:
        raise UsageError(f"campaigns {', '.join(sources)} were measured with different runtimes "
                         f"({', '.join(sorted(runtimes))}); their costs differ many-fold: fit one estimator each")
    if samples_csv is not None:
        samples += read_samples_csv(samples_csv)
        sources.append(os.path.basename(samples_csv))
    metric = metric or (metrics.pop() if len(metrics) == 1 else "time")
    _check_metric(metric)
    doc = build(samples, device=device or {"name": "unknown"}, runtime=runtime or (runtimes.pop() if runtimes else "torch"),
                metric=metric, model_runs=model_runs, sources=sources, random_state=random_state, progress=progress)
    if out:
        from thor_sdk.fitting.estimator import write_estimator

        write_estimator(doc, out)
    return doc


def _device_key(info):
    """What identifies a device across campaigns: kind, name, host, machine, serial and thread count where recorded."""
    return "/".join(f"{k}={info.get(k)}" for k in ("kind", "name", "hostname", "machine", "serial", "torch_threads")
                    if info.get(k) is not None) \
        or "unknown"


def estimate(estimator, model, batch_size=32, input_shape=None, unknown_ops="error"):
    """THOR estimate (per layer and total, with std) plus the FLOPs baseline, as a plain dict.

    ``unknown_ops="approx"`` estimates operators without a layer kind (as the generic elementwise kind)
    and layers of kinds the estimator lacks (from their FLOPs and bytes) instead of refusing the model;
    they are listed in ``approximated`` and widen the std. ``warnings`` names the kinds of this model
    that rest on noisy samples (spread above the protocol's target, or a busy machine) and the
    approximated layers."""
    from thor_sdk.baselines.flops import flops_estimate
    from thor_sdk.layers import layers_of
    from thor_sdk.runtime import load_estimator

    (batch_size,) = _check_batch_sizes([batch_size])
    est = load_estimator(estimator) if not hasattr(estimator, "estimate") else estimator
    ml = layers_of(model, input_shape=input_shape, unknown_ops=unknown_ops)
    result = est.estimate(ml.layers, batch_size, unknown=unknown_ops)
    fb = flops_estimate(ml.layers, batch_size, getattr(est, "flops_baseline", None))  # per kind, every value >= 0
    for row, f in zip(result["layers"], fb["layers"]):
        row["flops_baseline"] = f
    for row, layer in zip(result["layers"], ml.layers):
        if layer.get("op"):
            row["op"] = layer["op"]
    result["model"] = ml.name
    result["flops_baseline"] = {"total": fb["total"], "train_flops": fb["flops"]}
    warnings = []
    noisy = (getattr(est, "provenance", None) or {}).get("noisy_samples") or {}
    used = {layer["kind"] for layer in ml.layers}
    for kind in sorted(used & set(noisy)):
        d = noisy[kind]
        warnings.append(f"kind {kind} rests on {d.get('noisy')} noisy sample(s) of {d.get('samples')} "
                        "(spread above the target, or a busy machine): its estimate is less reliable")
    if result.get("approximated"):
        ops = sorted({a.get("op") or a["kind"] for a in result["approximated"]})
        warnings.append(f"{len(result['approximated'])} layer(s) approximated ({', '.join(ops)}): "
                        "their std is wide; probe their kinds for a real estimate")
    result["warnings"] = warnings
    return result


def _measurement_quality(dev, r, metric, settings):
    """Threads, the machine's load beside the run, outlier windows and noise, with plain warnings."""
    from thor_sdk.devices.state import load_summary
    from thor_sdk.harness.protocol import robust_summary

    threads = dev.own_threads()
    load = load_summary(r.states, os.cpu_count() if dev.name == "host" else None, threads or 1)
    cv = robust_summary(r.values(metric))["cv"]
    outliers = r.outliers(metric, settings.outlier_k)
    warnings = [load["warning"]] if load["warning"] else []
    if not cv <= settings.cv_target:
        warnings.append(f"noisy: the windows vary by {cv:.1%} (robust CV), above the {settings.cv_target:.1%} target; "
                        "prefer the median, or re-measure on a quiet machine")
    if outliers:
        warnings.append(f"{len(outliers)} outlier window(s) (beyond {settings.outlier_k:g} robust std): the median "
                        "leaves them out, the mean does not")
    return {"threads": threads, "load": {k: v for k, v in load.items() if k != "warning"}, "cv": cv,
            "outlier_windows": outliers, "noisy": not cv <= settings.cv_target, "warnings": warnings}


def measure(model, device="host", batch_size=32, metric="time", runtime="torch", settings=None, out=None,
            meter=None, threads=None, input_shape=None, input_dtype=None, vocab=None):
    """Measure a whole model's training step on ``device`` (the ground truth THOR is checked against).

    ``model`` takes every form ``estimate`` takes: a reference or zoo network name; ``path/file.py:Class``
    or a ``torch.nn.Module`` with a per-sample ``input_shape`` (``input_dtype`` ``int64`` for token ids,
    below ``vocab``); a layer-list JSON or an ONNX file, rebuilt layer by layer from its kinds (see
    ``thor_sdk.harness.whole_model``). Remote devices measure reference networks by name only.
    The result's ``model`` is the model as given (a module: its class name); ``out`` records the run in
    that campaign under the same label."""
    import numbers

    from thor_sdk.harness.protocol import ProtocolSettings
    from thor_sdk.harness.whole_model import resolve_model

    _check_metric(metric)
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral):
        raise UsageError(f"batch size must be an integer >= 1, got {batch_size!r}")
    from thor_sdk.bounds import MAX_RUN_BATCH_SIZE

    (batch_size,) = _check_batch_sizes([batch_size], MAX_RUN_BATCH_SIZE)
    source = resolve_model(model, input_shape, input_dtype, vocab)  # unknown names, missing files, bad shapes fail here
    if source.name is None and isinstance(device, str) and device != "host":
        raise UsageError(f"{device} measures whole models by reference-network name only (its bundle exports the "
                         f"network by name); measure {source.label} on the host (--device host)")
    dev = _device(device, meter, threads)
    settings = settings or ProtocolSettings()
    campaign = None
    if out:  # the campaign is opened (and locked) before measuring: a bad --out never costs a run
        from thor_sdk.store import Campaign

        campaign = Campaign.open(out, writer=True)
    import contextlib

    from thor_sdk.layers.user_code import running_user_code

    # a file.py:Class model is the user's code: what it raises while it trains (SystemExit included) is one error
    guard = running_user_code(f"measuring {source.label}") if source.form == "file" else contextlib.nullcontext()
    try:
        with guard:
            r = dev.measure_model(source.name or source, batch_size, metric=metric, settings=settings,
                                  runtime=runtime)
    except BaseException:
        if campaign is not None:
            campaign.close()
        raise
    values = r.values(metric)
    result = {"model": source.label, "device": dev.name, "runtime": runtime, "metric": metric, "unit": UNITS[metric],
              "batch_size": batch_size, "mean": statistics.fmean(values), "median": statistics.median(values),
              "std": statistics.stdev(values) if len(values) > 1 else 0.0, "n": len(values),
              "steps_per_window": r.steps_per_window}
    result.update(_measurement_quality(dev, r, metric, settings))
    if campaign is not None:
        with campaign as c:
            c.add_model_run(source.label, batch_size, metric, result["mean"], result["std"], result["n"], runtime,
                            {"median": result["median"], "values": values})
    return result
