"""Running a probe bundle: every probe's (or the model's) parts measured side by side, one results document.

``run_bundle`` is the reference harness (``thor-sdk harness run`` on a host or a board; the Android
and iOS apps do the same in Java and Swift): the bundle's files are verified, each part's exported
training step runs in its runtime (onnxruntime or TorchScript) under the shared protocol, and the
results document (``thor_sdk.harness.results``) comes back.
"""

import os

from thor_sdk.errors import DeviceError, MeasurementError, ThorError


def _trainer(bundle_dir, manifest, part, threads=None):
    path = os.path.join(bundle_dir, *part["file"].split("/"))
    if manifest["model_format"] == "onnx":
        from thor_sdk.harness.ort_trainer import OrtTrainer

        return OrtTrainer(path, threads)
    from thor_sdk.exporters.torchscript_train import TorchScriptTrainer

    return TorchScriptTrainer(path)


def run_bundle(path, *, meter=None, state_fn=None, settings=None, device=None, threads=None, on_probe=None):
    """Measure every probe (or the model) of a bundle with the shared protocol; returns the results doc.

    The files' sha256 are verified first. ``meter``: an energy meter (required when the manifest's
    metric is energy); ``settings``: override the manifest's protocol settings; ``device``: a plain
    description stored in the results; ``on_probe(index, total, unit_id)`` is called before each probe.
    A probe of a several-probe bundle that cannot be built or run here is reported ``{"error": reason}``
    (ingest stores it failed) and the others go on; a meter or device failure stops the run.
    """
    from thor_sdk.exporters.bundle import manifest_units, open_bundle
    from thor_sdk.harness.denormals import flushed_denormals
    from thor_sdk.harness.protocol import IdleBaseline, ProtocolSettings, measure_parts
    from thor_sdk.harness.results import results_doc

    # measured with denormals flushed, as the host device measures (thor_sdk.harness.denormals)
    with open_bundle(path) as (bundle_dir, manifest), flushed_denormals():
        # one idle baseline for the whole bundle, seeded with what the campaign's earlier bundles measured
        # (the manifest's idle_baseline) and re-measured only when the device state changes
        idle = IdleBaseline.carried(manifest.get("idle_baseline"))
        metric = manifest["metric"]
        if metric == "energy" and meter is None:
            raise MeasurementError("the bundle asks for energy but no energy meter is readable here")
        known = set(ProtocolSettings().to_dict())
        s = settings or ProtocolSettings(**{k: v for k, v in manifest["settings"].items() if k in known})
        units = manifest_units(manifest)
        out, failures = {}, {}
        for i, (uid, _probe, parts) in enumerate(units):
            if on_probe:
                on_probe(i, len(units), uid)
            trainers = {}
            try:
                for part in parts:
                    trainers[part["name"]] = _trainer(bundle_dir, manifest, part, threads)
                out[uid] = measure_parts(trainers, s, meter=meter if metric == "energy" else None, metric=metric,
                                         state_fn=state_fn, idle=idle)
            except (MeasurementError, DeviceError):
                raise  # the device's or meter's failure, not this probe's: stop
            except (ThorError, RuntimeError, ValueError) as e:
                if len(units) == 1:
                    raise
                failures[uid] = f"{type(e).__name__}: {e}"  # this probe cannot run here: say so, go on
            finally:
                for t in trainers.values():
                    t.close()
    return results_doc(manifest, out, metric=metric, settings=s.to_dict(), device=device, failures=failures,
                       idle_baseline=idle.to_carry() if metric == "energy" else None)
