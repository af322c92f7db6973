"""``thor-sdk table``: the (batch size, GPU frequency) table for training under a power cap (``thor_sdk.table_*``)."""

import click

from . import power_common as pc
from .common import emit_json, json_option, quiet_option


@click.group("table")
def cmd():
    """Profile, build and query the power-cap table; replay the selection on real GPU traces."""


@cmd.command("profile")
@pc.device_option(default="jetson")
@pc.sysfs_option
@click.option("--sim-flavor", type=click.Choice(["nano", "orin"]), default="nano", show_default=True)
@click.option("--model", default="mlp", show_default=True, help="mlp or a reference network (thor-sdk models).")
@pc.batch_sizes_option()
@click.option("--power-cap", type=float, help="Profile economically for this cap (W); default: every pair.")
@click.option("--steps", type=int, default=5, show_default=True, help="Timed training steps per pair.")
@click.option("--out", type=click.Path(dir_okay=False), help="Profile database (SQLite campaign) to write.")
@click.option("--resume", is_flag=True, help="Continue an interrupted profile in --out.")
@click.option("--reset-frequency", is_flag=True, help="Only reopen the GPU's frequency range (after a hard kill).")
@pc.remote_options
@json_option
@quiet_option
def profile_cmd(device, sysfs_root, sim_flavor, model, batch_sizes, power_cap, steps, out, resume,
                reset_frequency, remote_sudo, remote_command, as_json, quiet):
    """Measure time per sample and peak power per (batch size, GPU frequency)."""
    import thor_sdk

    remote = dict(sysfs_root=sysfs_root, sim_flavor=sim_flavor, remote_sudo=remote_sudo, remote_command=remote_command,
                  log=None if quiet else (lambda line: click.echo(line, err=True)))
    if reset_frequency:
        r = thor_sdk.reset_frequency(device, **remote)
        return emit_json(r) if as_json else click.echo(pc.reset_text(r, device))
    doc = thor_sdk.table_profile(device, model, batch_sizes, out, power_cap, steps, resume,
                                 progress=pc.progress(quiet, "profiling"), **remote)
    emit_json(doc) if as_json else click.echo(pc.profile_text(doc))


@cmd.command("ratios")
@click.option("--model", default="mlp", show_default=True, help="mlp or a reference network that takes images.")
@click.option("--proxy", default="digits", show_default=True,
              help="digits, synthetic, or a folder (X.npy+y.npy or data.csv).")
@pc.batch_sizes_option()
@click.option("--target-accuracy", type=float, default=0.9, show_default=True)
@click.option("--seeds", default="0,1,2", show_default=True)
@click.option("--base-lr", type=float, default=0.1, show_default=True, help="Learning rate of the largest batch.")
@click.option("--max-epochs", type=int, default=30, show_default=True)
@pc.ratio_model_option(help="Estimator of the expected samples per batch size (docs/power-aware-training.md).")
@click.option("--out", type=click.Path(dir_okay=False), help="Write the ratios JSON here.")
@json_option
@quiet_option
def ratios_cmd(model, proxy, batch_sizes, target_accuracy, seeds, base_lr, max_epochs, ratio_model, out, as_json,
               quiet):
    """Samples-to-accuracy per batch size on an offline proxy, relative to the largest batch."""
    import thor_sdk

    doc = thor_sdk.table_ratios(model, proxy, batch_sizes, target_accuracy, seeds, base_lr, max_epochs, ratio_model,
                                out, progress=pc.progress(quiet, "training"))
    emit_json(doc) if as_json else click.echo(pc.ratios_text(doc, out))


@cmd.command("build")
@click.argument("profile_db", type=click.Path(dir_okay=False))
@click.argument("ratios_json", type=click.Path(dir_okay=False))
@click.option("--samples-to-target", type=float,
              help="Samples the reference batch needs on the real task (default: the proxy's).")
@click.option("--out", type=click.Path(dir_okay=False), required=True)
@json_option
def build_cmd(profile_db, ratios_json, samples_to_target, out, as_json):
    """Combine a profile and batch-size ratios into a power table JSON."""
    import thor_sdk

    doc = thor_sdk.table_build(profile_db, ratios_json, samples_to_target, out)
    emit_json(doc) if as_json else click.echo(pc.build_text(doc, out))


@cmd.command("select")
@click.argument("table_json", type=click.Path(dir_okay=False))
@click.option("--power-cap", type=float, required=True, help="Power cap in watts.")
@json_option
def select_cmd(table_json, power_cap, as_json):
    """The (batch size, frequency) pair to train with under the cap, and why."""
    import thor_sdk
    from thor_sdk.power.table import read_json

    doc = read_json(table_json)
    res = thor_sdk.table_select(doc, power_cap)
    emit_json(res) if as_json else click.echo(pc.select_text(doc, res))


@cmd.command("replay")
@click.option("--power-trace", type=click.Path(dir_okay=False), required=True,
              help="CSV: dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power.")
@click.option("--train-trace", type=click.Path(dir_okay=False), required=True,
              help="CSV: dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch.")
@click.option("--power-column", type=click.Choice(["bound", "average"]), default="bound", show_default=True,
              help="Peak power of a (batch, limit): max(limit, measured average) or the measured average.")
@click.option("--cap-step", type=float, default=5.0, show_default=True, help="Watts between replayed caps.")
@click.option("--target", "targets", multiple=True, metavar="DATASET=VALUE",
              help="Target metric for a workload (default: Zeus's simulator defaults).")
@click.option("--cases", "with_cases", is_flag=True, help="Include every case in the JSON.")
@pc.ratio_model_option(help="Batch-size efficiency model fitted on the selection half.")
@click.option("--splits", type=int, default=None, help="Also score N seeded random half-splits of the runs.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random half-splits.")
@json_option
@quiet_option
def replay_cmd(power_trace, train_trace, power_column, cap_step, targets, with_cases, ratio_model, splits, seed,
               as_json, quiet):
    """Replay selection, baselines and oracle on real GPU traces (power limit as the frequency knob)."""
    import thor_sdk

    res = thor_sdk.replay(power_trace, train_trace, power_column, cap_step, targets, with_cases, ratio_model, splits,
                          seed, progress=pc.progress(quiet, "replaying"))
    emit_json(res) if as_json else click.echo(pc.replay_text(res))
