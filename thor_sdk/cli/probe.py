"""``thor-sdk probe``: a target-driven campaign measuring the layers of given models on a device."""

import click

from .common import Progress, json_option, quiet_option, report_campaign, unknown_ops_option


def protocol_options(f):
    f = click.option("--min-rounds", type=int, default=None, help="Rounds measured at least (default 5).")(f)
    f = click.option("--max-rounds", type=int, default=None, help="Rounds measured at most (default 15).")(f)
    f = click.option("--window-s", type=float, default=None,
                     help="Minimum seconds per measurement window (default 0.05; longer for slow meters).")(f)
    f = click.option("--threads", type=int, default=None,
                     help="Host only: intra-op threads for training steps (default 1; recorded).")(f)
    f = click.option("--cv-target", type=float, default=None,
                     help="Stop repeating once every part's coefficient of variation is below this (default 0.03).")(f)
    return f


def settings_from(min_rounds, max_rounds, window_s, cv_target):
    from thor_sdk.harness.protocol import ProtocolSettings

    d = ProtocolSettings().to_dict()
    # what is given is kept as given (a --max-rounds below --min-rounds is refused, never raised); a default
    # moves to make room for the other option alone
    if min_rounds is not None:
        d["min_rounds"] = min_rounds
        if max_rounds is None and isinstance(min_rounds, int):
            d["max_rounds"] = max(d["max_rounds"], min_rounds)
    if max_rounds is not None:
        d["max_rounds"] = max_rounds
        if min_rounds is None and isinstance(max_rounds, int):
            d["min_rounds"] = max(min(d["min_rounds"], max_rounds), 2)
    if window_s is not None:
        d["min_window_s"] = window_s
    if cv_target is not None:
        d["cv_target"] = cv_target
    return ProtocolSettings(**d)  # checked: bounds, finite


@click.command("probe")
@click.option("--device", default="host", show_default=True, help="Device to profile (see `thor-sdk devices`).")
@click.option("--model", "models", multiple=True, help="Target model(s): name, file.py:Class, .onnx or layer-list .json.")
@click.option("--input-shape", help="Per-sample input shape for file.py:Class models, e.g. 3,32,32.")
@click.option("--batch-size", "batch_sizes", type=int, multiple=True, default=(32,), show_default=True)
@click.option("--metric", type=click.Choice(["time", "energy"]), default="time", show_default=True)
@click.option("--meter", help="Energy meter overriding the device's own, e.g. external:monsoon.csv[,offset=S].")
@click.option("--runtime", type=click.Choice(["torch", "onnxruntime"]), default="torch", show_default=True,
              help="What executes the training steps on the host.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Campaign database (SQLite).")
@click.option("--resume", is_flag=True, help="Continue the campaign in --out where it stopped.")
@click.option("--max-probes", type=int, help="Stop after this many probes in the campaign.")
@click.option("--max-seconds", type=float, help="Stop selecting new probes after this many seconds.")
@click.option("--target-std", type=float, help="Stop once the targets' relative std is below this (e.g. 0.03).")
@protocol_options
@unknown_ops_option
@quiet_option
@json_option
def cmd(device, meter, models, input_shape, batch_sizes, metric, runtime, out, resume, max_probes, max_seconds, target_std,
        min_rounds, max_rounds, window_s, cv_target, threads, unknown_ops, quiet, as_json):
    """Profile DEVICE with THOR probes for the layers of the target model(s)."""
    from thor_sdk.api import probe

    bar = {}

    def progress(event, info):
        if event == "start":
            bar["b"] = Progress(max(info["total"] - info["done"], 1), "probing", quiet)
        elif event == "probe":
            p = info["probe"]
            bar["b"].update(1, label=f"{p['kind']}/{p['role']}")
        elif event == "stop":
            bar["b"].close()

    settings = None if resume else settings_from(min_rounds, max_rounds, window_s, cv_target)
    summary = probe(list(models), device=device, batch_sizes=batch_sizes, metric=metric, out=out, resume=resume,
                    max_probes=max_probes, max_seconds=max_seconds, target_rel_std=target_std, runtime=runtime,
                    settings=settings, input_shape=input_shape, progress=progress, threads=threads,
                    unknown_ops=unknown_ops,
                    meter=meter)
    report_campaign(summary, as_json)
