"""``thor-sdk check``: is a model's on-device training within its energy and time budgets? (exit 0 yes, 1 no, 2 input error)."""

import time

import click

from thor_sdk.errors import InputError, ThorError

from .common import emit_json, json_option, trainable_option


@click.command("check")
@click.option("--estimator", "estimators", multiple=True, type=click.Path(dir_okay=False),
              help="Estimator JSON (`thor-sdk fit`); twice for one time and one energy estimator of one device and "
                   "runtime. With --budgets it replaces the file's estimators.")
@click.option("--model", help="Name, file.py:Class, .onnx or layer-list .json.")
@click.option("--input-shape", help="Per-sample input shape for file.py:Class models, e.g. 3,96,96.")
@click.option("--batch-size", type=int, help="Training batch size.")
@click.option("--samples", type=int, help="Training samples per epoch (the last partial batch counts) [default: one batch].")
@click.option("--epochs", type=int, help="Epochs of the run [default: 1].")
@click.option("--budget-j", type=float, help="Energy budget in joules (needs an energy estimator).")
@click.option("--budget-s", type=float, help="Time budget in seconds (needs a time estimator).")
@click.option("--per", type=click.Choice(["step", "epoch", "run"]), help="What the budgets bound [default: run].")
@click.option("--confidence", type=float, help="One-sided confidence of the upper bound [default: 0.95].")
@click.option("--name", help="Label of the model in the output [default: its name].")
@click.option("--unknown-ops", type=click.Choice(["error", "approx"]),
              help="As for `estimate`: refuse operators and kinds without a model (default), or approximate them.")
@trainable_option
@click.option("--budgets", "budgets_file", type=click.Path(dir_okay=False),
              help="TOML file of models and budgets (docs/check.md) instead of --model and its options.")
@click.option("--junit", type=click.Path(dir_okay=False), help="Also write a JUnit XML report to this file.")
@json_option
def cmd(estimators, model, input_shape, batch_size, samples, epochs, budget_j, budget_s, per, confidence, name,
        unknown_ops, trainable, budgets_file, junit, as_json):
    """Check the estimated cost of training a model on the estimator's device against budgets.

    Exit code 0: every budget kept (at the upper bound of the confidence); 1: one is not; 2: a malformed
    estimator, budgets file or model, or bad arguments (one `Error:` line, nothing written)."""
    from thor_sdk.check import check
    from thor_sdk.check.junit import check_target, write_junit

    started = time.monotonic()
    try:
        if junit:
            check_target(junit)
        report = check(model, list(estimators) or None, batch_size=batch_size, samples=samples, epochs=epochs,
                       budget_j=budget_j, budget_s=budget_s, per=per, confidence=confidence,
                       input_shape=input_shape, unknown_ops=unknown_ops, name=name, budgets=budgets_file,
                       trainable=trainable or None)
        if junit:
            write_junit(report, junit, elapsed_s=time.monotonic() - started)
    except InputError:
        raise
    except ThorError as e:  # whatever its class, an input error exits 2 here: 1 means over budget
        raise InputError(str(e)) from e
    for w in report.warnings:
        click.echo(f"Warning: {w}", err=True)
    if as_json:
        emit_json(report.to_dict())
    else:
        for line in report.lines():
            click.echo(line)
    return report.exit_code
