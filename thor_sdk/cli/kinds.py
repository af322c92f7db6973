"""``thor-sdk kinds``: the layer kinds and their config features."""

import click

from .common import emit_json, json_option, table


@click.command("kinds")
@json_option
def cmd(as_json):
    """List the layer kinds and their config features (GP inputs add batch_size and role)."""
    from thor_sdk.layers.kinds import gp_features, list_kinds

    kinds = list_kinds()
    for k in kinds:
        k["gp_features"] = gp_features(k["name"])
    if as_json:
        emit_json({"kinds": kinds})
        return
    click.echo(table([(k["name"], ", ".join(k["features"] + [f"[{o}]" for o in k["optional_keys"]]),
                       "/".join(k["roles"])) for k in kinds], ["kind", "features", "roles"]))
    click.echo("[key]: an optional config key, not a GP input (a conv's or pooling's width side: the height's when "
               "left out)")
