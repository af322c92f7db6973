"""A harness's results stored in the campaign its bundle came from (``thor-sdk harness ingest``).

Everything is checked -- the results against their manifest (``thor_sdk.harness.results``), the
manifest's probes against the campaign -- before anything is written; then each measured probe's
windows and its per-layer samples (THOR's subtraction, ``thor_sdk.campaign.measure``) are stored in
one transaction, through the campaign's own methods.
"""

import os

from thor_sdk.errors import FormatError, StoreError, UsageError


def ingest_results(campaign, results_doc, manifest):
    """Validate ``results_doc`` against ``manifest`` and ``campaign`` -- everything, before writing
    anything -- then store each measured probe's windows and per-layer samples and mark it done.

    Returns ``{"probes": [ids ingested], "windows": count, "samples": count}``. Probes of the bundle
    the results do not cover stay planned. FormatError (one line) and the campaign untouched on any
    problem; StoreError when a probe is not planned in this campaign or already measured.
    """
    from thor_sdk.campaign.measure import derive_samples, window_detail
    from thor_sdk.devices.state import load_summary
    from thor_sdk.exporters.bundle import validate_manifest
    from thor_sdk.harness.protocol import IdleBaseline
    from thor_sdk.harness.results import parse_failures, parse_results
    from thor_sdk.probes import Probe

    if isinstance(campaign, (str, os.PathLike)):
        raise UsageError("ingest_results(campaign, results_doc, manifest) takes an open Campaign; to read one "
                         "probe's parts from a results file use read_probe_parts(results_path, bundle_dir)")
    validate_manifest(manifest)
    if manifest.get("model"):
        raise UsageError("a whole-model bundle's results have no probes to store in a campaign")
    meta = campaign.meta
    if meta.get("metric", "time") != manifest["metric"]:
        raise FormatError(f"the bundle measured {manifest['metric']} but campaign {campaign.path} is for "
                          f"{meta.get('metric')}")
    parsed = parse_results(results_doc, manifest)
    failures = parse_failures(results_doc)
    probes = {p["id"]: Probe.from_dict(p) for p in manifest["probes"]}
    known = {p.id for p in campaign.probes()}
    done = {p.id for p in campaign.probes("done")}
    settled = done | {p.id for p in campaign.probes("failed")}
    if (parsed or failures) and all(uid in done for uid in parsed) and all(uid in settled for uid in failures):
        # the same file again
        return {"probes": [], "failed": [], "windows": 0, "samples": 0,
                "already_ingested": sorted(set(parsed) | set(failures)),
                "message": f"every probe of these results is already measured in {campaign.path}: nothing ingested"}
    settings = dict(manifest.get("settings") or {}, **(results_doc.get("settings") or {}))
    device = results_doc.get("device") or {}
    threads = device.get("torch_threads") if isinstance(device.get("torch_threads"), int) else 1
    plan = []
    for uid in list(parsed) + list(failures):
        if uid not in known:
            raise StoreError(f"probe {uid} is not in campaign {campaign.path}")
    for uid, parts in parsed.items():
        if uid in done:
            raise StoreError(f"probe {uid} is already measured in {campaign.path}")
        _check_energy_basis(campaign, done, parts, uid)
        load = load_summary([st for r in parts.values() for st in r.states], own_threads=threads)
        samples = derive_samples(probes[uid], parts, manifest["metric"], cv_target=settings.get("cv_target"),
                                 load=load)
        plan.append((uid, parts, samples))
    windows = n_samples = 0
    with campaign.batch():  # one transaction: a killed or failed ingest leaves the campaign as it was
        for uid, parts, samples in plan:
            campaign.discard_partial(uid)
            for name, r in parts.items():
                for rnd, t in enumerate(r.time_s):
                    campaign.add_window(uid, name, rnd, t, r.energy_j[rnd] if r.energy_j else None)
                    windows += 1
            campaign.complete(uid, samples, window_detail=window_detail(parts))
            n_samples += len(samples)
        carried = IdleBaseline.carried(results_doc.get("idle_baseline"))
        if manifest["metric"] == "energy" and carried.power_w is not None:
            # the device's idle power after this bundle: the campaign's next bundle carries it to the device
            campaign.set_meta("idle_baseline", {"power_w": carried.power_w, "state": carried.state,
                                                "bundle": manifest["id"]})
        failed = [uid for uid in failures if uid not in done]
        for uid in failed:  # the device could not run it: stored failed, bundled again by the next `bundle`
            campaign.discard_partial(uid)
            campaign.fail(uid, f"on the device: {failures[uid]}")
    return {"probes": [uid for uid, _, _ in plan], "failed": failed, "windows": windows, "samples": n_samples}


def _check_energy_basis(campaign, done, parts, uid):
    """A campaign's energy samples are all gross or all net of the idle baseline, never a mix: a results
    file whose energy is net (``energy_basis`` net: no gross values) cannot join gross ones, nor the
    other way round (FormatError)."""
    if not any(r.energy_j or r.net_energy_j for r in parts.values()):
        return
    net_only = not all(r.energy_j for r in parts.values())
    for pid in done:
        stored = [w for w in campaign.windows(pid) if w[3] is not None]
        has_gross = bool(stored)
        if not has_gross and not any(w["net_energy_j"] is not None for w in campaign.windows(pid, detail=True)):
            continue
        if has_gross == net_only:
            raise FormatError(f"probe {uid}'s energy is {'net of' if net_only else 'gross, with'} the idle baseline "
                              f"but campaign {campaign.path} holds {'gross' if has_gross else 'net'} energy "
                              "(energy_basis); one campaign keeps one")
        return


def ingest_file(results_path, bundle_path, campaign_path):
    """``thor-sdk harness ingest``: a results file -> the campaign the bundle came from."""
    from thor_sdk.exporters.bundle import open_bundle
    from thor_sdk.store import Campaign
    from thor_sdk.store.files import read_json

    with open_bundle(bundle_path) as (_d, manifest):
        pass
    doc = read_json(results_path, "harness results")
    with Campaign.open(campaign_path, writer=True) as c:
        return ingest_results(c, doc, manifest)
