"""The harness results format: validating a results document, parsing it against its bundle, writing it.

A harness (``thor_sdk.harness.bundle_runner``, or the Android/iOS apps) writes one results document
per bundle run (schema: ``thor_sdk/schemas/results.schema.json``): per probe (or the whole model),
per part, the step times per window (and energy with a meter: ``energy_basis`` says whether
``energy_j`` is gross or already net of the idle baseline), the windows' wall-clock spans and device
states; a probe the device could not run carries ``{"error": reason}`` instead of parts. This module
owns that format both ways (``results_doc`` builds one, ``parse_results``/``parse_failures`` read
one); storing parsed results in a campaign is ``thor_sdk.campaign.ingest``.
"""

import json
import math

from thor_sdk.errors import FormatError

RESULTS_FORMAT = "thor-sdk/results"
VERSION = 1


def validate_results_doc(doc, what="results"):
    """Schema, finiteness and path checks of a results document on its own."""
    from thor_sdk.exporters.bundle import check_finite, check_relpath
    from thor_sdk.store.files import validate_schema

    if not isinstance(doc, dict):
        raise FormatError(f"{what} is not a JSON object")
    if doc.get("error") and "format" not in doc:
        raise FormatError(f"{what}: the harness failed: {str(doc['error'])[:300]}")
    if doc.get("format") == RESULTS_FORMAT and doc.get("version") not in (None, VERSION):
        raise FormatError(f"{what} is results format version {doc.get('version')}; this thor-sdk reads version {VERSION}")
    check_finite(doc, what)
    validate_schema(doc, "results.schema.json", what)
    for f in doc.get("files", []):
        check_relpath(f["path"], f"{what}: file")
    return doc


def _part_result(name, d, metric, what):
    from thor_sdk.harness.protocol import PartResult

    n = len(d["time_s"])
    energy = list(d.get("energy_j") or [])
    net = list(d.get("net_energy_j") or [])
    if energy and len(energy) != n:
        raise FormatError(f"{what}: part {name} has {len(energy)} energy values for {n} rounds")
    if net and len(net) != n:
        raise FormatError(f"{what}: part {name} has {len(net)} net energy values for {n} rounds")
    if metric == "energy" and not energy:
        raise FormatError(f"{what}: part {name} has no energy_j but the bundle's metric is energy")
    times = d.get("window_times_s") or [[w["t_start_s"], w["t_end_s"]] for w in d.get("windows") or []
                                         if "t_start_s" in w and "t_end_s" in w]
    for a, b in times:
        if b < a:
            raise FormatError(f"{what}: part {name} has a window that ends before it starts")
    states = list(d.get("states") or [w["state"] for w in d.get("windows") or [] if isinstance(w.get("state"), dict)])
    idle_w = [float(v) for v in d.get("window_idle_power_w") or []]
    if idle_w and len(idle_w) != n:
        raise FormatError(f"{what}: part {name} has {len(idle_w)} window idle powers for {n} rounds")
    canary = [float(v) for v in d.get("canary_s") or []]
    if canary and (len(canary) != n or not all(math.isfinite(v) and v > 0 for v in canary)):
        raise FormatError(f"{what}: part {name} has canary_s that is not one positive reading per round")
    if energy_basis(d) == "net":  # the meter's log already had the idle baseline taken off: no gross energy
        if net:
            raise FormatError(f"{what}: part {name} has energy_basis net and net_energy_j; give the net values "
                              "once, in energy_j")
        energy, net = [], energy
    return PartResult(name, int(d["steps_per_window"]), [float(v) for v in d["time_s"]], [float(v) for v in energy],
                      [float(v) for v in net], d.get("idle_power_w"), states, [tuple(w) for w in times],
                      window_idle_power_w=idle_w, canary_s=canary)


def energy_basis(part_doc):
    """``"gross"`` (the default: ``energy_j`` includes the device's idle power, ``net_energy_j`` has it
    taken off) or ``"net"`` (an external meter's log already net of the idle baseline: ``energy_j`` is net)."""
    return part_doc.get("energy_basis") or "gross"





