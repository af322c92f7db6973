"""The library API behind the CLI: probe, fit, estimate, measure; table_profile ... replay for power-aware training.

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
from thor_sdk.errors import DeviceUnavailableError, UsageError
from thor_sdk.harness.protocol import CANARY_VERSION
from thor_sdk.runtime.estimator import METRIC_UNITS as UNITS  # the one metric -> unit map


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
    host = _is_host(device)
    if threads is not None:
        if not host:
            raise UsageError("--threads applies to the host device only")
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise UsageError(f"--threads must be an integer >= 1, got {threads!r}")
        return get_device(device, meter=meter, threads=threads)
    if host:
        return get_device(device, meter=meter, threads=HOST_THREADS)
    return get_device(device, meter=meter)


def _is_host(spec):
    """``host`` or ``host:cuda[:N]``: this machine, its CPU or one of its GPUs."""
    return isinstance(spec, str) and (spec == "host" or spec.startswith("host:"))


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


def _check_canary_version(campaign, out):
    """Refuse to resume a campaign whose canary readings are of another version than this thor-sdk's: its probes
    would carry two series that ``fit`` reads as one (the campaign is closed first)."""
    from thor_sdk.campaign.measure import canary_version

    v = canary_version(campaign.meta)
    if v != CANARY_VERSION:
        campaign.close()
        raise UsageError(f"{out} read the canary of version {v}, this thor-sdk reads version {CANARY_VERSION} (a "
                         "reading times another workload): fit it as it is, or start a new campaign")


def _check_trainable_models(trainable, models):
    """``profile``'s and ``profile_fleet``'s app models made fine-tunes by ``trainable`` (checked patterns): refused
    without any model, before a campaign is opened or a thread started."""
    if trainable and not models:
        raise UsageError("--trainable makes the app models given with --model fine-tunes: give --model too")


def probe(models, device="host", batch_sizes=(32,), metric="time", out="campaign.db", resume=False,
          max_probes=None, max_seconds=None, target_rel_std=None, runtime="torch", settings=None,
          input_shape=None, meter=None, progress=None, threads=None, unknown_ops="error", trainable=None):
    """Run (or resume) a THOR probing campaign on ``device`` for the layers of ``models``.

    With ``resume``, models not yet among the campaign's targets are added to it (a campaign grows):
    the probes already measured are reused, and only the configs the new models add are measured.
    On the host, one intra-op thread unless ``threads`` says otherwise (recorded in the campaign).
    ``trainable``: parameter name patterns: each model is probed as that fine-tune (only the matching
    parameters train; its frozen layers' probes run as they do in it), its target named ``net [trainable ...]``."""
    from thor_sdk.campaign.targets import run_campaign
    from thor_sdk.harness.protocol import ProtocolSettings
    from thor_sdk.layers import ModelLayers, target_layers
    from thor_sdk.layers.trainable import check_patterns, label
    from thor_sdk.store import Campaign
    from thor_sdk.store.campaign import check_new

    _check_metric(metric)
    _check_limits(max_probes=max_probes, max_seconds=max_seconds, target_rel_std=target_rel_std)
    trainable = check_patterns(trainable)  # before any campaign is opened or model built
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
        _check_canary_version(campaign, out)
        dev = _device(device, meter, threads)
        targets = [ModelLayers(t["name"], t["input_shape"], t["input_dtype"], t["layers"]) for t in meta["targets"]]
        known = {t.name: t for t in targets}
        added = []
        try:
            for m in models or ():
                if (m.name if isinstance(m, ModelLayers) else label(m, trainable)) in known:
                    continue
                ml = target_layers(m, input_shape, unknown_ops, trainable)
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
        targets = [target_layers(m, input_shape, unknown_ops, trainable) for m in models]
        settings = settings or ProtocolSettings()
        dev.require_meter(metric)
        campaign = Campaign.create(out, {
            "device": dev.info(), "metric": metric, "unit": UNITS[metric], "batch_sizes": batch_sizes,
            "runtime": runtime, "protocol": settings.to_dict(), "targets": [t.to_dict() for t in targets],
            "producer": f"thor-sdk {__version__}", "canary_version": CANARY_VERSION,
        })
    with campaign:
        summary = run_campaign(campaign, dev, targets, batch_sizes, metric=metric, settings=settings,
                               runtime=runtime, max_probes=max_probes, max_seconds=max_seconds,
                               target_rel_std=target_rel_std, progress=progress)
    summary.update({"campaign": out, "device": dev.name, "metric": metric, "models": [t.name for t in targets],
                    "batch_sizes": batch_sizes})
    return summary


def probe_fleet(models, devices, out_dir, batch_sizes=(32,), metric="time", resume=False, max_probes=None,
                max_seconds=None, target_rel_std=None, runtime="torch", settings=None, input_shape=None, meter=None,
                progress=None, unknown_ops="error", trainable=None):
    """Probe several devices in parallel (one thread each): one campaign per device, ``out_dir/NAME.db`` with
    NAME from the device's spec (``android:R58M12`` -> ``android-R58M12.db``; ``thor_sdk.campaign.fleet``).

    ``devices``: spec strings (``android:SERIAL``, ``android:HOST:PORT``, ``stf://HOST:PORT``, ``jetson://...``)
    or Device objects (named by their ``name``); at most one that runs on this machine. Models are read once,
    here, before any thread starts. ``progress(device, event, info)`` is called from the devices' threads.
    Returns one summary per device, in order: ``status`` ``done`` (with ``probe``'s summary) or
    ``disconnected`` / ``unavailable`` / ``failed`` with ``error``: that device's campaign stopped where it
    stood; ``resume=True`` continues every campaign in ``out_dir`` (each measured probe is kept, once).
    ``trainable``: as ``probe``'s."""
    from thor_sdk.layers import target_layers
    from thor_sdk.layers.trainable import check_patterns

    _check_metric(metric)
    _check_limits(max_probes=max_probes, max_seconds=max_seconds, target_rel_std=target_rel_std)
    trainable = check_patterns(trainable)
    models = [models] if isinstance(models, str) else list(models or ())
    if not resume and not models:
        raise UsageError("give at least one --model")

    def prepare():  # models are traced once, here: torch.fx patches torch while it traces, never in several threads
        return [target_layers(m, input_shape, unknown_ops, trainable) for m in models]

    def run_one(targets, dev, out, say):
        return probe(targets, device=dev, batch_sizes=batch_sizes, metric=metric, out=out, resume=resume,
                     max_probes=max_probes, max_seconds=max_seconds, target_rel_std=target_rel_std, runtime=runtime,
                     settings=settings, progress=say, unknown_ops=unknown_ops)

    return _fleet(devices, out_dir, resume, meter, progress, prepare, run_one)


def profile_fleet(devices, out_dir, metric="time", resume=False, runtime="torch", max_probes=None, max_seconds=None,
                  target_rel_std=None, settings=None, meter=None, models=(), input_shape=None, kinds=None, seed=0,
                  reference_every_s=120.0, calibration_models=None, progress=None, prior_path=None,
                  unknown_ops="error", trainable=None):
    """``profile`` on several devices in parallel, one campaign each in ``out_dir``: as ``probe_fleet`` (names,
    threads, per-device outcomes, ``resume``). App ``models`` are read once, here (as ``trainable``'s fine-tunes
    where given)."""
    from thor_sdk.layers import target_layers
    from thor_sdk.layers.trainable import check_patterns

    _check_metric(metric)
    _check_limits(max_probes=max_probes, max_seconds=max_seconds, target_rel_std=target_rel_std)
    trainable = check_patterns(trainable)
    models = [models] if isinstance(models, str) else list(models or ())
    _check_trainable_models(trainable, models)

    def prepare():
        return [target_layers(m, input_shape, unknown_ops, trainable) for m in models]

    def run_one(app_layers, dev, out, say):
        return profile(device=dev, metric=metric, out=out, resume=resume, runtime=runtime, max_probes=max_probes,
                       max_seconds=max_seconds, target_rel_std=target_rel_std, settings=settings, models=app_layers,
                       kinds=kinds, seed=seed, reference_every_s=reference_every_s,
                       calibration_models=calibration_models, progress=say, prior_path=prior_path,
                       unknown_ops=unknown_ops)

    return _fleet(devices, out_dir, resume, meter, progress, prepare, run_one)


#: devices that run their steps on this machine: two of them in one fleet would disturb each other's timings
_LOCAL_SPECS = ("host", "jetson", "sim", "simjetson")


def _fleet(devices, out_dir, resume, meter, progress, prepare, run_one):
    """What ``probe_fleet`` and ``profile_fleet`` share: names and campaign paths, every campaign refused (or
    found, to resume) before any device starts, ``prepare()`` once in this thread, then ``run_one(prepared,
    device, out, progress)`` in one thread per device, bundle exports serialised through one lock."""
    import threading

    from thor_sdk.campaign.fleet import SerialCodec, campaign_name, run_fleet
    from thor_sdk.store.campaign import check_new

    if isinstance(devices, str) or hasattr(devices, "measure_probe"):
        devices = [devices]
    devices = list(devices or ())
    if not devices:
        raise UsageError("give at least one --device")
    if not out_dir:
        raise UsageError("give --out-dir DIR: one campaign per device is written there")
    names = [d if isinstance(d, str) else d.name for d in devices]
    local = [n for n in names if n in _LOCAL_SPECS or _is_host(n)]
    if len(local) > 1:
        raise UsageError(f"{', '.join(local)} all run on this machine: they would disturb each other's timings; "
                         "profile one of them at a time")
    outs = {n: os.path.join(os.fspath(out_dir), campaign_name(n)) for n in names}
    if len(set(outs.values())) != len(outs):
        raise UsageError("two devices would share one campaign file: " + ", ".join(names))
    if resume:
        missing = [p for p in outs.values() if not os.path.isfile(p)]
        if missing:
            raise UsageError(f"nothing to resume: {', '.join(missing)} missing (resume the fleet with the same "
                             "--device list and --out-dir)")
    else:
        os.makedirs(os.fspath(out_dir), exist_ok=True)
        for p in outs.values():
            check_new(p)  # every campaign refused before any device starts
    prepared = prepare()
    devs = [_device(d, meter) for d in devices]  # an unknown spec is refused here, before any device starts
    export_lock = threading.Lock()  # torch's exporter is process-wide state: one bundle export at a time

    def job(name, dev):
        def run():
            codec = getattr(dev, "codec", None)
            if codec is not None:
                dev.codec = SerialCodec(codec, export_lock)
            say = None if progress is None else (lambda event, info: progress(name, event, info))
            try:
                return run_one(prepared, dev, outs[name], say)
            finally:
                if codec is not None:
                    dev.codec = codec
        return name, run

    results = run_fleet([job(n, d) for n, d in zip(names, devs)])
    for r in results:
        r["campaign"] = outs[r["device"]]
    return results


def _layer_keys(ml):
    return [(l["kind"], l["role"], l["config"]) for l in ml.layers]


def _weigh_app_models(prior, app, proxy_cost_s):
    """Put each app model of ``app`` (``[(name, layers)]``) into ``prior`` (in place): every layer a config of its
    kind, first, the net weighing as much as 5 zoo nets. An app model the prior already holds as one (a name given
    again on ``--resume``) is not added twice. Returns the names added."""
    n_zoo = max(prior.get("net_weight") or len(prior.get("models") or ()), 1)  # the zoo's nets and fine-tunes
    have = {c["models"][0] for e in prior["kinds"].values() for c in e["configs"] if c.get("app")}
    added = []
    for name, layers in app:
        if name in have or not layers:
            continue
        app_s = sum(proxy_cost_s(l["kind"], l["config"], l["role"]) for l in layers)
        for layer in layers:
            entry = prior["kinds"].setdefault(layer["kind"], {"share": 0.0, "rel_share": 0.0, "configs": []})
            unit = proxy_cost_s(layer["kind"], layer["config"], layer["role"])
            share, rel = 5.0 * unit, 5.0 * unit / app_s / n_zoo
            entry["configs"].insert(0, {"config": layer["config"], "role": layer["role"], "count": 5,
                                        "share": share, "rel_share": rel, "rel_weight": 5.0 / app_s ** 2,
                                        "models": [name], "app": True})
            entry["share"] += share
            entry["rel_share"] = entry.get("rel_share", entry["share"]) + rel
        have.add(name)
        added.append(name)
    return added


def profile(device="host", metric="time", out="profile.db", resume=False, runtime="torch", max_probes=None,
            max_seconds=None, target_rel_std=None, settings=None, meter=None, threads=None, models=(),
            input_shape=None, kinds=None, seed=0, reference_every_s=120.0, calibration_models=None,
            progress=None, prior_path=None, unknown_ops="error", coverage_every=None, floor_share=None,
            range_probes=True, fit_floor=True, calibration_spread=True, trainable=None):
    """Profile ``device`` once over the model zoo's prior (``thor-sdk profile``); see
    ``thor_sdk.campaign.profile``. ``models``: optional app models whose layers weigh more in the prior;
    ``trainable``: parameter name patterns making each of them that fine-tune (named ``net [trainable ...]``).
    On the host, one intra-op thread unless ``threads`` says otherwise (recorded). ``coverage_every``: every
    how many probes after the start is a coverage probe (None: ``COVERAGE_EVERY``; 0: none).
    ``floor_share``: the fraction of its relative share of the probes below which a kind takes the next
    pick (None: ``FLOOR_SHARE``; 0: no floor). ``range_probes``: False makes every coverage probe a variance
    one (none goes to the zoo configs outside what their kind's samples span; ``run_profile``). ``fit_floor``: False
    keeps a kind's floor at its share of the probes, not at the samples its GP needs to fit its length scales.
    ``calibration_spread``: False measures the calibration nets at the end only, not also after each reference
    re-measurement during the probes."""
    from thor_sdk.campaign.prior import load_prior, proxy_cost_s
    from thor_sdk.campaign.profile import COVERAGE_EVERY, DEFAULT_CALIBRATION, FLOOR_SHARE, ProfilePlan, run_profile
    from thor_sdk.harness.protocol import ProtocolSettings
    from thor_sdk.layers import ModelLayers, target_layers
    from thor_sdk.layers.trainable import check_patterns
    from thor_sdk.store import Campaign
    from thor_sdk.store.campaign import check_new

    _check_metric(metric)
    _check_limits(max_probes=max_probes, max_seconds=max_seconds, target_rel_std=target_rel_std)
    trainable = check_patterns(trainable)
    _check_trainable_models(trainable, models)
    from thor_sdk.bounds import MAX_SECONDS, number

    number("reference_every_s (0: never)", reference_every_s, low=0, high=MAX_SECONDS, optional=True)
    number("seed", seed, low=0, high=2 ** 32 - 1, integer=True)
    number("coverage_every (0: never)", coverage_every, low=0, high=10 ** 6, integer=True, optional=True)
    number("floor_share (0: no floor)", floor_share, low=0, high=1, optional=True)
    for name, flag in (("range_probes", range_probes), ("fit_floor", fit_floor),
                       ("calibration_spread", calibration_spread)):
        if not isinstance(flag, bool):
            raise UsageError(f"{name} must be True or False, got {flag!r}")

    def app_models():
        """``[(name, layers)]`` of the app models, read before any campaign is opened: a bad one writes nothing."""
        out_ = []
        for m in ([models] if isinstance(models, str) else list(models or ())):
            ml = target_layers(m, input_shape, unknown_ops, trainable)
            out_.append((ml.name if isinstance(m, ModelLayers) or trainable else str(m), ml.layers))
        return out_

    if resume:
        app = app_models()
        campaign = Campaign.open(out, writer=True)
        meta = campaign.meta
        if meta.get("campaign_kind") != "profile":
            campaign.close()
            raise UsageError(f"{out} is a target-driven campaign; continue it with `thor-sdk probe --resume`")
        _check_canary_version(campaign, out)
        if threads is None and meta["device"].get("kind") == "host":
            threads = meta["device"].get("torch_threads")
        dev = _device(device, meter, threads)
        metric, runtime, seed = meta["metric"], meta["runtime"], meta["seed"]
        settings = ProtocolSettings(**meta["protocol"])
        prior, kinds = meta["prior"], meta.get("profile_kinds")
        calibration_models = meta.get("calibration_models", [])
        held_out = calibration_models if meta.get("calibration_held_out") else ()  # the plan it was started with
        if _weigh_app_models(prior, app, proxy_cost_s):  # an app model given on resume weighs from now on
            campaign.set_meta("prior", prior)
    else:
        check_new(out)  # a bad --out is refused before any work
        app = app_models()
        dev = _device(device, meter, threads)
        dev.require_meter(metric)
        prior = load_prior(prior_path)
        _weigh_app_models(prior, app, proxy_cost_s)
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
            "calibration_held_out": True,
            "targets": [], "batch_sizes": [], "producer": f"thor-sdk {__version__}", "canary_version": CANARY_VERSION,
        })
        held_out = calibration_models
    # the calibration nets' own configs are never aimed at: their errors then measure an unseen net's
    plan = ProfilePlan(prior, kinds=kinds, seed=seed, held_out=held_out)
    with campaign:
        summary = run_profile(campaign, dev, plan, metric=metric, settings=settings, runtime=runtime,
                              max_probes=max_probes, max_seconds=max_seconds, target_rel_std=target_rel_std,
                              reference_every_s=reference_every_s, calibration_models=calibration_models,
                              progress=progress,
                              coverage_every=COVERAGE_EVERY if coverage_every is None else int(coverage_every),
                              floor_share=FLOOR_SHARE if floor_share is None else float(floor_share),
                              range_probes=range_probes, fit_floor=fit_floor,
                              calibration_spread=calibration_spread)
    summary.update({"campaign": out, "device": dev.name, "runtime": runtime, "metric": metric})
    return summary


