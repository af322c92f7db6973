"""``thor-sdk models``: the networks buildable by name, by group (reference, zoo, heldout, all)."""

import click

from .common import emit_json, json_option, table


@click.command("models")
@click.option("--group", type=click.Choice(["reference", "zoo", "heldout", "all"]), default="reference",
              show_default=True, help="reference: the seed papers' nets; zoo: + the prior's on-device nets; "
                                      "heldout: nets kept out of the prior for the generalization benchmark.")
@json_option
def cmd(group, as_json):
    """List the networks buildable by name."""
    from thor_sdk.models import list_models, model_spec

    specs = [model_spec(n) for n in list_models(group)]
    if as_json:
        emit_json({"models": [s.to_dict() for s in specs]})
        return
    click.echo(table([(s.name, "x".join(map(str, s.input_shape)), s.input_dtype, s.description)
                      for s in specs], ["name", "input", "dtype", "description"]))