def parse_results(doc, manifest, what="results"):
    """{unit id: {part: PartResult}} of a results document checked against the manifest it ran.

    Refuses (FormatError): schema violations, NaN/infinity, non-positive step times, negative energy,
    unsafe file paths, results for another bundle or another metric, unknown probe ids or parts,
    and probes missing parts.
    """
    from thor_sdk.exporters.bundle import manifest_units

    validate_results_doc(doc, what)
    if doc.get("bundle") not in (None, manifest["id"]):
        raise FormatError(f"{what} are for bundle {doc['bundle']}, not {manifest['id']}")
    if doc["metric"] != manifest["metric"]:
        raise FormatError(f"{what} measured {doc['metric']} but the bundle asks for {manifest['metric']}")
    units = {uid: [p["name"] for p in parts] for uid, _probe, parts in manifest_units(manifest)}
    if "parts" in doc:
        if len(units) != 1:
            raise FormatError(f"{what} give top-level parts but the bundle holds {len(units)} probes")
        by_unit = {next(iter(units)): doc["parts"]}
    else:
        by_unit = {uid: v["parts"] for uid, v in doc["probes"].items() if "parts" in v}
        for uid in doc["probes"]:
            if uid not in units:
                raise FormatError(f"{what} name probe {uid}, which is not in the bundle")
    out = {}
    for uid, parts in by_unit.items():
        if uid not in units:
            raise FormatError(f"{what} name probe {uid}, which is not in the bundle")
        missing = [p for p in units[uid] if p not in parts]
        extra = [p for p in parts if p not in units[uid]]
        if missing or extra:
            raise FormatError(f"{what}: probe {uid} has parts {sorted(parts)}, expected {units[uid]}")
        out[uid] = {p: _part_result(p, parts[p], manifest["metric"], f"{what}: probe {uid}") for p in units[uid]}
        rounds = {len(r.time_s) for r in out[uid].values()}
        if len(rounds) != 1:
            raise FormatError(f"{what}: probe {uid}: its parts have different numbers of rounds {sorted(rounds)}")
    return out


def parse_failures(doc):
    """``{probe id: reason}``: the probes a results document says the device could not run
    (``"probes": {id: {"error": reason}}``); call after ``parse_results`` (which checks the ids)."""
    return {uid: str(v["error"])[:2000] for uid, v in (doc.get("probes") or {}).items() if "parts" not in v}


def results_doc(manifest, units, *, metric=None, settings=None, device=None, failures=None, harness=None,
                idle_baseline=None):
    """A results document for ``manifest``'s run: ``units`` = ``{unit id: {part: PartResult}}`` measured,
    ``failures`` = ``{unit id: reason}`` not run, ``idle_baseline`` = ``IdleBaseline.to_carry()`` of an
    energy run (for the campaign's next bundle). One-probe and whole-model bundles put the parts at the
    top level (what the phone apps write). Validated before it is returned."""
    from thor_sdk.exporters.bundle import manifest_units, now_utc, producer

    failures = dict(failures or {})
    doc = {"format": RESULTS_FORMAT, "version": VERSION, "harness": harness or producer(), "bundle": manifest["id"],
           "created_utc": now_utc(), "metric": metric or manifest["metric"], "device": device,
           "settings": dict(settings if settings is not None else manifest["settings"])}
    out = {uid: {p: r.to_dict() for p, r in parts.items()} for uid, parts in units.items()}
    ids = [uid for uid, _probe, _parts in manifest_units(manifest)]
    if len(ids) == 1 and "parts" in manifest and not failures:
        doc["parts"] = out[ids[0]]
    else:
        doc["probes"] = {uid: ({"parts": out[uid]} if uid in out else {"error": failures[uid]})
                         for uid in ids if uid in out or uid in failures}
    if idle_baseline is not None:
        doc["idle_baseline"] = idle_baseline
    validate_results_doc(doc)
    return doc


def read_probe_parts(results_path, bundle_dir):
    """{part: PartResult} of a one-probe (or whole-model) bundle's results file."""
    from thor_sdk.exporters.bundle import read_manifest
    from thor_sdk.store.files import read_json

    manifest = read_manifest(bundle_dir)
    parsed = parse_results(read_json(results_path, "harness results"), manifest, f"results {results_path}")
    if len(parsed) != 1:
        raise FormatError(f"results {results_path} hold {len(parsed)} probes; expected one")
    return next(iter(parsed.values()))


def write_results(doc, path):
    """Write a results document atomically (FormatError when it holds NaN or infinity)."""
    from thor_sdk.store.files import write_text

    try:
        text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    except ValueError as e:  # NaN / infinity
        raise FormatError(f"results cannot be written as JSON: {e}") from None
    write_text(path, text, "results")