def profile_summary(path):
    """What a stored profile campaign holds, read without measuring (``campaign.profile.stored_summary``): probes
    done and failed per model key, calibration runs and spread passes, flagged and noisy samples, the reference
    probe's drift, the wall seconds its measurements span; with the campaign's path, device, runtime and metric.
    A target-driven campaign (``thor-sdk probe``) is refused."""
    from thor_sdk.campaign.profile import stored_summary
    from thor_sdk.store import Campaign

    with Campaign.open(path) as c:
        meta = c.meta
        if meta.get("campaign_kind") != "profile":
            raise UsageError(f"{path} is a target-driven campaign, not a profile")
        out = stored_summary(c, meta["metric"])
    return dict(out, campaign=os.fspath(path), device=meta["device"].get("name"), runtime=meta["runtime"],
                metric=meta["metric"])


def fit(campaign=None, samples_csv=None, out=None, metric=None, random_state=0, runtime=None, progress=None,
        family=True, cv_folds=None):
    """Fit one cost model per layer kind from campaign(s) and/or a samples CSV; returns the estimator dict.

    ``campaign``: a path or a list of paths; several campaigns are merged when they share the device
    and the runtime (refused otherwise: costs differ many-fold between runtimes). ``runtime`` names
    what ran a samples CSV's steps (default ``torch``; a campaign records its own). ``family``: False
    calibrates one whole-model bias common to every kind instead of one per kind family (``build``). ``cv_folds``:
    also cross-validate each kind on configs it did not see (``fitting.crossval``; about ``cv_folds`` more fits
    per kind), into ``provenance.cross_validation``.
    """
    from thor_sdk.campaign.measure import canary_version
    from thor_sdk.devices.state import HARDWARE_KEYS
    from thor_sdk.fitting.pipeline import build
    from thor_sdk.fitting.samples_csv import read_samples_csv
    from thor_sdk.store import Campaign

    if campaign is None and samples_csv is None:
        raise UsageError("give a campaign database and/or --samples CSV")
    if cv_folds is not None:
        from thor_sdk.fitting.crossval import check_folds

        check_folds(cv_folds)
    if out:
        from thor_sdk.store.files import check_output

        check_output(out, "estimator")  # before any fitting
    paths = [] if campaign is None else [campaign] if isinstance(campaign, (str, os.PathLike)) else list(campaign)
    samples, model_runs, sources = [], [], []
    device, runtimes, device_keys = None, set(), set()
    hardware = {}  # HARDWARE_KEYS entry -> (its value, the campaign that named it first)
    metrics = set()
    by_version = []  # (canary version, samples, model runs) per campaign
    for path in paths:
        with Campaign.open(path) as c:
            meta = c.meta
            metrics.add(meta["metric"])
            # one host name, two CPUs: this project's VMs changed CPU between sessions under one name. Each
            # campaign is held to the first that named each piece of hardware (one that names none is not apart)
            for k in HARDWARE_KEYS:
                v = meta["device"].get(k)
                if v is None:
                    continue
                first = hardware.setdefault(k, (v, os.path.basename(os.fspath(path))))
                if first[0] != v:
                    raise UsageError(f"campaigns {first[1]} and {os.path.basename(os.fspath(path))} were measured on "
                                     f"different hardware ({k}: {first[0]!r} -> {v!r}); fit one estimator per device")
            device = device or meta["device"]
            device_keys.add(_device_key(meta["device"]))
            runtimes.add(meta.get("runtime", "torch"))
            got = (c.samples(), [r for r in c.model_runs() if r["runtime"] == meta.get("runtime", "torch")])
            by_version.append((canary_version(meta), *got))
            sources.append(os.path.basename(os.fspath(path)))
    canary_v = max((v for v, _, _ in by_version), default=CANARY_VERSION)
    for v, s, r in by_version:  # one canary series: readings of an older version than the newest are left out
        samples += s if v == canary_v else [_without_canary(x) for x in s]
        model_runs += r if v == canary_v else [_without_canary(x) for x in r]
    if device is not None and any(device.get(k) is None for k in hardware):  # named by a later campaign only
        device = dict(device, **{k: v for k, (v, _) in hardware.items() if device.get(k) is None})
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
                metric=metric, model_runs=model_runs, sources=sources, random_state=random_state, progress=progress,
                family=family, cv_folds=cv_folds, canary_version=canary_v)
    if out:
        from thor_sdk.fitting.estimator import write_estimator

        write_estimator(doc, out)
    return doc


