import click

from .common import emit_json, json_option, table


@click.command("models")
@json_option
def cmd(as_json):
    """List the reference networks buildable by name."""
    from thor_sdk.models import SPECS

    if as_json:
        emit_json({"models": [s.to_dict() for s in SPECS.values()]})
        return
    click.echo(table([(s.name, "x".join(map(str, s.input_shape)), s.input_dtype, s.description)
                      for s in SPECS.values()], ["name", "input", "dtype", "description"]))
