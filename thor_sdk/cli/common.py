"""Options and output helpers shared by the subcommands."""

import json
import sys

import click

from thor_sdk.errors import FormatError

json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
unknown_ops_option = click.option(
    "--unknown-ops", type=click.Choice(["error", "approx"]), default="error", show_default=True,
    help="Operators without a layer kind, and kinds the estimator lacks: a clear error naming them, or "
         "'approx': estimate them generically (a transformer encoder layer, bidirectional RNN, dilated or "
         "transposed conv, multi-head attention or matmul through kinds of the same sizes and FLOPs; other "
         "elementwise ops as the generic elementwise kind; missing kinds from their FLOPs and bytes), list them, "
         "and widen the std.")

trainable_option = click.option(
    "--trainable", "trainable", multiple=True, metavar="PATTERN",
    help="Fine-tune: only the parameters whose names match train, the rest are frozen, whatever the model's own "
         "requires_grad says (repeatable; a glob over the whole name, e.g. 'fc.*', '*.lora_*', or a module's "
         "name, e.g. 'classifier'; an ONNX file's initializer names). `thor-sdk layers` shows a net's module names; "
         "a pattern that matches nothing is an error naming some of the parameters.")


def emit_json(obj):
    """Strict JSON on stdout: a result holding NaN or infinity is an error, never a bare ``NaN`` token."""
    from thor_sdk.store.files import json_default

    try:
        text = json.dumps(obj, indent=2, sort_keys=False, default=json_default, allow_nan=False)
    except ValueError:
        raise FormatError("the result holds a number that is not finite (NaN or infinity); nothing printed") from None
    click.echo(text)


def table(rows, headers):
    """A plain fixed-width text table."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


class Progress:
    """A click progress bar, or nothing with --quiet / when stderr is not a terminal."""

    def __init__(self, total, label, quiet=False):
        self.bar = None
        if not quiet:
            self.bar = click.progressbar(length=total, label=label, file=sys.stderr, show_pos=True)
            self.bar.__enter__()

    def update(self, n=1, label=None):
        if self.bar is not None:
            if label:
                self.bar.label = label
            self.bar.update(n)

    def close(self):
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


def report_campaign(summary, as_json):
    """A campaign's summary (``probe``, ``profile``): its warnings on stderr, then JSON or a two-column table (without
    the warnings, said once already)."""
    warn_measurement(summary)
    if as_json:
        emit_json(summary)
        return
    click.echo(table([(k, v) for k, v in summary.items() if k != "warnings"], ["", "value"]))


def warn_measurement(summary):
    """Say on stderr when a campaign stored noisy samples or measured on a busy machine (even with --json)."""
    if isinstance(summary.get("busy"), int) and summary.get("busy"):
        click.echo(f"Warning: {summary['busy']} probe(s) were measured while the machine was busy (other runnable "
                   "work beside ours): their figures are unreliable; re-measure on a quiet machine", err=True)
    if isinstance(summary.get("noisy"), int) and not isinstance(summary.get("noisy"), bool) and summary["noisy"]:
        click.echo(f"Warning: {summary['noisy']} sample(s) are noisy (spread above the target after the last round, "
                   "or a busy machine); `thor-sdk fit` names the kinds resting on them", err=True)
    for w in summary.get("warnings") or ():
        click.echo(f"Warning: {w}", err=True)
