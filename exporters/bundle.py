"""Probe bundles: writing, zipping, reading and verifying the exported training steps a device measures.

A bundle is a folder (optionally zipped) holding ``manifest.json`` (schema:
``thor_sdk/schemas/manifest.schema.json``) and one file per probe part (ONNX or TorchScript training
steps, named by content hash under ``parts/`` so identical parts are stored once). The manifest lists
every probe (id, kind, role, config, batch size), its parts (file, sha256, input/label shapes and
dtypes), the model format and runtime, optimizer, loss, the metric and the measurement protocol's
settings; every file has a sha256 that a harness checks before running anything.

Running a bundle is the harness's (``thor_sdk.harness.bundle_runner``; ``thor-sdk harness run`` is
``thor_sdk.devices.local_harness``), the results format is ``thor_sdk.harness.results``, and storing
results in a campaign is ``thor_sdk.campaign.ingest``.
"""

import contextlib
import datetime as _dt
import hashlib
import json
import math
import os
import shutil
import tempfile

from thor_sdk.errors import FormatError, NotFoundError, NotOurFileError, StoreError, UsageError

MANIFEST_FORMAT = "thor-sdk/bundle"
VERSION = 1
MANIFEST = "manifest.json"
FORMATS = ("onnx", "torchscript")
RUNTIME_OF = {"onnx": "onnxruntime", "torchscript": "torchscript"}
SUFFIX = {"onnx": ".onnx", "torchscript": ".pt"}


