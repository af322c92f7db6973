"""``thor-sdk train``: fine-tune under a power cap at the selected (batch size, GPU frequency): ``thor_sdk.train``."""

import click

from .common import emit_json, json_option
from .power_common import batch_sizes_option, device_option, remote_options, run_text, sysfs_option

NO_TABLE = "Jetson without --table: "


@click.command("train")
@device_option(default="host")
@sysfs_option
@click.option("--power-cap", type=float, help="Power cap in watts.")
@click.option("--table", "table_path", type=click.Path(dir_okay=False), help="Power table from `thor-sdk table build`.")
@click.option("--model", default="mlp", show_default=True)
@click.option("--data", default="digits", show_default=True, help="digits, synthetic, or a folder (X.npy+y.npy or data.csv).")
@click.option("--target-accuracy", type=float, default=0.9, show_default=True)
@click.option("--batch-size", type=int, help="Host without a table: the batch size to use (default 32).")
@click.option("--ratios", "ratios_path", type=click.Path(dir_okay=False),
              help=NO_TABLE + "batch-size ratios from `thor-sdk table ratios` (default: flat, said so).")
@batch_sizes_option(help=NO_TABLE + "batch sizes to profile for the cap before training.")
@click.option("--profile-steps", type=int, default=5, show_default=True,
              help=NO_TABLE + "timed training steps per profiled (batch size, frequency).")
@click.option("--profile-out", type=click.Path(dir_okay=False),
              help=NO_TABLE + "keep the on-the-spot profile database here.")
@click.option("--base-lr", type=float, default=0.1, show_default=True,
              help="Learning rate of the reference batch (sqrt-scaled to the batch used).")
@click.option("--max-epochs", type=int, default=30, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), help="Write the run report JSON here.")
@remote_options
@json_option
def cmd(device, sysfs_root, power_cap, table_path, model, data, target_accuracy, batch_size, ratios_path, batch_sizes,
        profile_steps, profile_out, base_lr, max_epochs, seed, out, remote_sudo, remote_command, as_json):
    """Fine-tune MODEL on DATA under a power cap until the target accuracy; write a run report."""
    import thor_sdk

    rep = thor_sdk.train(device, power_cap, table_path, model, data, target_accuracy, batch_size, ratios_path,
                         batch_sizes, profile_steps, profile_out, base_lr, max_epochs, seed, out, sysfs_root,
                         remote_sudo, remote_command, log=None if as_json else click.echo,
                         board_log=lambda line: click.echo(line, err=True))
    emit_json(rep) if as_json else click.echo(run_text(rep, out))