def _without_canary(row):
    """A sample or model run without its canary reading (``canary_s``, a model run's in its detail)."""
    row = {k: v for k, v in row.items() if k != "canary_s"}
    if isinstance(row.get("detail"), dict) and "canary_s" in row["detail"]:
        row["detail"] = {k: v for k, v in row["detail"].items() if k != "canary_s"}
    return row


def _device_key(info):
    """What identifies a device across campaigns: kind, name, host, machine, serial and thread count where recorded;
    for phones, the model (kind, manufacturer, model, SoC): a fleet's phones of one model merge into one fit."""
    if info.get("kind") in ("android", "ios") and info.get("model"):
        return "/".join(f"{k}={info.get(k)}" for k in ("kind", "manufacturer", "model", "soc") if info.get(k) is not None)
    return "/".join(f"{k}={info.get(k)}" for k in ("kind", "name", "hostname", "machine", "serial", "torch_threads")
                    if info.get(k) is not None) \
        or "unknown"


def estimate(estimator, model, batch_size=32, input_shape=None, unknown_ops="error", level=None, trainable=None):
    """THOR estimate (per layer and total, with std) plus the FLOPs baseline, as a plain dict.

    ``unknown_ops="approx"`` estimates operators without a layer kind (as the generic elementwise kind)
    and layers of kinds the estimator lacks (from their FLOPs and bytes) instead of refusing the model;
    they are listed in ``approximated`` and widen the std. ``warnings`` names the kinds of this model
    that rest on noisy samples (spread above the protocol's target, or a busy machine), the
    approximated layers, and the layers outside what the estimator's samples covered (their ``outside``).

    ``level``: the device's level now (``measure_level``'s result, or a number): THOR's estimate and the
    FLOPs baseline (fitted on the same profile) are both scaled by it, and THOR's std gains the level's
    own; None estimates the device as it was profiled.

    ``trainable``: name patterns of the only parameters that train (a fine-tune of ``model``, whatever its own
    ``requires_grad`` says; ``thor_sdk.layers.trainable``): the others' layers are estimated frozen (no weight
    gradient or update; before the first trained layer, no backward at all). The result's ``model`` says so,
    and ``trainable`` lists the patterns."""
    from thor_sdk.layers import layers_of
    from thor_sdk.layers.trainable import check_patterns, label
    from thor_sdk.runtime import load_estimator

    (batch_size,) = _check_batch_sizes([batch_size])
    trainable = check_patterns(trainable)
    est = load_estimator(estimator) if not hasattr(estimator, "estimate") else estimator
    _level_arg(level)  # a bad level fails before the model is traced
    ml = layers_of(model, input_shape=input_shape, unknown_ops=unknown_ops, trainable=trainable)
    result = estimate_layers(est, ml, batch_size, unknown_ops, level=level)
    if trainable:
        result["model"] = label(ml.name, trainable)
        result["trainable"] = list(trainable)
    return result