def now_utc():
    """The time now, UTC, to the second (``2026-11-23T11:40:00Z``)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def producer():
    """``thor-sdk VERSION``: who wrote a manifest or a results file."""
    from thor_sdk import __version__

    return f"thor-sdk {__version__}"


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_relpath(path, what="file path"):
    """A path from a manifest or results file: relative, '/'-separated, no '..', no odd characters."""
    if not isinstance(path, str) or not path or path.startswith("/") or "\\" in path or "\0" in path \
            or ":" in path or any(seg in ("..", "") for seg in path.split("/")):
        raise FormatError(f"{what} {path!r} is not a plain relative path inside the bundle (no '/' prefix, no '..')")
    return path


def _check_format(fmt):
    if fmt not in FORMATS:
        raise UsageError(f"unknown bundle format {fmt!r} (known: {', '.join(FORMATS)})")


# ---------------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------------
class _PartWriter:
    """Exports probe parts into a bundle folder, one file per distinct content."""

    def __init__(self, out_dir, fmt, optimizer, lr, cache=None):
        from .onnx_train import OnnxStepExporter

        self.out_dir, self.fmt, self.optimizer, self.lr, self.cache = out_dir, fmt, optimizer, lr, cache
        self.exporter = OnnxStepExporter() if fmt == "onnx" else None
        self.files = {}  # relpath -> (sha256, bytes)

    def write(self, name, module, x, y, x_requires_grad, num_classes):
        from .onnx_train import cached_export, describe

        os.makedirs(os.path.join(self.out_dir, "parts"), exist_ok=True)
        tmp = os.path.join(self.out_dir, "parts", f".tmp-{os.getpid()}-{name}{SUFFIX[self.fmt]}")
        extra = {}
        if self.fmt == "onnx":
            src = cached_export(module, x, y, optimizer=self.optimizer, lr=self.lr, x_requires_grad=x_requires_grad,
                                cache=self.cache, exporter=self.exporter)
            shutil.copyfile(src, tmp)
            desc = describe(tmp)
            extra = {"state_pairs": desc["state_pairs"], "outputs": [o["name"] for o in desc["outputs"]]}
        else:
            from .torchscript_train import export_torchscript

            export_torchscript(module, x, y, tmp, optimizer=self.optimizer, lr=self.lr,
                               x_requires_grad=x_requires_grad)
        digest = sha256_file(tmp)
        rel = f"parts/{digest[:20]}{SUFFIX[self.fmt]}"
        final = os.path.join(self.out_dir, *rel.split("/"))
        if os.path.exists(final):
            os.remove(tmp)
        else:
            os.replace(tmp, final)
        self.files[rel] = (digest, os.path.getsize(final))
        return dict({"name": name, "file": rel, "sha256": digest,
                     "x": {"shape": [int(s) for s in x.shape], "dtype": str(x.dtype).replace("torch.", "")},
                     "y": {"shape": [int(s) for s in y.shape], "dtype": str(y.dtype).replace("torch.", "")},
                     "num_classes": int(num_classes), "x_requires_grad": bool(x_requires_grad)}, **extra)


_PARTIAL_MARK = ".thor-sdk-partial-bundle"  # inside a bundle folder still being built (and only there)


def check_bundle_out(out_dir):
    """UsageError unless a new bundle folder can be made at ``out_dir`` (call it before any work): its
    parent folder exists and is writable, and nothing but an empty folder is there. Returns the path
    without trailing separators."""
    out = os.fspath(out_dir).rstrip("/" + os.sep) if os.fspath(out_dir) not in ("/", os.sep) else os.fspath(out_dir)
    if not out or os.path.basename(out) in ("", ".", ".."):
        raise UsageError(f"bundle folder {os.fspath(out_dir)!r} is not a folder name")
    from thor_sdk.store.files import check_parent

    check_parent(out, "bundle")
    if os.path.lexists(out):
        if os.path.islink(out) or not os.path.isdir(out):
            raise UsageError(f"{out} exists and is not a folder; choose another --out")
        if os.listdir(out):
            raise UsageError(f"{out} exists and is not an empty folder; choose another --out")
    return out


def _remove_stale_builds(parent, base):
    """Remove ``.BASE.tmpPID`` folders a killed build left beside the bundle: only folders (never links)
    that still carry our partial-bundle mark and whose process is gone (or is this one)."""
    import re

    from thor_sdk.store.files import pid_alive

    pattern = re.compile(re.escape(f".{base}.tmp") + r"(\d+)")
    for name in os.listdir(parent):
        m = pattern.fullmatch(name)
        path = os.path.join(parent, name)
        if not m or os.path.islink(path) or not os.path.isdir(path) \
                or not os.path.isfile(os.path.join(path, _PARTIAL_MARK)):
            continue
        pid = int(m.group(1))
        if pid == os.getpid() or not pid_alive(pid):
            shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def _building(out_dir, zip_path=None):
    """``with _building(out) as tmp:`` build the bundle in ``tmp`` (a new folder beside ``out``); on success
    it is zipped to ``zip_path`` (if given) and renamed to ``out``; on any error it is removed and ``out``
    is as it was. A build killed outright leaves only a dot-named folder, removed by the next build."""
    from thor_sdk.store.files import check_output

    out = check_bundle_out(out_dir)
    if zip_path:
        check_output(zip_path, "bundle zip")
    parent, base = os.path.dirname(os.path.abspath(out)), os.path.basename(out)
    tmp = os.path.join(parent, f".{base}.tmp{os.getpid()}")
    zipped = False
    try:
        _remove_stale_builds(parent, base)
        os.mkdir(tmp)
        open(os.path.join(tmp, _PARTIAL_MARK), "wb").close()
        yield tmp
        os.unlink(os.path.join(tmp, _PARTIAL_MARK))
        if zip_path:
            zip_bundle(tmp, zip_path)
            zipped = True
        try:
            os.rename(tmp, out)  # over nothing, or over an empty folder; never over anything else
        except OSError:
            if zipped:
                os.unlink(zip_path)
            if os.path.lexists(out):
                raise UsageError(f"{out} appeared while the bundle was built (another thor-sdk bundle?); "
                                 "choose another --out") from None
            raise
    except OSError as e:
        raise StoreError(f"cannot write bundle {out}: {e.strerror or e}") from None
    finally:
        if os.path.lexists(tmp) and not os.path.islink(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


def _settings_dict(settings):
    from thor_sdk.harness.protocol import ProtocolSettings

    if settings is None:
        settings = ProtocolSettings()
    return dict(settings.to_dict() if hasattr(settings, "to_dict") else settings)


def write_bundle(probes, out_dir, *, fmt="onnx", settings=None, metric="time", optimizer="sgd", lr=0.01,
                 progress=None, cache=None, zip_path=None, idle_baseline=None):
    """Export every part of ``probes`` into the new folder ``out_dir`` and write its manifest (and the
    zip ``zip_path``). Built in a temporary folder beside ``out_dir`` and renamed into place at the end.
    ``idle_baseline``: ``{"power_w", "state"}`` an earlier bundle of the campaign measured (energy bundles
    carry it, so the device measures idle again only when its state changed).

    ``progress(done, total, label)`` is called after each part. Returns the manifest.
    """
    _check_format(fmt)
    probes = list(probes)
    if not probes:
        raise UsageError("no probes to bundle")
    if metric not in ("time", "energy"):
        raise UsageError(f"unknown metric {metric!r} (time, energy)")
    with _building(out_dir, zip_path) as tmp:
        writer = _PartWriter(tmp, fmt, optimizer, lr, cache)
        total = sum(len(p.parts()) for p in probes)
        done, entries = 0, []
        for probe in probes:
            parts = []
            for part in probe.parts():
                pm = probe.build(part)
                parts.append(writer.write(part, pm.module, pm.x, pm.y, pm.x_requires_grad, pm.num_classes))
                done += 1
                if progress:
                    progress(done, total, f"{probe.id}/{part}")
            entries.append(dict(probe.to_dict(), parts=parts))
        manifest = _manifest(writer, fmt, settings, metric, optimizer, lr, probes=entries,
                             idle_baseline=idle_baseline if metric == "energy" else None)
        _write_manifest(tmp, manifest)
    return manifest


def _manifest(writer, fmt, settings, metric, optimizer, lr, probes=(), model=None, idle_baseline=None):
    doc = {"format": MANIFEST_FORMAT, "version": VERSION, "id": "", "created_utc": now_utc(), "producer": producer(),
           "model_format": fmt, "runtime": RUNTIME_OF[fmt], "metric": metric, "optimizer": optimizer,
           "lr": float(lr), "loss": "ce", "settings": _settings_dict(settings), "probes": list(probes)}
    if idle_baseline is not None:
        doc["idle_baseline"] = {"power_w": idle_baseline["power_w"], "state": idle_baseline.get("state")}
    if model is not None:
        doc["model"] = model
        doc["parts"] = model["parts"]
        doc["id"] = f"model-{model['name']}-b{model['batch_size']}"
    elif len(probes) == 1:
        doc["parts"] = probes[0]["parts"]
        doc["id"] = probes[0]["id"]
    doc["files"] = [{"path": p, "sha256": s, "bytes": n} for p, (s, n) in sorted(writer.files.items())]
    if not doc["id"]:
        doc["id"] = "bundle-" + hashlib.sha256(json.dumps(doc["files"]).encode()).hexdigest()[:16]
    validate_manifest(doc)
    return doc


def _write_manifest(out_dir, manifest):
    from thor_sdk.store.files import write_text

    write_text(os.path.join(out_dir, MANIFEST), json.dumps(manifest, indent=1, allow_nan=False) + "\n", "manifest")


def write_probe_bundle(probe, out_dir, settings=None, metric="time", runtime="onnxruntime", cache=None):
    """A one-probe bundle (what a remote device runs per probe); returns ``out_dir``."""
    fmt = "torchscript" if runtime == "torchscript" else "onnx"
    write_bundle([probe], out_dir, fmt=fmt, settings=settings, metric=metric, cache=cache)
    return out_dir


def write_model_bundle(model, batch_size, out_dir, settings=None, metric="time", runtime="onnxruntime",
                       optimizer="sgd", lr=0.01, cache=None):
    """A whole-model bundle (one part, ``model``) for a reference network; returns ``out_dir``."""
    from thor_sdk.models import build_model, model_spec

    from .onnx_train import example_batch

    fmt = "torchscript" if runtime == "torchscript" else "onnx"
    spec = model_spec(model)
    with _building(out_dir) as tmp:
        writer = _PartWriter(tmp, fmt, optimizer, lr, cache)
        x, y = example_batch(model, int(batch_size))
        part = writer.write("model", build_model(model), x, y, False, spec.num_classes)
        manifest = _manifest(writer, fmt, settings, metric, optimizer, lr,
                             model={"name": model, "batch_size": int(batch_size), "parts": [part]})
        _write_manifest(tmp, manifest)
    return out_dir


def bundle_campaign(campaign_path, out_dir, *, fmt="onnx", zip_path=None, include_done=False, optimizer="sgd",
                    lr=0.01, progress=None, cache=None):
    """Bundle the probes a campaign still has to measure (all of them with ``include_done``), with the
    campaign's metric and protocol settings, and for energy the idle baseline its last ingested bundle
    measured (``idle_baseline`` in its meta). Returns the manifest."""
    from thor_sdk.store import Campaign
    from thor_sdk.store.files import check_output

    check_bundle_out(out_dir)  # before any work; write_bundle checks again
    if zip_path:
        check_output(zip_path, "bundle zip")
    with Campaign.open(campaign_path) as c:
        meta = c.meta
        probes = c.probes() if include_done else c.probes("planned") + c.probes("failed")
    if not probes:
        raise UsageError(f"{campaign_path} has no planned probes left to measure (use --all to bundle every probe)")
    return write_bundle(probes, out_dir, fmt=fmt, settings=meta.get("protocol"), metric=meta.get("metric", "time"),
                        optimizer=optimizer, lr=lr, progress=progress, cache=cache, zip_path=zip_path,
                        idle_baseline=meta.get("idle_baseline"))


def zip_bundle(bundle_dir, zip_path):
    """Zip a bundle folder (manifest and parts at the archive's top level)."""
    import zipfile

    from thor_sdk.store.files import atomic_output

    manifest = read_manifest(bundle_dir)
    verify_files(bundle_dir, manifest)  # regular files, no links followed, sha256 as listed
    with atomic_output(zip_path, "bundle zip") as tmp:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
            z.write(os.path.join(bundle_dir, MANIFEST), MANIFEST)
            for f in manifest["files"]:
                z.write(os.path.join(bundle_dir, *f["path"].split("/")), f["path"])
    return zip_path


# ---------------------------------------------------------------------------------------------
# reading and verifying
# ---------------------------------------------------------------------------------------------
def validate_manifest(doc, what="bundle manifest"):
    """Schema, path and consistency checks of a manifest; FormatError with the first problem."""
    from thor_sdk.store.files import validate_schema

    if not isinstance(doc, dict):
        raise FormatError(f"{what} is not a JSON object")
    if doc.get("format") == MANIFEST_FORMAT and doc.get("version") not in (None, VERSION):
        raise FormatError(f"{what} is bundle format version {doc.get('version')}; this thor-sdk reads version {VERSION}")
    validate_schema(doc, "manifest.schema.json", what)
    check_finite(doc, what)
    listed = {}
    for f in doc["files"]:
        check_relpath(f["path"], f"{what}: file")
        listed[f["path"]] = f["sha256"]
    entries = [p for probe in doc["probes"] for p in probe["parts"]]
    entries += (doc.get("model") or {}).get("parts", []) + doc.get("parts", [])
    for part in entries:
        check_relpath(part["file"], f"{what}: part file")
        if listed.get(part["file"]) != part["sha256"]:
            raise FormatError(f"{what}: part file {part['file']} is not listed in 'files' with the same sha256")
    ids = [p["id"] for p in doc["probes"]]
    if len(set(ids)) != len(ids):
        raise FormatError(f"{what}: a probe id appears twice")
    for probe in doc["probes"]:
        from thor_sdk.probes import Probe

        try:
            want = Probe(probe["kind"], probe["config"], probe["batch_size"], probe["role"])
        except UsageError as e:
            raise FormatError(f"{what}: probe {probe['id']}: {e}") from None
        if want.id != probe["id"]:
            raise FormatError(f"{what}: probe id {probe['id']} does not match its kind/config/batch size/role")
        names = [p["name"] for p in probe["parts"]]
        if names != want.parts():
            raise FormatError(f"{what}: probe {probe['id']} has parts {names}, expected {want.parts()}")
    return doc


#: the most a bundle zip may unpack to (its members' declared sizes, and what is actually written)
MAX_BUNDLE_BYTES = 4 << 30
#: the most its manifest may hold
MAX_MANIFEST_BYTES = 64 << 20


def _no_links(bundle_dir, relpath, what):
    """FormatError when ``relpath`` inside ``bundle_dir`` is, or passes through, a symbolic link or is
    not a regular file: a bundle's files are read where they are, never through a link."""
    import stat

    path = bundle_dir
    segments = relpath.split("/")
    for i, seg in enumerate(segments):
        path = os.path.join(path, seg)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            raise FormatError(f"{what} {relpath} is missing") from None
        except OSError as e:
            raise FormatError(f"{what} {relpath} cannot be read: {e.strerror}") from None
        if stat.S_ISLNK(st.st_mode):
            raise FormatError(f"{what} {relpath} is or passes through a symbolic link; a bundle holds plain files only")
        last = i == len(segments) - 1
        if (last and not stat.S_ISREG(st.st_mode)) or (not last and not stat.S_ISDIR(st.st_mode)):
            raise FormatError(f"{what} {relpath} is not a regular file")
    return path


def read_manifest(bundle_dir):
    """The validated manifest of a bundle folder (read where it is, never through a link)."""
    from thor_sdk.store.files import read_json

    path = _no_links(bundle_dir, MANIFEST, "bundle file")
    if os.path.getsize(path) > MAX_MANIFEST_BYTES:
        raise FormatError(f"bundle manifest {path} is over {MAX_MANIFEST_BYTES >> 20} MiB")
    return validate_manifest(read_json(path, "bundle manifest"), f"bundle manifest {path}")


def verify_files(bundle_dir, manifest):
    """Every listed file is a regular file (no link followed), of its listed size and sha256 (FormatError
    naming the first that is not)."""
    for f in manifest["files"]:
        path = _no_links(bundle_dir, check_relpath(f["path"]), "bundle file")
        if os.path.getsize(path) != f["bytes"] or sha256_file(path) != f["sha256"]:
            raise FormatError(f"bundle file {f['path']} fails its size or sha256 check (tampered or corrupted "
                              "in transfer)")


def _zip_members(z, path):
    """{name: ZipInfo} of a bundle zip's files, every name a plain relative path, no links or special files."""
    import stat

    members = {}
    for info in z.infolist():
        name = info.filename[:-1] if info.is_dir() else info.filename
        check_relpath(name, f"zip member of {path}")
        mode = info.external_attr >> 16
        if info.is_dir():
            continue
        if info.create_system == 3 and stat.S_IFMT(mode) not in (0, stat.S_IFREG):  # unix: links, devices, fifos
            raise FormatError(f"zip member {name} of {path} is a symbolic link or special file; a bundle holds "
                              "plain files only")
        if info.flag_bits & 0x1:
            raise FormatError(f"zip member {name} of {path} is encrypted")
        if name in members:
            raise FormatError(f"zip member {name} appears twice in {path}")
        members[name] = info
    return members


def _extract_member(z, info, dest, limit_bytes, path):
    """Write one member to ``dest``, refusing more than ``limit_bytes`` whatever its header says."""
    import zipfile
    import zlib

    written = 0
    try:
        with z.open(info) as src, open(dest, "xb") as out:
            while True:
                block = src.read(min(1 << 20, limit_bytes - written + 1))
                if not block:
                    break
                written += len(block)
                if written > limit_bytes:
                    raise FormatError(f"zip member {info.filename} of {path} unpacks to more than its "
                                      f"{limit_bytes} bytes")
                out.write(block)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise FormatError(f"zip member {info.filename} of {path} is corrupt: {msg}") from None
    return written


def _unzip_bundle(path, tmp):
    """Unpack a bundle zip into ``tmp`` after checking every member against its manifest: no unlisted
    member, no link or special file, declared sizes within the manifest's and the size budget, and the
    same enforced while unpacking (headers can lie)."""
    import zipfile
    import zlib

    try:
        with zipfile.ZipFile(path) as z:
            members = _zip_members(z, path)
            if MANIFEST not in members:
                raise NotOurFileError(f"{path} holds no {MANIFEST}: not a thor-sdk bundle")
            _extract_member(z, members[MANIFEST], os.path.join(tmp, MANIFEST), MAX_MANIFEST_BYTES, path)
            manifest = read_manifest(tmp)
            listed = {f["path"]: f["bytes"] for f in manifest["files"]}
            unlisted = sorted(set(members) - set(listed) - {MANIFEST})
            if unlisted:
                raise FormatError(f"{path} holds {len(unlisted)} file(s) its manifest does not list, e.g. "
                                  f"{unlisted[0]}")
            missing = sorted(set(listed) - set(members))
            if missing:
                raise FormatError(f"bundle file {missing[0]} is missing from {path}")
            for name, n in listed.items():
                if members[name].file_size != n:
                    raise FormatError(f"zip member {name} of {path} is {members[name].file_size} bytes; its "
                                      f"manifest says {n}")
            total = sum(listed.values())
            if total > MAX_BUNDLE_BYTES:
                raise FormatError(f"{path} unpacks to {total} bytes, over the {MAX_BUNDLE_BYTES >> 30} GiB a "
                                  "bundle may hold")
            free = shutil.disk_usage(tmp).free
            if total > free:
                raise FormatError(f"{path} unpacks to {total} bytes but only {free} are free in {tmp}")
            for name, n in sorted(listed.items()):
                dest = os.path.join(tmp, *name.split("/"))
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                _extract_member(z, members[name], dest, n, path)
    except (zipfile.BadZipFile, zlib.error, EOFError) as e:
        raise FormatError(f"{path} is not a readable zip: {str(e).strip() or type(e).__name__}") from None
    except OSError as e:
        raise StoreError(f"cannot unpack bundle {path} into {tmp}: {e.strerror or e}") from None
    return manifest


@contextlib.contextmanager
def open_bundle(path):
    """``(bundle_dir, manifest)`` of a bundle folder or zip, with every file's size and sha256 verified
    (a zip's members checked against its manifest and a size budget before anything is unpacked)."""
    if not os.path.exists(path):
        raise NotFoundError(f"no such bundle: {path}")
    if os.path.isdir(path):
        manifest = read_manifest(path)
        verify_files(path, manifest)
        yield path, manifest
        return
    import zipfile

    if not zipfile.is_zipfile(path):
        raise FormatError(f"{path} is neither a bundle folder nor a zip")
    with tempfile.TemporaryDirectory(prefix="thor-bundle-") as tmp:
        manifest = _unzip_bundle(path, tmp)
        verify_files(tmp, manifest)
        yield tmp, manifest


def manifest_units(manifest):
    """[(unit id, probe dict or None, [part entries])]: the probes, or the whole model."""
    if manifest.get("model"):
        return [(manifest["id"], None, manifest["model"]["parts"])]
    return [(p["id"], p, p["parts"]) for p in manifest["probes"]]


def check_finite(obj, what, where=""):
    """FormatError naming the first NaN or infinity anywhere in ``obj`` (a document built in memory)."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return
    if isinstance(obj, (int, float)):
        if not math.isfinite(obj):
            raise FormatError(f"{what}: {where or 'a value'} is {obj} (NaN and infinity are not allowed)")
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            check_finite(v, what, f"{where}/{k}" if where else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            check_finite(v, what, f"{where}/{i}")

