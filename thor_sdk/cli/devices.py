"""``thor-sdk devices``: the host and connected devices with their energy meters, and why a kind is absent."""

import click

from .common import emit_json, json_option, table


@click.command("devices")
@click.option("--jetson", "jetson_targets", multiple=True, metavar="USER@HOST[:PORT]",
              help="Also check this ssh target (a Jetson or other Linux board); repeatable.")
@json_option
def cmd(jetson_targets, as_json):
    """List the host and connected devices with their energy meters; say why a kind is absent."""
    from thor_sdk.devices.discover import discover

    entries = discover(jetson_targets=jetson_targets)
    if as_json:
        emit_json({"devices": entries})
        return
    rows = []
    for e in entries:
        readable = [m["name"] for m in e["meters"] if m.get("available")]
        meters = ", ".join(readable) if readable else ("none readable" if e["meters"] else "-")
        label = e["spec"] or e["kind"]
        if e.get("cpu_model"):
            label += f" ({e['cpu_model']}{'; ' + ', '.join(e['cpu_isa']) if e.get('cpu_isa') else ''})"
        rows.append((label, e["status"], meters, e["why"]))
    click.echo(table(rows, ["device", "status", "energy meters", "why"]))
    for e in entries:
        if e["meters"]:
            click.echo(f"\nmeters of {e['spec']}:")
            click.echo(table([(m["name"], "yes" if m.get("available") else "no", m.get("why_unavailable") or "")
                              for m in e["meters"]], ["meter", "readable", "why not"]))