def _level_arg(level):
    """The runtime's ``{"level", "log_std"}`` from ``measure_level``'s result, a level dict or a number."""
    from thor_sdk.runtime.estimator import _check_level

    return _check_level(level)


def estimate_layers(est, ml, batch_size, unknown_ops="error", level=None):
    """``estimate`` of a model already split into layers (``ml``: a ``ModelLayers``) with a loaded
    estimator: for callers that estimate one model at several batch sizes without tracing it again."""
    from thor_sdk.baselines.flops import flops_estimate

    lvl = _level_arg(level)
    result = est.estimate(ml.layers, batch_size, unknown=unknown_ops, level=lvl)
    fb = flops_estimate(ml.layers, batch_size, getattr(est, "flops_baseline", None))  # per kind, every value >= 0
    f_level = lvl["level"] if lvl else 1.0  # the baseline was fitted on the same profile: the same level applies
    for row, f in zip(result["layers"], fb["layers"]):
        row["flops_baseline"] = f * f_level
    for row, layer in zip(result["layers"], ml.layers):
        if layer.get("op"):
            row["op"] = layer["op"]
    result["model"] = ml.name
    result["flops_baseline"] = {"total": fb["total"] * f_level, "train_flops": fb["flops"]}
    warnings = []
    noisy = (getattr(est, "provenance", None) or {}).get("noisy_samples") or {}
    used = {layer["kind"] for layer in ml.layers}
    for kind in sorted(used & set(noisy)):
        d = noisy[kind]
        warnings.append(f"kind {kind} rests on {d.get('noisy')} noisy sample(s) of {d.get('samples')} "
                        "(spread above the target, or a busy machine): its estimate is less reliable")
    if result.get("approximated"):
        from thor_sdk.layers import approximation_warnings

        warnings += approximation_warnings(result["approximated"])
    warnings += repeated_module_warnings(ml.layers)
    outside = [(i, row) for i, row in enumerate(result["layers"]) if row.get("outside")]
    if outside:  # where the samples never were, the GP falls back to its mean function with a wider std
        eg = "; ".join(f"layer {i} ({row.get('name') or row['kind']}): " + ", ".join(
            f"{o['feature']} {o['value']:g} (samples {o['probed'][0]:g} to {o['probed'][1]:g})"
            for o in row["outside"][:4]) for i, row in outside[:3])
        warnings.append(f"{len(outside)} layer(s) lie outside what the estimator's samples covered ({eg}"
                        f"{'; ...' if len(outside) > 3 else ''}): their estimates extrapolate; `thor-sdk probe --model` "
                        "measures them")
    result["warnings"] = warnings
    return result


