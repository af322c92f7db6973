"""``thor-sdk train``: fine-tune under a power cap with the selected (batch size, GPU frequency)."""

import click

from .common import emit_json, json_option, table


@click.command("train")
@click.option("--device", default="host", show_default=True,
              help="host, jetson (run on the Jetson itself), jetson://user@host[:port] (over ssh; thor-sdk "
                   "installed there) or sim (SIMULATED Jetson under --sysfs-root).")
@click.option("--sysfs-root", type=click.Path(file_okay=False),
              help="sysfs root (/ on a Jetson; a folder for sim; a folder on the board for jetson://).")
@click.option("--power-cap", type=float, help="Power cap in watts.")
@click.option("--table", "table_path", type=click.Path(dir_okay=False), help="Power table from `thor-sdk table build`.")
@click.option("--model", default="mlp", show_default=True)
@click.option("--data", default="digits", show_default=True, help="digits, synthetic, or a folder (X.npy+y.npy or data.csv).")
@click.option("--target-accuracy", type=float, default=0.9, show_default=True)
@click.option("--batch-size", type=int, help="Host without a table: the batch size to use (default 32).")
@click.option("--ratios", "ratios_path", type=click.Path(dir_okay=False),
              help="Jetson without --table: batch-size ratios from `thor-sdk table ratios` (default: flat, said so).")
@click.option("--batch-sizes", default="8,16,32,64,128", show_default=True,
              help="Jetson without --table: batch sizes to profile for the cap before training.")
@click.option("--profile-steps", type=int, default=5, show_default=True,
              help="Jetson without --table: timed training steps per profiled (batch size, frequency).")
@click.option("--profile-out", type=click.Path(dir_okay=False),
              help="Jetson without --table: keep the on-the-spot profile database here.")
@click.option("--base-lr", type=float, default=0.1, show_default=True,
              help="Learning rate of the reference batch (sqrt-scaled to the batch used).")
@click.option("--max-epochs", type=int, default=30, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), help="Write the run report JSON here.")
@click.option("--remote-sudo", is_flag=True, help="jetson://: run thor-sdk on the board with `sudo -n` (root).")
@click.option("--remote-command", default="thor-sdk", show_default=True,
              help="jetson://: the thor-sdk executable on the board (a full path when it is not on PATH).")
@json_option
def cmd(device, sysfs_root, power_cap, table_path, model, data, target_accuracy, batch_size, ratios_path, batch_sizes,
        profile_steps, profile_out, base_lr, max_epochs, seed, out, remote_sudo, remote_command, as_json):
    """Fine-tune MODEL on DATA under a power cap until the target accuracy; write a run report."""
    from thor_sdk.power.board import board_from
    from thor_sdk.power.remote import is_remote, train_remote, transport_for
    from thor_sdk.power.table import read_json, validate, write_json
    from thor_sdk.power.train import train_under_cap

    from thor_sdk.power.ratios import parse_batch_sizes

    if out:
        from thor_sdk.store.files import check_output

        check_output(out, "run report")  # before training
    doc = read_json(table_path) if table_path else None
    ratios = read_json(ratios_path, "ratios", "batch ratios") if ratios_path else None
    sizes = parse_batch_sizes(batch_sizes)
    log = None if as_json else click.echo
    if is_remote(device):  # the same command on the board over ssh; its report comes back
        rep = train_remote(transport_for(device), power_cap, model, data, target_accuracy, table_path=table_path,
                           batch_size=batch_size, base_lr=base_lr, max_epochs=max_epochs, seed=seed,
                           ratios_path=ratios_path, batch_sizes=sizes, profile_steps=profile_steps,
                           command=(remote_command,), sudo=remote_sudo, sysfs_root=sysfs_root,
                           log=lambda line: click.echo(line, err=True))
        if rep.get("simulated") and log:
            log("SIMULATED Jetson: frequency, power and energy are modelled, not measured")
    else:
        board = board_from(device, sysfs_root)
        if board.simulated and log:
            log("SIMULATED Jetson: frequency, power and energy are modelled, not measured")
        rep = train_under_cap(board, power_cap, model, data, target_accuracy, table=doc, batch_size=batch_size,
                              base_lr=base_lr, max_epochs=max_epochs, seed=seed, log=log, ratios=ratios,
                              batch_sizes=sizes, profile_steps=profile_steps, profile_out=profile_out)
    validate(rep, "run_report", "run report")
    if out:
        write_json(rep, out)
    if as_json:
        emit_json(rep)
        return
    click.echo(table([(e["epoch"], f"{e['time_s']:.3f}", f"{e['val_accuracy']:.4f}",
                       "-" if e["energy_j"] is None else f"{e['energy_j']:.3f}") for e in rep["epochs"]],
                     ["epoch", "time s", "val acc", "energy J"]))
    state = "reached" if rep["reached_target"] else "did NOT reach"
    click.echo(f"{state} {target_accuracy} in {len(rep['epochs'])} epochs, {rep['total_time_s']:.2f} s "
               f"(batch {rep['batch_size']}" + (f", {rep['freq_hz'] / 1e6:g} MHz)" if rep["freq_hz"] else ")"))
    for n in rep["notes"]:
        click.echo(f"note: {n}")
    if out:
        click.echo(f"report -> {out}")
