"""``thor-sdk`` console script: a thin layer over the library.

Subcommands live one per module in this package and are imported only when invoked, so
``thor-sdk --help`` does not import torch. Only this layer turns ``ThorError`` into a one-line
``Error: ...`` and an exit code.
"""

import importlib
import sys

import click

from thor_sdk.errors import ThorError

# name -> (module in thor_sdk.cli, attribute, one-line help shown by --help without importing it)
COMMANDS = {
    "models": ("models", "cmd", "List the reference networks."),
    "kinds": ("kinds", "cmd", "List the layer kinds and their config features."),
    "layers": ("layers", "cmd", "Show (or save as JSON) a model's THOR layer list."),
    "probe": ("probe", "cmd", "Profile a device with THOR probes into a campaign database."),
    "profile": ("profile", "cmd", "Profile a device once over the model zoo's prior (estimates unseen models)."),
    "fit": ("fit", "cmd", "Fit one cost model per layer kind into a JSON estimator."),
    "estimate": ("estimate", "cmd", "Estimate a model's training-step cost from an estimator."),
    "check": ("check", "cmd", "Fail a build when a model's training energy/time is over its budget."),
    "measure": ("measure", "cmd", "Measure a whole model's training step on a device (ground truth)."),
    "evaluate": ("evaluate", "cmd", "THOR vs the FLOPs, TDP, PRE and STEP baselines vs measurements; an HTML report."),
    "table": ("table", "cmd", "Power-cap table: profile, ratios, build, select; replay on GPU traces."),
    "train": ("train", "cmd", "Fine-tune under a power cap with the selected batch size and GPU frequency."),
    "devices": ("devices", "cmd", "List the host and connected devices with their energy meters."),
    "export": ("export", "cmd", "Export a model's training step as ONNX, TorchScript or updatable Core ML."),
    "bundle": ("bundle", "cmd", "Export a campaign's probes into a bundle a device harness runs."),
    "harness": ("harness", "cmd", "Run a probe bundle here (reference harness); ingest a harness's results."),
    "prune-plan": ("prune", "cmd", "Plan width cuts that bring a model's estimated cost down by a target fraction."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[name]
        return getattr(importlib.import_module(f"thor_sdk.cli.{module}"), attr)

    def format_commands(self, ctx, formatter):
        rows = [(name, COMMANDS[name][2]) for name in sorted(COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="thor-sdk")
def cli():
    """thor-sdk: what training a neural network on a device costs, measured and predicted (THOR)."""


def _command(argv):
    """The subcommand named in ``argv`` (None before one is given)."""
    args = sys.argv[1:] if argv is None else list(argv)
    return next((a for a in args if a in COMMANDS), None)


def main(argv=None):
    from thor_sdk.extras import missing_extra

    try:
        rv = cli.main(args=argv, prog_name="thor-sdk", standalone_mode=False)
    except (ThorError, ModuleNotFoundError) as e:
        # a module only an extra installs (torch, onnx, ...), raised or a ThorError's cause: one line naming the extra
        err = missing_extra(e, _command(argv)) or e
        if not isinstance(err, ThorError):
            raise
        click.echo(f"Error: {err}", err=True)
        sys.exit(err.exit_code)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.UsageError as e:
        if type(e).__name__ == "NoArgsIsHelpError":  # `thor-sdk probe` alone: its help
            e.show()
        else:  # one line, like every other error: a bad option value, an unknown option, a missing one
            where = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
            click.echo(f"Error: {e.format_message().strip().rstrip('.')}{where}", err=True)
        sys.exit(e.exit_code)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        sys.exit(130)
    except SystemExit as e:
        # no command ends by a successful SystemExit: code it ran did (a model file's forward, say), and
        # exit 0 would read as success with nothing done
        if e.code not in (None, 0):
            raise
        click.echo("Error: code this command ran (a model file?) called sys.exit() before the command finished; "
                   "nothing was completed", err=True)
        sys.exit(2)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    main()