def repeated_module_warnings(layers):
    """One warning line where a module with weights is called more than once in a step (its layers share a name the
    torch.fx reader took from the module; a recurrent cell's calls are one layer already): each call is estimated as a
    layer of its own, as if its weights were updated once per call, where the model updates them once."""
    from collections import Counter

    from thor_sdk.layers.kinds import get_kind

    calls = Counter(layer.get("name") for layer in layers
                    if layer.get("op") and layer.get("name") and get_kind(layer["kind"]).trains(layer["config"]))
    repeated = sorted((n, c) for n, c in calls.items() if c > 1)
    if not repeated:
        return []
    eg = ", ".join(f"{n} x{c}" for n, c in repeated[:3]) + (", ..." if len(repeated) > 3 else "")
    return [f"{len(repeated)} module(s) with weights called more than once in a step ({eg}): each call is estimated "
            "as a layer of its own, its weight update and a step's fixed costs counted per call, which the model "
            "pays once (recurrent cells' calls read 2.0-2.3x so before they were one layer, "
            "bench/results/composition-host-20261128-cell-steps.md): for small layers an overestimate"]


#: reference readings ``measure_level`` takes unless told otherwise, and at most
LEVEL_READINGS = 5
MAX_LEVEL_READINGS = 100
#: the panel a level beyond the profile's drift is checked on: layers of the profile's calibration nets at this
#: batch size, at most this many per kind and in all, none expected below this share of the reference's cost
LEVEL_PANEL_BATCH = 16
LEVEL_PANEL_PER_KIND = 2
LEVEL_PANEL_MAX = 12
LEVEL_PANEL_FLOOR = 0.25


