"""``thor-sdk harness run``: this machine as the device a bundle runs on (its meter, sysfs state, description)."""


def run_harness(bundle_path, out, *, threads=None, on_probe=None, root="/"):
    """Run a bundle on this machine (a host, or a board reached over ssh that runs ``thor-sdk harness
    run``) with its energy meter when the bundle asks for energy, its sysfs state per window, and write
    the results document to ``out``; returns it."""
    from thor_sdk.devices.allocator import hold_freed_memory
    from thor_sdk.devices.host import HostDevice
    from thor_sdk.devices.state import sysfs_state
    from thor_sdk.exporters.bundle import open_bundle
    from thor_sdk.harness.bundle_runner import run_bundle
    from thor_sdk.harness.results import write_results
    from thor_sdk.store.files import check_output

    check_output(out, "results")  # before measuring: a bad --out never costs a run
    with open_bundle(bundle_path) as (_d, manifest):
        metric = manifest["metric"]
    host = HostDevice(root=root, threads=threads)
    meter = host.require_meter(metric)
    allocator = hold_freed_memory()  # measured like the host's own probes, and said so
    doc = run_bundle(bundle_path, meter=meter, state_fn=lambda: sysfs_state(root),
                     device=dict(host.info(), allocator=allocator), threads=threads, on_probe=on_probe)
    write_results(doc, out)
    return doc
