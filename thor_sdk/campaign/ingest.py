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
    from thor_sdk.campaign.measure import derive_samples
    from thor_sdk.exporters.bundle import validate_manifest
    from thor_sdk.harness.results import parse_results
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
    probes = {p["id"]: Probe.from_dict(p) for p in manifest["probes"]}
    known = {p.id for p in campaign.probes()}
    done = {p.id for p in campaign.probes("done")}
    if parsed and all(uid in done for uid in parsed):  # the same file again: nothing to do
        return {"probes": [], "windows": 0, "samples": 0, "already_ingested": sorted(parsed),
                "message": f"every probe of these results is already measured in {campaign.path}: nothing ingested"}
    plan = []
    for uid, parts in parsed.items():
        if uid not in known:
            raise StoreError(f"probe {uid} is not in campaign {campaign.path}")
        if uid in done:
            raise StoreError(f"probe {uid} is already measured in {campaign.path}")
        samples = derive_samples(probes[uid], parts, manifest["metric"])
        plan.append((uid, parts, samples))
    windows = n_samples = 0
    with campaign.batch():  # one transaction: a killed or failed ingest leaves the campaign as it was
        for uid, parts, samples in plan:
            campaign.discard_partial(uid)
            for name, r in parts.items():
                for rnd, t in enumerate(r.time_s):
                    campaign.add_window(uid, name, rnd, t, r.energy_j[rnd] if r.energy_j else None)
                    windows += 1
            campaign.complete(uid, samples)
            n_samples += len(samples)
    return {"probes": [uid for uid, _, _ in plan], "windows": windows, "samples": n_samples}


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