def level_panel(estimator, batch_size=LEVEL_PANEL_BATCH, per_kind=LEVEL_PANEL_PER_KIND, max_probes=LEVEL_PANEL_MAX):
    """Probes whose cost the estimator predicts, to check a level on more than its one reference probe:
    ``[{"probe": Probe, "expected", "estimate"}]``. ``estimate``: the layer's estimate at the profile's level;
    ``expected``: that without the calibration's bias (``whole_model.log_bias``, or the layer's kind's in
    ``kind_log_bias``: ``log_bias_of``; the estimates carry it for layers inside a net), what the layer's probe should
    cost, as the reference's ``median_value`` is.

    Layers (not output heads, not stand-ins) of the profile's calibration nets (zoo nets, never held out) at
    ``batch_size``; per kind the estimator has, up to ``per_kind`` distinct layers spread over that kind's
    expected costs; the kinds costing most in those nets first, ``max_probes`` in all. Layers expected below
    LEVEL_PANEL_FLOOR of the reference probe's cost are left out (their subtraction is mostly noise).
    Deterministic: one estimator, one panel."""
    import math

    from thor_sdk.campaign.profile import DEFAULT_CALIBRATION
    from thor_sdk.layers import layers_of
    from thor_sdk.layers.kinds import model_key
    from thor_sdk.probes import Probe
    from thor_sdk.runtime import load_estimator

    est = load_estimator(estimator) if not hasattr(estimator, "estimate") else estimator
    floor = LEVEL_PANEL_FLOOR * est.require_reference()["median_value"]
    by_kind, share = {}, {}
    for name in DEFAULT_CALIBRATION:
        ml = layers_of(name)
        e = est.estimate(ml.layers, batch_size, unknown="approx")
        skip = {a["index"] for a in e.get("approximated") or []}
        for i, (layer, el) in enumerate(zip(ml.layers, e["layers"])):
            if i in skip or layer["role"] == "output" or layer.get("approx"):
                continue
            alone = math.exp(-est.log_bias_of(model_key(layer["kind"], layer["config"], batch_size)))
            if not el["mean"] * alone > floor:
                continue
            p = Probe(layer["kind"], layer["config"], batch_size, layer["role"])
            by_kind.setdefault(layer["kind"], {})[p.id] = (p, el["mean"], alone)
            share[layer["kind"]] = share.get(layer["kind"], 0.0) + el["mean"]
    panel = []
    for kind in sorted(by_kind, key=lambda k: (-share[k], k)):
        items = sorted(by_kind[kind].values(), key=lambda pe: (pe[1], pe[0].id))
        n = min(per_kind, len(items))
        picks = sorted({round((j + 1) * (len(items) - 1) / (n + 1)) for j in range(n)}) if n > 1 else [len(items) // 2]
        panel += [{"probe": items[j][0], "expected": items[j][1] * items[j][2], "estimate": items[j][1]} for j in picks]
    return panel[:max_probes]


def layer_cost_now(dev, probe, metric="time", settings=None, runtime="torch"):
    """One measurement on ``dev`` of a probe's layer cost, derived as a campaign derives its samples
    (``campaign.measure.derive_samples``: THOR's subtraction, the median of the rounds' paired differences, energy
    net of idle where the meter gives it so)."""
    from thor_sdk.campaign.measure import derive_samples
    from thor_sdk.errors import MeasurementError

    res = dev.measure_probe(probe, metric=metric, settings=settings, runtime=runtime)
    for s in derive_samples(probe, res, metric):
        if s["metric"] == metric:
            return s["value"]
    raise MeasurementError(f"{dev.name}: probe {probe.id} measured no {metric}")


def reference_reading(dev, reference, metric="time", settings=None, runtime="torch"):
    """One reading of an estimator's reference probe (``whole_model.reference``) on ``dev``: the median
    cost per step of its timed part, in the metric's unit (what the profile stored as its level)."""
    from thor_sdk.probes import Probe

    p = Probe.from_dict(reference["probe"])
    res = dev.measure_probe(p, metric=metric, settings=settings, runtime=runtime)
    return statistics.median(res[reference.get("part") or p.role].values(metric))


def measure_level(estimator, device="host", readings=LEVEL_READINGS, threads=None, settings=None):
    """The device's level now: the estimator's reference probe measured ``readings`` times on ``device``
    (with the estimator's metric and runtime), over its median during the profile.

    Returns ``{"level", "log_std", "readings", "values", "probe", "device", "runtime", "metric",
    "measured_utc", "beyond_drift", "applied"}`` (``runtime.estimator.device_level``; ``beyond_drift``: the
    level lies outside the profile's own drift, ``exp(+-level_band(drift_log_std))``, as ``evaluate`` warns).
    ``applied`` is ``beyond_drift``: within the band the estimate's std already covers the device's drift, and
    a few readings on a bursty machine move more than the device does (on this project's VM, levels read
    before a run were 0.85-1.26 where the levels around the models were 0.79-1.10, and scaling by them
    doubled the error), so callers scale by the level (``level=`` to ``estimate``) only where it is applied.

    A level beyond the band is checked first (``cross_check``): each probe of ``level_panel`` is measured once,
    and the level is applied only where their median ratio (measured over expected), the panel's level, is
    beyond the band too, on the same side: the device moved, not only its reference probe. One small reference
    probe need not move with the device: on this project's VM it read 0.58-0.77 of its profile's level three
    times in an hour while whole nets ran at 0.92-0.99 of their estimates; scaled by it, THOR's error went from
    7-13% to 27-33% (``bench/results/level-panel-host-20261127-1321.md``). ``cross_check`` is None within the
    band; else ``{"panel_level", "agrees", "members": [{"probe", "kind", "expected", "measured", "ratio"}]}``
    (a probe the device fails to measure stays a member with ``measured`` and ``ratio`` None and its ``error``),
    ``agrees`` None when no panel probe was measured (the level is then applied unchecked, as before).
    Refused before any measurement: an estimator without a reference probe (NotFoundError), a
    ``readings`` count outside 1-MAX_LEVEL_READINGS, a device of another kind than the profile's."""
    import datetime
    import math

    from thor_sdk.bounds import number
    from thor_sdk.devices.state import identity_changes
    from thor_sdk.runtime import load_estimator
    from thor_sdk.runtime.estimator import level_band

    n = number("readings", readings, low=1, high=MAX_LEVEL_READINGS, integer=True)
    est = load_estimator(estimator) if not hasattr(estimator, "estimate") else estimator
    reference = est.require_reference()
    dev = _device(device, threads=threads)
    info = dev.info()
    kind = "/".join(filter(None, ((est.device or {}).get("kind"), (est.device or {}).get("accelerator"))))
    dev_kind = "/".join(filter(None, (info.get("kind"), info.get("accelerator"))))
    if (est.device or {}).get("kind") and info.get("kind") and kind != dev_kind:
        raise UsageError(f"the estimator profiles a {kind} device, not a {dev_kind} one: its "
                         "reference probe's level there means nothing")
    values = [reference_reading(dev, reference, metric=est.metric, settings=settings, runtime=est.runtime)
              for _ in range(int(n))]
    lvl = est.level(values)
    band = level_band(est.drift_log_std)
    beyond = abs(math.log(lvl["level"])) > band
    check = _cross_check(est, dev, lvl["level"], band, settings) if beyond else None
    return dict(lvl, values=values, probe=reference["probe"].get("id"), device=dev.name, runtime=est.runtime,
                metric=est.metric, device_changes=identity_changes(est.device, info),
                measured_utc=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                beyond_drift=beyond, applied=beyond and (check is None or check["agrees"] is not False),
                cross_check=check)


def level_disagreement(level):
    """Why a level ``measure_level`` measured beyond the profile's drift was not applied, in words."""
    check = level.get("cross_check") or {}
    n = sum(1 for m in check.get("members") or [] if m["ratio"] and m["ratio"] > 0)
    return (f"beyond the profile's own drift, but {n} other probes read {check['panel_level']:.3f}, within it or "
            "on its other side (the reference probe alone moved, not the device)")


def _cross_check(est, dev, level, band, settings):
    """``measure_level``'s check of a level beyond the drift band on ``level_panel``'s probes."""
    import math

    from thor_sdk.errors import ThorError

    members = []
    for m in level_panel(est):
        row = {"probe": m["probe"].id, "kind": m["probe"].kind, "expected": m["expected"]}
        try:
            got = layer_cost_now(dev, m["probe"], est.metric, settings, est.runtime)
        except ThorError as e:  # a probe this device cannot run leaves the panel, not the level
            members.append(dict(row, measured=None, ratio=None, error=str(e)))
            continue
        members.append(dict(row, measured=got, ratio=got / m["expected"]))
    ratios = [m["ratio"] for m in members if m["ratio"] and m["ratio"] > 0]  # a subtraction lost in noise says nothing
    panel = statistics.median(ratios) if ratios else None
    agrees = None if panel is None else abs(math.log(panel)) > band and (panel > 1) == (level > 1)
    return {"panel_level": panel, "agrees": agrees, "members": members}


def _measurement_quality(dev, r, metric, settings):
    """Threads, the machine's load beside the run, outlier windows and noise, with plain warnings."""
    from thor_sdk.devices.state import load_summary
    from thor_sdk.harness.protocol import robust_summary

    threads = dev.own_threads()
    load = load_summary(r.states, os.cpu_count() if getattr(dev, "kind", None) == "host" else None, threads or 1,
                        use_load_average=dev.load_average_means_busy())
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
            meter=None, threads=None, input_shape=None, input_dtype=None, vocab=None, trainable=None):
    """Measure a whole model's training step on ``device`` (the ground truth THOR is checked against).

    ``model`` takes every form ``estimate`` takes: a reference or zoo network name; ``path/file.py:Class``
    or a ``torch.nn.Module`` with a per-sample ``input_shape`` (``input_dtype`` ``int64`` for token ids,
    below ``vocab``); a layer-list JSON or an ONNX file, rebuilt layer by layer from its kinds (see
    ``thor_sdk.harness.whole_model``). Remote devices measure reference networks by name only.
    The result's ``model`` is the model as given (a module: its class name); ``out`` records the run in
    that campaign under the same label. ``trainable``: name patterns of the only parameters that train (a
    fine-tune, as ``estimate`` takes it; measured on the host, the label says so)."""
    import numbers

    from thor_sdk.harness.protocol import ProtocolSettings
    from thor_sdk.harness.whole_model import resolve_model

    _check_metric(metric)
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral):
        raise UsageError(f"batch size must be an integer >= 1, got {batch_size!r}")
    from thor_sdk.bounds import MAX_RUN_BATCH_SIZE

    (batch_size,) = _check_batch_sizes([batch_size], MAX_RUN_BATCH_SIZE)
    # unknown names, missing files, bad shapes and patterns fail here
    source = resolve_model(model, input_shape, input_dtype, vocab, trainable=trainable)
    if source.name is None and isinstance(device, str) and not _is_host(device):
        raise UsageError(f"{device} measures whole models by reference-network name only (its bundle exports the "
                         f"network by name, trained whole); measure {source.label} on the host (--device host)")
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


