"""Power table files: build one from a profile and batch-size ratios, read and validate them.

Schema: ``thor_sdk/schemas/table.schema.json`` (the table at the top level; ``$defs/ratios`` for the
ratios document, ``$defs/run_report`` for ``thor-sdk train`` reports).
"""

import json

from thor_sdk.errors import FormatError, UsageError

SCHEMA = "table.schema.json"


def _schema():
    from importlib import resources

    return json.loads(resources.files("thor_sdk").joinpath("schemas", SCHEMA).read_text())


def validate(doc, part=None, what="power table"):
    """Check ``doc`` against the table schema (``part``: None, ``"ratios"`` or ``"run_report"``)."""
    import jsonschema

    full = _schema()
    schema = full if part is None else {"$defs": full["$defs"], "$ref": f"#/$defs/{part}"}
    try:
        jsonschema.validate(doc, schema)
    except jsonschema.ValidationError as e:
        from thor_sdk.layers import schema_error

        raise FormatError(schema_error(e, what)) from None
    return doc


def read_json(path, part=None, what="power table"):
    """A power table (or, with ``part``, a ratios document or run report) read strictly
    (``thor_sdk.store.files.read_json``) and checked (``check``)."""
    from thor_sdk.store.files import read_json as read

    return check(read(path, what), part, f"{what} {path}")


def check(doc, part=None, what="power table"):
    """``doc`` checked against its schema; a whole table also by ``thor_sdk.runtime.table.check_table``
    (integer batch sizes, one ratio per batch size) and for one row per (batch size, frequency)."""
    from thor_sdk.runtime.table import check_table

    doc = validate(doc, part, what)
    if part is None:
        try:
            check_table(doc)
        except FormatError as e:
            raise FormatError(f"{what}: {e}") from None
        seen = {}
        for i, r in enumerate(doc["rows"]):  # `table build` writes one row per pair; the runtime would scan both
            key = (int(r["batch_size"]), float(r["freq_hz"]))
            if key in seen:
                raise FormatError(f"{what}: rows {seen[key]} and {i} are both batch {key[0]} at "
                                  f"{r['freq_hz']!r} Hz: one row per (batch size, frequency)")
            seen[key] = i
    return doc


def write_json(doc, path):
    """``doc`` as strict JSON (no NaN tokens), written whole or not at all."""
    from thor_sdk.store.files import write_text

    try:
        text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    except ValueError as e:
        raise FormatError(f"{path} cannot be written as JSON: {e}") from None
    write_text(path, text, "power table file")


def build_table(profile_meta, profile_rows, ratios_doc, samples_to_target=None, sources=None):
    """A power-table document from a profile (meta, rows) and a ratios document."""
    from thor_sdk import __version__ as version

    validate(ratios_doc, "ratios", "batch ratios")
    if not profile_rows:
        raise FormatError("the profile has no rows")
    if profile_meta.get("model") != ratios_doc["model"]:
        raise UsageError(f"profile is of {profile_meta.get('model')!r} but the ratios are of "
                         f"{ratios_doc['model']!r}")
    ratios = {e["batch_size"]: e["ratio"] for e in ratios_doc["ratios"] if e.get("ratio")}
    missing_ratio = sorted({r["batch_size"] for r in profile_rows} - set(ratios))
    dropped = sorted(e["batch_size"] for e in ratios_doc["ratios"] if not e.get("ratio"))
    rows = [{k: r[k] for k in ("batch_size", "freq_hz", "time_per_sample_s", "peak_power_w", "mean_power_w")}
            for r in profile_rows if r["batch_size"] in ratios]
    if not rows:
        raise UsageError("no batch size is both in the profile and has a ratio "
                         f"(profile: {sorted({r['batch_size'] for r in profile_rows})}, ratios: {sorted(ratios)})")
    simulated = bool(profile_meta.get("simulated"))
    if samples_to_target is not None:
        ref_samples, ref_source = float(samples_to_target), "given (real task)"
    else:
        ref_samples = ratios_doc.get("reference_samples_to_target")
        ref_source = f"proxy {ratios_doc['proxy']} (time-to-accuracy on the proxy's scale)"
    notes = []
    if "ratio_model" in ratios_doc:
        notes.append(f"batch-size ratios: {ratios_doc['ratio_model']} estimator over seeds {ratios_doc.get('seeds', [])}")
    if missing_ratio:
        notes.append(f"batch sizes {missing_ratio} were profiled but have no ratio: left out")
    if dropped:
        notes.append(f"batch sizes {dropped} missed the target on the proxy in some seed: left out")
    doc = {"format": "thor-sdk/power-table", "version": 1, "simulated": simulated, "knob": "gpu_freq_hz",
           "model": ratios_doc["model"], "device": profile_meta.get("device", {}),
           "power_metric": ("peak of the INA3221 default rails (module input rail, else sum of rails) over the "
                            "profiled training steps" + (" -- SIMULATED" if simulated else "")),
           "reference_batch_size": ratios_doc["reference_batch_size"],
           "reference_samples_to_target": ref_samples, "reference_samples_source": ref_source,
           "target_accuracy": ratios_doc["target_accuracy"], "created_by": f"thor-sdk {version} table build",
           "sources": dict(sources or {}, notes=notes),
           "rows": rows,
           "ratios": [{"batch_size": b, "ratio": v} for b, v in sorted(ratios.items())]}
    return validate(doc)
