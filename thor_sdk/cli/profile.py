"""``thor-sdk profile``: profile a device once over the model zoo's prior, so its estimator serves unseen models."""

import click

from thor_sdk.errors import UsageError

from .common import Progress, json_option, quiet_option, report_campaign, trainable_option, unknown_ops_option
from .probe import device_option, fleet_or_one, out_options, protocol_options, settings_from


@click.command("profile")
@device_option
@click.option("--runtime", type=click.Choice(["torch", "onnxruntime"]), default="torch", show_default=True,
              help="What executes the training steps (part of the estimator's key).")
@click.option("--metric", type=click.Choice(["time", "energy"]), default="time", show_default=True)
@click.option("--meter", help="Energy meter overriding the device's own, e.g. external:monsoon.csv[,offset=S].")
@out_options
@click.option("--resume", is_flag=True, help="Continue the profile in --out where it stopped.")
@click.option("--max-seconds", type=float, help="Time budget (the last 8% measures whole calibration models).")
@click.option("--max-probes", type=int, help="Stop after this many probes in the campaign.")
@click.option("--target-std", type=float, help="Stop once the integrated relative std over the prior is below this.")
@click.option("--model", "models", multiple=True, help="App model(s) whose layers weigh more in the prior (optional; with --resume, from then on).")
@click.option("--input-shape", help="Per-sample input shape for file.py:Class models, e.g. 3,64,64.")
@click.option("--kind", "kinds", multiple=True, help="Profile only these layer kinds (default: every kind of the prior).")
@click.option("--reference-every", "reference_every_s", type=float, default=120.0, show_default=True,
              help="Seconds between re-measurements of the drift reference probe (0: never).")
@click.option("--calibration-model", "calibration_models", multiple=True,
              help="Zoo models measured whole at the end to calibrate the whole-model bias and std "
                   "(default: lenet5, har, cnn5, dscnn_kws, cnn1d_har, deepconvlstm, mlp_tabular).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the Sobol candidates.")
@click.option("--prior", "prior_path", type=click.Path(dir_okay=False),
              help="A prior file (format thor-sdk/prior) instead of the shipped zoo prior.")
@protocol_options
@unknown_ops_option
@trainable_option
@quiet_option
@json_option
def cmd(devices, runtime, metric, meter, out, out_dir, resume, max_seconds, max_probes, target_std, models, input_shape, kinds,
        reference_every_s, calibration_models, seed, prior_path, min_rounds, max_rounds, window_s, cv_target, threads,
        unknown_ops, trainable, quiet, as_json):
    """Profile DEVICE once over the zoo's prior of layer configs (space-filling, then where estimates over
    the prior are least certain). Fit it with `thor-sdk fit`; the estimator serves models never probed."""
    from thor_sdk.api import profile

    if max_seconds is None and max_probes is None and target_std is None:
        raise UsageError("give a budget: --max-seconds, --max-probes or --target-std")
    if reference_every_s < 0 or reference_every_s != reference_every_s:
        raise UsageError("--reference-every must be >= 0")
    given = any(v is not None for v in (min_rounds, max_rounds, window_s, cv_target))
    settings = settings_from(min_rounds, max_rounds, window_s, cv_target) if given and not resume else None
    devices, is_fleet = fleet_or_one(devices, out, out_dir, threads)
    if is_fleet:
        from thor_sdk.api import profile_fleet

        from .probe import fleet_progress, fleet_report

        results = profile_fleet(devices, out_dir, metric=metric, resume=resume, runtime=runtime, max_probes=max_probes,
                                max_seconds=max_seconds, target_rel_std=target_std, settings=settings, meter=meter,
                                models=list(models), input_shape=input_shape, kinds=list(kinds) or None, seed=seed,
                                reference_every_s=reference_every_s,
                                calibration_models=list(calibration_models) or None,
                                progress=fleet_progress(quiet), prior_path=prior_path, unknown_ops=unknown_ops,
                                trainable=trainable or None)
        return fleet_report(results, "profile", devices, out_dir, as_json)
    (device,) = devices
    bar = {}

    def progress(event, info):
        if event == "start":
            total = info["max_probes"] or 0
            bar["b"] = Progress(max(total - info["done"], 1) if total else 10 ** 6, "profiling", quiet)
        elif event == "probe":
            p, w = info["probe"], info["worst"]
            left = info["seconds_left"]
            label = f"{p['kind']}/{p['role']} b{p['batch_size']} | {info['done']} probes"
            if left is not None:
                label += f" | {left:.0f} s left"
            if w.get("kind"):
                label += f" | worst {w['kind']} ±{100 * w['rel_std']:.0f}%"
            bar["b"].update(1, label=label)
        elif event == "calibration":
            k = info.get("pass") or 0
            which = "during the probes" if k == "spread" else f"pass {k + 1}"
            bar["b"].update(0, label=f"calibration {which} {info['model']} b{info['batch_size']}")
        elif event == "stop":
            bar["b"].close()

    summary = profile(device=device, metric=metric, out=out, resume=resume, runtime=runtime, max_probes=max_probes,
                      max_seconds=max_seconds, target_rel_std=target_std, settings=settings, meter=meter,
                      threads=threads, unknown_ops=unknown_ops, trainable=trainable or None,
                      models=list(models), input_shape=input_shape, kinds=list(kinds) or None,
                      seed=seed, reference_every_s=reference_every_s,
                      calibration_models=list(calibration_models) or None, progress=progress,
                      prior_path=prior_path)
    report_campaign(summary, as_json)