# ---------------------------------------------------------------------------------------------
# power-aware training: the (batch size, GPU frequency) table, training under a power cap, replay
# ---------------------------------------------------------------------------------------------
POWER_BATCH_SIZES = (8, 16, 32, 64, 128)


def _power_batch_sizes(batch_sizes):
    """``"8,16,32"`` or a sequence of integers: sorted distinct batch sizes in their bounds."""
    from thor_sdk.bounds import batch_sizes as check
    from thor_sdk.power.ratios import parse_batch_sizes

    return parse_batch_sizes(batch_sizes) if isinstance(batch_sizes, str) else sorted(check(list(batch_sizes)))


def _power_device(device, sysfs_root=None, sim_flavor="nano"):
    """``(device, transport)``: a local device that trains in-process (host, jetson, sim) and None, or a
    Jetson over ssh and its (checked) transport; any other device is refused."""
    from thor_sdk.devices import get_device
    from thor_sdk.devices.host import HostDevice
    from thor_sdk.devices.jetson import JetsonDevice

    dev = device if hasattr(device, "frequency_controller") else get_device(device, root=sysfs_root,
                                                                            sim_flavor=sim_flavor)
    if isinstance(dev, JetsonDevice):
        why = dev.transport.why_unavailable()
        if why:
            raise DeviceUnavailableError(f"{dev.name}: {why}")
        return dev, dev.transport
    if not isinstance(dev, HostDevice):
        raise UsageError(f"{dev.name}: power-aware profiling and training run on this machine (host, jetson, sim) "
                         "or on a Jetson over ssh (jetson://user@host[:port])")
    return dev, None


def reset_frequency(device="jetson", sysfs_root=None, sim_flavor="nano", remote_sudo=False,
                    remote_command="thor-sdk", log=None):
    """Reopen the GPU's whole frequency range (after a hard kill left one pinned): ``{"min_freq", "max_freq"}``
    in Hz. ``jetson://user@host`` does it on the board over ssh (``remote_sudo``: ``sudo -n`` there)."""
    dev, transport = _power_device(device, sysfs_root, sim_flavor)
    if transport is not None:
        from thor_sdk.power.remote import reset_frequency_remote

        return reset_frequency_remote(transport, command=(remote_command,), sudo=remote_sudo, sysfs_root=sysfs_root,
                                      log=log)
    ctl = dev.frequency_controller()
    if ctl is None:
        raise UsageError(f"{dev.name}: no GPU frequency control")
    return ctl.reset_full_range()


def table_profile(device="jetson", model="mlp", batch_sizes=POWER_BATCH_SIZES, out=None, power_cap_w=None, n_steps=5,
                  resume=False, sysfs_root=None, sim_flavor="nano", remote_sudo=False, remote_command="thor-sdk",
                  progress=None, log=None):
    """Profile time per sample and peak power per (batch size, GPU frequency) into the campaign ``out``
    (``docs/power-aware-training.md``): economically for ``power_cap_w``, else every pair.

    ``device``: ``jetson`` (this machine), ``sim`` (a SIMULATED Jetson under ``sysfs_root``, written when
    new) or ``jetson://user@host[:port]`` (run on the board over ssh and pulled back; ``log`` gets its
    lines). Returns ``{"out", "simulated", "device", "rows"}`` (a remote run adds ``board``, ``remote_out``)."""
    from thor_sdk.power.profile import check_args, profile

    dev, transport = _power_device(device, sysfs_root, sim_flavor)
    if not out:
        raise UsageError("give --out FILE.db")
    sizes = _power_batch_sizes(batch_sizes)
    check_args(sizes, power_cap_w, n_steps)
    if transport is not None:
        from thor_sdk.power.remote import profile_remote

        return profile_remote(transport, model, sizes, out, power_cap_w=power_cap_w, n_steps=n_steps, resume=resume,
                              command=(remote_command,), sudo=remote_sudo, sysfs_root=sysfs_root, log=log)
    rows = profile(dev, model, sizes, out, power_cap_w=power_cap_w, n_steps=n_steps, resume=resume,
                   progress=progress)
    return {"out": out, "simulated": dev.simulated, "device": dev.power_info(), "rows": rows}


def table_ratios(model="mlp", proxy="digits", batch_sizes=POWER_BATCH_SIZES, target_accuracy=0.9, seeds=(0, 1, 2),
                 base_lr=0.1, max_epochs=30, ratio_model="unimodal", out=None, progress=None):
    """Samples-to-accuracy per batch size on an offline proxy, relative to the largest batch: the ratios
    document (checked against its schema; written to ``out`` when given). ``seeds``: integers or ``"0,1,2"``."""
    from thor_sdk.power.ratios import estimate_ratios
    from thor_sdk.power.table import validate, write_json

    if isinstance(seeds, str):
        try:
            seeds = [int(s) for s in seeds.split(",") if s.strip()]
        except ValueError:
            raise UsageError(f"seeds must be comma-separated integers, got {seeds!r}") from None
    if out:
        from thor_sdk.store.files import check_output

        check_output(out, "power table file")  # before any training
    doc = estimate_ratios(model, proxy, _power_batch_sizes(batch_sizes), target_accuracy, list(seeds), base_lr,
                          max_epochs, progress=progress, ratio_model=ratio_model)
    validate(doc, "ratios", "batch ratios")
    if out:
        write_json(doc, out)
    return doc


def table_build(profile, ratios, samples_to_target=None, out=None):
    """The power table from a profile (a ``table profile`` campaign, or an earlier standalone profile file) and
    a ratios JSON file; written to ``out`` when given. ``samples_to_target``: what the reference batch needs
    on the real task (default: the proxy's)."""
    from thor_sdk.bounds import number
    from thor_sdk.power.profile import load_profile
    from thor_sdk.power.table import build_table, read_json, write_json

    number("samples to target", samples_to_target, low=0, low_open=True, optional=True)
    if out:
        from thor_sdk.store.files import check_output

        check_output(out, "power table file")
    meta, rows = load_profile(profile)
    doc = build_table(meta, rows, read_json(ratios, "ratios", "batch ratios"), samples_to_target,
                      sources={"profile": profile, "ratios": ratios})
    if out:
        write_json(doc, out)
    return doc


def table_select(table, power_cap_w):
    """The (batch size, frequency) pair to train with under ``power_cap_w`` and why, beside both baselines:
    ``{"simulated", "power_cap_w", "why", "selected", "baseline1", "baseline2", ...}``. ``table``: a power
    table file or its document (checked either way)."""
    from thor_sdk.power.select import compare
    from thor_sdk.power.table import check, read_json

    doc = check(table) if isinstance(table, dict) else read_json(table)
    return {"simulated": doc.get("simulated", False), **compare(doc, power_cap_w)}


def train(device="host", power_cap_w=None, table=None, model="mlp", data="digits", target_accuracy=0.9,
          batch_size=None, ratios=None, batch_sizes=POWER_BATCH_SIZES, profile_steps=5, profile_out=None, base_lr=0.1,
          max_epochs=30, seed=0, out=None, sysfs_root=None, remote_sudo=False, remote_command="thor-sdk", log=None,
          board_log=None):
    """Fine-tune ``model`` on ``data`` under a power cap until the target accuracy; returns the run report
    (``docs/power-aware-training.md``), written to ``out`` when given.

    ``table`` (a power table file from ``table build``, or its document) gives the (batch size, frequency)
    pair; without one a device with frequency control profiles for the cap first (``batch_sizes``,
    ``profile_steps``, ``ratios``: a ratios file or document, ``profile_out``); the host has no frequency
    control and trains at ``batch_size`` (default 32). ``jetson://user@host`` trains on the board over ssh
    (``table`` and ``ratios`` as files; ``board_log`` gets the board's lines). ``log`` gets one line per event."""
    from thor_sdk.power.table import check, read_json, validate, write_json
    from thor_sdk.power.train import check_args, train_under_cap

    check_args(power_cap_w, target_accuracy, base_lr, max_epochs, batch_size, None, profile_steps, seed)
    if out:
        from thor_sdk.store.files import check_output

        check_output(out, "run report")  # before training
    table_doc = None if table is None else check(table) if isinstance(table, dict) else read_json(table)
    ratios_doc = (None if ratios is None else check(ratios, "ratios", "batch ratios") if isinstance(ratios, dict)
                  else read_json(ratios, "ratios", "batch ratios"))
    sizes = _power_batch_sizes(batch_sizes)
    dev, transport = _power_device(device, sysfs_root)
    say = log or (lambda line: None)
    if transport is not None:
        from thor_sdk.power.remote import train_remote

        if isinstance(table, dict) or isinstance(ratios, dict):
            raise UsageError(f"{dev.name}: give the power table and the ratios as files (they are copied to the board)")
        rep = train_remote(transport, power_cap_w, model, data, target_accuracy, table_path=table,
                           batch_size=batch_size, base_lr=base_lr, max_epochs=max_epochs, seed=seed, ratios_path=ratios,
                           batch_sizes=sizes, profile_steps=profile_steps, command=(remote_command,), sudo=remote_sudo,
                           sysfs_root=sysfs_root, log=board_log)
        if rep.get("simulated"):
            say("SIMULATED Jetson: frequency, power and energy are modelled, not measured")
    else:
        if dev.simulated:
            say("SIMULATED Jetson: frequency, power and energy are modelled, not measured")
        rep = train_under_cap(dev, power_cap_w, model, data, target_accuracy, table=table_doc, batch_size=batch_size,
                              base_lr=base_lr, max_epochs=max_epochs, seed=seed, log=log, ratios=ratios_doc,
                              batch_sizes=sizes, profile_steps=profile_steps, profile_out=profile_out)
    validate(rep, "run_report", "run report")
    if out:
        write_json(rep, out)
    return rep


def replay(power_trace, train_trace, power_column="bound", cap_step_w=5.0, targets=None, with_cases=False,
           ratio_model="unimodal", splits=None, seed=0, caps=None, progress=None):
    """Replay the selection, both baselines and the oracle on real GPU traces (the power limit as the frequency
    knob; ``docs/power-aware-training.md``): the figures per workload and overall. ``targets``: ``{workload:
    target metric}`` or ``DATASET=VALUE`` strings."""
    from thor_sdk.power.replay import replay as run_replay

    if targets is not None and not isinstance(targets, dict):
        parsed = {}
        for t in targets:
            k, sep, v = str(t).partition("=")
            try:
                parsed[k] = float(v)
            except ValueError:
                raise UsageError(f"--target wants DATASET=VALUE, got {t!r}") from None
            if not sep:
                raise UsageError(f"--target wants DATASET=VALUE, got {t!r}")
        targets = parsed
    return run_replay(power_trace, train_trace, power_column, cap_step_w, caps=caps, targets=targets,
                      with_cases=with_cases, progress=progress, ratio_model=ratio_model, splits=splits, seed=seed)
