"""Probe bundles: campaign -> bundle -> host harness -> results -> campaign, and everything a bundle or a
results file can get wrong (tampered files, NaN, negative durations, unknown probes, path tricks)
refused with one line and the campaign untouched."""

import copy
import json
import os
import shutil
import zipfile

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from thor_sdk.errors import FormatError, NoMeterError, StoreError  # noqa: E402
from thor_sdk.campaign import ingest as I  # noqa: E402
from thor_sdk.devices import local_harness as H  # noqa: E402
from thor_sdk.exporters import bundle as B  # noqa: E402
from thor_sdk.harness import bundle_runner as R  # noqa: E402
from thor_sdk.harness import results as RS  # noqa: E402
from thor_sdk.harness.protocol import ProtocolSettings  # noqa: E402
from thor_sdk.probes import Probe  # noqa: E402
from thor_sdk.store import Campaign  # noqa: E402

FAST = ProtocolSettings(warmup_steps=1, min_window_s=0.002, min_rounds=3, max_rounds=3, measure_idle=False)
PROBES = [
    Probe("conv2d", dict(in_channels=3, out_channels=4, kernel=3, stride=1, padding=1, groups=1, height=8, width=8,
                         bias=1), 2, "input"),
    Probe("relu", dict(numel=64), 2, "hidden"),
    Probe("output", dict(in_features=16, out_features=10, tokens=1), 2),
]


def make_campaign(path, probes=PROBES, metric="time"):
    c = Campaign.create(str(path), {"metric": metric, "protocol": FAST.to_dict(), "device": {"name": "test"}})
    for p in probes:
        c.plan(p)
    c.close()
    return str(path)


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("bundle-cache"))


@pytest.fixture(scope="session")
def measured(tmp_path_factory, cache):
    """A campaign, its bundle (+ zip), and results of running the zip with the host harness."""
    d = tmp_path_factory.mktemp("roundtrip")
    db = make_campaign(d / "c.db")
    manifest = B.bundle_campaign(db, str(d / "bundle"), zip_path=str(d / "bundle.zip"), cache=cache)
    results = H.run_harness(str(d / "bundle.zip"), str(d / "results.json"))
    return {"dir": d, "db": db, "bundle": str(d / "bundle"), "zip": str(d / "bundle.zip"), "manifest": manifest,
            "results": results}


def fresh_campaign(measured, tmp_path):
    db = str(tmp_path / "c.db")
    shutil.copyfile(measured["db"], db)
    return db


def untouched(db):
    with Campaign.open(db) as c:
        n_windows = c.conn.execute("SELECT COUNT(*) FROM windows").fetchone()[0]
        return n_windows == 0 and c.samples() == [] and c.status_counts() == {"planned": len(PROBES)}


def test_round_trip_stores_samples_for_every_probe(measured, tmp_path):
    db = fresh_campaign(measured, tmp_path)
    r = I.ingest_file(str(measured["dir"] / "results.json"), measured["bundle"], db)
    assert sorted(r["probes"]) == sorted(p.id for p in PROBES)
    with Campaign.open(db) as c:
        assert c.status_counts() == {"done": len(PROBES)}
        samples = c.samples("time")
        assert sorted(s["probe_id"] for s in samples) == sorted(p.id for p in PROBES)
        assert all(s["n"] == 3 for s in samples)
        # two parts per probe (one for the output head), three rounds each
        assert r["windows"] == 3 * sum(len(p.parts()) for p in PROBES)
        heads = [w for w in c.windows(PROBES[0].id) if w[0] == "head"]
        part = measured["results"]["probes"][PROBES[0].id]["parts"]["head"]
        assert [w[2] for w in heads] == part["time_s"]


def test_ingesting_the_same_file_twice_is_a_no_op_that_says_so(measured, tmp_path):
    db = fresh_campaign(measured, tmp_path)
    I.ingest_file(str(measured["dir"] / "results.json"), measured["bundle"], db)
    with Campaign.open(db) as c:
        before = (c.samples(), [c.windows(p.id) for p in PROBES])
    again = I.ingest_file(str(measured["dir"] / "results.json"), measured["bundle"], db)
    assert again["probes"] == [] and "already measured" in again["message"]
    with Campaign.open(db) as c:
        assert (c.samples(), [c.windows(p.id) for p in PROBES]) == before


def test_a_failing_ingest_leaves_the_campaign_as_it_was_and_a_rerun_completes(measured, tmp_path):
    db = fresh_campaign(measured, tmp_path)
    last = PROBES[-1].id
    with Campaign.open(db) as c, c.conn:  # the LAST probe's samples cannot be stored (a disk error, say)
        c.conn.execute(f"CREATE TRIGGER fail BEFORE INSERT ON samples WHEN NEW.probe_id = '{last}' "
                       "BEGIN SELECT RAISE(ABORT, 'injected failure'); END")
    with pytest.raises(StoreError, match="injected failure"):
        I.ingest_file(str(measured["dir"] / "results.json"), measured["bundle"], db)
    assert untouched(db)  # nothing stayed: no window, no sample, every probe still planned
    with Campaign.open(db) as c, c.conn:
        c.conn.execute("DROP TRIGGER fail")
    r = I.ingest_file(str(measured["dir"] / "results.json"), measured["bundle"], db)
    assert sorted(r["probes"]) == sorted(p.id for p in PROBES)


def test_one_writer_per_campaign(measured, tmp_path):
    db = fresh_campaign(measured, tmp_path)
    with Campaign.open(db, writer=True):
        with pytest.raises(StoreError, match="being written by another"):
            I.ingest_file(str(measured["dir"] / "results.json"), measured["bundle"], db)
        with Campaign.open(db) as reader:  # readers need no lock
            assert reader.status_counts()
    I.ingest_file(str(measured["dir"] / "results.json"), measured["bundle"], db)  # the lock went with close()


def test_manifest_describes_every_probe_and_file(measured):
    m = B.read_manifest(measured["bundle"])
    assert m["format"] == "thor-sdk/bundle" and m["version"] == 1 and m["model_format"] == "onnx"
    assert m["settings"]["warmup_steps"] == 1 and m["settings"]["min_window_s"] == 0.002
    assert m["settings"]["min_rounds"] == 3 and m["settings"]["max_rounds"] == 3 and "cv_target" in m["settings"]
    assert [p["id"] for p in m["probes"]] == [p.id for p in PROBES] and "parts" not in m
    for probe, entry in zip(PROBES, m["probes"]):
        assert entry["kind"] == probe.kind and entry["role"] == probe.role and entry["config"] == probe.config
        assert [p["name"] for p in entry["parts"]] == probe.parts()
        for part in entry["parts"]:
            path = os.path.join(measured["bundle"], part["file"])
            assert B.sha256_file(path) == part["sha256"]
            assert part["x"]["shape"][0] == probe.batch_size and part["y"]["dtype"] == "int64"
    hidden = m["probes"][1]["parts"][1]
    assert hidden["x_requires_grad"] is True and "x_grad" in hidden["outputs"]
    assert {f["path"] for f in m["files"]} == {p["file"] for e in m["probes"] for p in e["parts"]}


def test_results_document_follows_its_schema(measured):
    doc = measured["results"]
    RS.validate_results_doc(doc)
    assert doc["bundle"] == measured["manifest"]["id"] and doc["metric"] == "time"
    part = doc["probes"][PROBES[1].id]["parts"]["hidden"]
    assert len(part["time_s"]) == 3 and part["steps_per_window"] >= 1
    assert len(part["states"]) == 3 and len(part["window_times_s"]) == 3
    assert doc["device"]["name"] == "host"


# -- refusals ---------------------------------------------------------------------------------------
def run_cli(argv, capsys):
    from thor_sdk.cli.main import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code, capsys.readouterr()


def test_tampered_bundle_file_is_refused_with_one_line(measured, tmp_path, capsys):
    bad = tmp_path / "bundle"
    shutil.copytree(measured["bundle"], bad)
    victim = bad / measured["manifest"]["probes"][1]["parts"][1]["file"]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x01
    victim.write_bytes(bytes(data))
    code, out = run_cli(["harness", "run", str(bad), "--out", str(tmp_path / "r.json"), "--quiet"], capsys)
    assert code != 0 and not (tmp_path / "r.json").exists()
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "sha256" in lines[0]


def malformed(doc, case, probe_id):
    d = copy.deepcopy(doc)
    part = d["probes"][probe_id]["parts"]["head"]
    if case == "nan":
        part["time_s"][1] = float("nan")
    elif case == "negative duration":
        part["time_s"][0] = -0.001
    elif case == "unknown probe":
        d["probes"]["conv2d-input-b2-000000000000"] = d["probes"].pop(probe_id)
    elif case == "missing field":
        del part["steps_per_window"]
    elif case == "path trick":
        d["files"] = [{"path": "../../etc/passwd"}]
    elif case == "absolute path":
        d["files"] = [{"path": "/etc/passwd"}]
    elif case == "other bundle":
        d["bundle"] = "bundle-ffffffffffffffff"
    elif case == "rounds differ":
        part["time_s"] = part["time_s"][:2]
    elif case == "string number":
        part["time_s"][0] = "0.1"
    elif case == "missing part":
        del d["probes"][probe_id]["parts"]["head"]
    elif case == "energy for time":
        d["metric"] = "energy"
    return d


CASES = ["nan", "negative duration", "unknown probe", "missing field", "path trick", "absolute path",
         "other bundle", "rounds differ", "string number", "missing part", "energy for time"]


@pytest.mark.parametrize("case", CASES)
def test_malformed_results_are_refused_and_the_campaign_untouched(measured, tmp_path, case):
    db = fresh_campaign(measured, tmp_path)
    # the second probe: a non-atomic ingest would already have written the first
    doc = malformed(measured["results"], case, PROBES[1].id)
    with Campaign.open(db) as c, pytest.raises(FormatError) as e:
        I.ingest_results(c, doc, measured["manifest"])
    assert "\n" not in str(e.value)
    assert untouched(db)


def test_malformed_results_file_via_cli_is_one_line(measured, tmp_path, capsys):
    db = fresh_campaign(measured, tmp_path)
    doc = malformed(measured["results"], "negative duration", PROBES[0].id)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    code, out = run_cli(["harness", "ingest", str(bad), "--bundle", measured["bundle"], "--campaign", db], capsys)
    lines = out.err.strip().splitlines()
    assert code != 0 and len(lines) == 1 and lines[0].startswith("Error: ")
    assert untouched(db)
    (tmp_path / "nan.json").write_text('{"format": "thor-sdk/results", "version": 1, "metric": "time", '
                                       '"parts": {"head": {"steps_per_window": 1, "time_s": [NaN]}}}')
    code, out = run_cli(["harness", "ingest", str(tmp_path / "nan.json"), "--bundle", measured["bundle"],
                         "--campaign", db], capsys)
    assert code != 0 and len(out.err.strip().splitlines()) == 1 and "NaN" in out.err
    assert untouched(db)


def test_manifest_path_tricks_are_refused(measured, tmp_path):
    bad = tmp_path / "bundle"
    shutil.copytree(measured["bundle"], bad)
    m = json.loads((bad / "manifest.json").read_text())
    m["files"][0]["path"] = "../outside.onnx"
    (bad / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(FormatError):
        B.read_manifest(str(bad))


def test_zip_member_leaving_the_bundle_is_refused(measured, tmp_path):
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(evil, "w") as z:
        z.write(os.path.join(measured["bundle"], "manifest.json"), "manifest.json")
        z.writestr("../evil.txt", "x")
    with pytest.raises(FormatError, match="relative path"):
        with B.open_bundle(str(evil)):
            pass
    assert not (tmp_path.parent / "evil.txt").exists()


# -- other bundle kinds -------------------------------------------------------------------------------
def test_one_probe_bundle_with_phone_layout_results(tmp_path, cache):
    """What a remote device does: one probe per bundle; the phone apps write top-level parts with windows."""
    probe = PROBES[1]
    out = B.write_probe_bundle(probe, str(tmp_path / "b"), settings=FAST, cache=cache)
    m = B.read_manifest(out)
    assert m["id"] == probe.id and [p["name"] for p in m["parts"]] == ["head", "hidden"]
    phone = {"format": "thor-sdk/results", "version": 1, "harness": "android", "bundle": probe.id, "metric": "time",
             "device": {"model": "Pixel"},
             "parts": {p: {"steps_per_window": 10, "time_s": [0.002, 0.0021, 0.002], "energy_j": [],
                           "net_energy_j": [], "idle_power_w": None,
                           "windows": [{"t_start_s": 1.0 + i, "t_end_s": 1.5 + i, "state": {"battery_pct": 80}}
                                       for i in range(3)], "outliers": {}}
                       for p in ("head", "hidden")}}
    phone["parts"]["hidden"]["time_s"] = [0.003, 0.0031, 0.003]
    (tmp_path / "r.json").write_text(json.dumps(phone))
    parts = RS.read_probe_parts(str(tmp_path / "r.json"), out)
    assert parts["hidden"].window_times_s == [(1.0, 1.5), (2.0, 2.5), (3.0, 3.5)]
    assert parts["hidden"].states[0] == {"battery_pct": 80}
    db = make_campaign(tmp_path / "c.db", [probe])
    with Campaign.open(db) as c:
        I.ingest_results(c, phone, m)
        (s,) = c.samples("time")
    assert s["value"] == pytest.approx(0.001)


def test_torchscript_bundle_runs_in_the_harness(tmp_path):
    out = B.write_bundle([PROBES[2]], str(tmp_path / "b"), fmt="torchscript", settings=FAST)
    assert out["model_format"] == "torchscript" and out["parts"][0]["file"].endswith(".pt")
    doc = R.run_bundle(str(tmp_path / "b"))
    assert doc["parts"]["head"]["steps_per_window"] >= 1 and len(doc["parts"]["head"]["time_s"]) == 3


def test_a_bundle_is_measured_with_denormals_flushed_and_the_thread_given_back(tmp_path):
    """The reference harness measures as the host device does (a probe's fixed batch drifting into denormals is
    an artefact, 30-100x slower on x86), for ONNX and TorchScript bundles alike, and leaves the thread as it
    found it (onnxruntime's first session would have flushed it for the rest of the process)."""
    from thor_sdk.harness.denormals import denormals_flushed

    for fmt in ("onnx", "torchscript"):
        B.write_bundle([PROBES[2]], str(tmp_path / fmt), fmt=fmt, settings=FAST)
        seen = []
        assert not denormals_flushed()
        R.run_bundle(str(tmp_path / fmt), state_fn=lambda: seen.append(denormals_flushed()) or {})
        assert seen and all(seen), fmt
        assert not denormals_flushed(), fmt


def test_model_bundle_runs_in_the_harness(tmp_path, cache):
    out = B.write_model_bundle("har", 2, str(tmp_path / "b"), settings=FAST, cache=cache)
    doc = R.run_bundle(out)
    RS.write_results(doc, str(tmp_path / "r.json"))
    parts = RS.read_probe_parts(str(tmp_path / "r.json"), out)
    assert list(parts) == ["model"] and len(parts["model"].time_s) == 3


def test_energy_bundle_without_a_meter_is_refused(tmp_path, cache):
    db = make_campaign(tmp_path / "c.db", [PROBES[2]], metric="energy")
    B.bundle_campaign(db, str(tmp_path / "b"), cache=cache)
    with pytest.raises(NoMeterError):
        H.run_harness(str(tmp_path / "b"), str(tmp_path / "r.json"), root=str(tmp_path / "no-sysfs"))


def test_bundle_cli(measured, tmp_path, capsys):
    code, out = run_cli(["bundle", "--campaign", measured["db"], "--out", str(tmp_path / "b"), "--zip", "--json"],
                        capsys)
    assert code == 0
    r = json.loads(out.out)
    assert r["probes"] == len(PROBES) and r["zip"] == str(tmp_path / "b") + ".zip"
    assert zipfile.is_zipfile(r["zip"])
    code, out = run_cli(["bundle", "--campaign", measured["db"], "--out", str(tmp_path / "b")], capsys)
    assert code != 0 and "not an empty folder" in out.err


def test_harness_cli_runs_a_zip_and_ingests(measured, tmp_path, capsys):
    out = tmp_path / "r.json"
    code, res = run_cli(["harness", "run", measured["zip"], "--out", str(out), "--quiet", "--json"], capsys)
    assert code == 0 and json.loads(res.out)["probes"] == len(PROBES)
    db = fresh_campaign(measured, tmp_path)
    code, res = run_cli(["harness", "ingest", str(out), "--bundle", measured["zip"], "--campaign", db, "--json"],
                        capsys)
    assert code == 0 and len(json.loads(res.out)["probes"]) == len(PROBES)
    with Campaign.open(db) as c:
        assert c.status_counts() == {"done": len(PROBES)}


# -- untrusted archives and folders, bundles built whole or not at all -------------------------------------
def _rezip(measured, path, extra=(), skip=(), compression=zipfile.ZIP_DEFLATED):
    """The measured bundle as a zip, members in ``skip`` left out, ``extra`` (ZipInfo or name, bytes) added."""
    m = measured["manifest"]
    with zipfile.ZipFile(path, "w", compression=compression) as z:
        for name in ["manifest.json"] + [f["path"] for f in m["files"]]:
            if name not in skip:
                z.write(os.path.join(measured["bundle"], *name.split("/")), name)
        for info, data in extra:
            z.writestr(info, data)
    return str(path)


def _refused(path, match):
    with pytest.raises(FormatError, match=match) as e:
        with B.open_bundle(path):
            pass
    assert "\n" not in str(e.value)


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_zip_members_are_checked_against_the_manifest_before_anything_is_unpacked(measured, tmp_path):
    import stat

    big = zipfile.ZipInfo("parts/extra.bin")  # 64 MiB of zeros: 64 KB zipped, never unpacked
    _refused(_rezip(measured, tmp_path / "unlisted.zip", [(big, b"\0" * (64 << 20))]), "does not list")
    link = zipfile.ZipInfo(measured["manifest"]["files"][0]["path"])
    link.create_system, link.external_attr = 3, (stat.S_IFLNK | 0o777) << 16
    first = measured["manifest"]["files"][0]["path"]
    _refused(_rezip(measured, tmp_path / "link.zip", [(link, "/etc/passwd")], skip=[first]), "symbolic link")
    _refused(_rezip(measured, tmp_path / "missing.zip", skip=[first]), "missing")
    # a listed member whose header declares another size than the manifest's
    _refused(_rezip(measured, tmp_path / "size.zip", [(first, b"x" * 10)], skip=[first]), "manifest says")
    _refused(_rezip(measured, tmp_path / "dup.zip", [("manifest.json", b"{}")]), "twice")


def test_a_corrupt_zip_member_is_one_format_error(measured, tmp_path, capsys):
    path = tmp_path / "corrupt.zip"
    _rezip(measured, path)
    with zipfile.ZipFile(path) as z:  # the largest part: its compressed bytes are garbled mid-stream
        info = max(z.infolist(), key=lambda i: i.compress_size)
    data = bytearray(path.read_bytes())
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    for i in range(start + info.compress_size // 3, start + info.compress_size // 3 + 64):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    _refused(str(path), "corrupt")
    code, out = run_cli(["harness", "run", str(path), "--out", str(tmp_path / "r.json"), "--quiet"], capsys)
    lines = out.err.strip().splitlines()
    assert code != 0 and len(lines) == 1 and lines[0].startswith("Error: ") and "corrupt" in lines[0]
    assert not (tmp_path / "r.json").exists()


def test_symbolic_links_inside_a_bundle_folder_are_never_followed(measured, tmp_path):
    part = measured["manifest"]["files"][0]["path"]
    linked_file = tmp_path / "file-link"
    shutil.copytree(measured["bundle"], linked_file)
    os.replace(linked_file / part, tmp_path / "elsewhere.onnx")  # same bytes, same sha256: reached by a link
    os.symlink(tmp_path / "elsewhere.onnx", linked_file / part)
    linked_dir = tmp_path / "dir-link"
    shutil.copytree(measured["bundle"], linked_dir)
    os.rename(linked_dir / "parts", tmp_path / "parts-elsewhere")
    os.symlink(tmp_path / "parts-elsewhere", linked_dir / "parts")
    linked_manifest = tmp_path / "manifest-link"
    shutil.copytree(measured["bundle"], linked_manifest)
    os.rename(linked_manifest / "manifest.json", tmp_path / "manifest-elsewhere.json")
    os.symlink(tmp_path / "manifest-elsewhere.json", linked_manifest / "manifest.json")
    for bundle in (linked_file, linked_dir, linked_manifest):
        _refused(str(bundle), "symbolic link")


def test_a_bundle_is_built_beside_its_folder_and_a_killed_build_never_blocks_the_rerun(measured, tmp_path, cache):
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    stale = tmp_path / f".b.tmp{dead}"  # what a build killed by kill -9 leaves: marked as ours, its process gone
    (stale / "parts").mkdir(parents=True)
    (stale / ".thor-sdk-partial-bundle").write_bytes(b"")
    theirs = tmp_path / f".b.tmp{int(dead) + 1}"  # the same pattern, not ours (no mark): never touched
    theirs.mkdir()
    db = fresh_campaign(measured, tmp_path)
    seen = []
    B.bundle_campaign(db, str(tmp_path / "b"), cache=cache, zip_path=str(tmp_path / "b.zip"),
                      progress=lambda done, total, label: seen.append(sorted(os.listdir(tmp_path))))
    assert "b" not in seen[0] and "b.zip" not in seen[-1]  # nothing at --out until the whole bundle is there
    assert sorted(os.listdir(tmp_path)) == sorted(["b", "b.zip", "c.db", theirs.name])
    assert ".thor-sdk-partial-bundle" not in os.listdir(tmp_path / "b")
    with B.open_bundle(str(tmp_path / "b.zip")) as (_d, m):
        assert m["id"] == measured["manifest"]["id"]
    # a build that fails part-way (a probe that cannot be built) leaves nothing behind
    (tmp_path / "empty").mkdir()
    with pytest.raises(RuntimeError):
        B.write_bundle(PROBES, str(tmp_path / "empty"), settings=FAST, cache=cache,
                       progress=lambda *a: (_ for _ in ()).throw(RuntimeError("killed mid-build")))
    assert os.listdir(tmp_path / "empty") == [] and not [f for f in os.listdir(tmp_path) if ".empty.tmp" in f]


def _cli(*args, limit_bytes=None, env=None):
    """The console script in a subprocess; ``limit_bytes``: no file it writes may grow past this (a full
    disk: RLIMIT_FSIZE, with SIGXFSZ ignored so a write past it fails with EFBIG instead of killing it)."""
    import resource
    import signal
    import subprocess

    def full_disk():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.run(["thor-sdk", *map(str, args)], capture_output=True, text=True, timeout=300,
                          preexec_fn=full_disk if limit_bytes is not None else None, env=env)


def _one_line_error(p, text=""):
    lines = p.stderr.strip().splitlines()
    assert p.returncode != 0 and len(lines) == 1 and lines[0].startswith("Error: "), p.stderr
    assert "Traceback" not in p.stderr and text in lines[0], p.stderr


def test_a_full_disk_while_bundling_is_one_error_and_leaves_nothing(measured, tmp_path, cache):
    root = tmp_path / "cache-root"  # the exports are cached already (the session's bundle): only the bundle is written
    root.mkdir()
    os.symlink(cache, root / "onnx")
    out = tmp_path / "out"
    out.mkdir()
    db = fresh_campaign(measured, tmp_path)
    env = dict(os.environ, THOR_SDK_CACHE=str(root))
    p = _cli("bundle", "--campaign", db, "--out", out / "b", "--zip", "--quiet", limit_bytes=4096, env=env)
    _one_line_error(p, "cannot write bundle")
    assert os.listdir(out) == []  # no bundle folder, no zip, no temporary folder or file
    p = _cli("bundle", "--campaign", db, "--out", out / "b", "--zip", "--quiet", env=env)  # the rerun: not blocked
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(out)) == ["b", "b.zip"]


def test_a_killed_ingest_leaves_the_campaign_as_it_was_and_the_rerun_completes(measured, tmp_path):
    import signal
    import sqlite3
    import subprocess
    import time

    db = fresh_campaign(measured, tmp_path)
    results = str(measured["dir"] / "results.json")
    reader = sqlite3.connect(db, isolation_level=None)
    reader.execute("BEGIN")  # a reader's shared lock: the ingest can write its transaction but not commit it
    reader.execute("SELECT COUNT(*) FROM probes").fetchall()
    proc = subprocess.Popen(["thor-sdk", "harness", "ingest", results, "--bundle", measured["bundle"],
                             "--campaign", db], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 120
        journal = db + "-journal"
        while not (os.path.exists(journal) and os.path.getsize(journal)) and proc.poll() is None \
                and time.time() < deadline:
            time.sleep(0.005)
        assert proc.poll() is None, proc.stderr.read().decode()  # mid-ingest: its rows written, not committed
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert os.path.getsize(db + "-journal") > 0  # killed inside its transaction: a hot journal is left
    finally:
        proc.kill() if proc.poll() is None else None
        reader.execute("COMMIT")
        reader.close()
    assert proc.returncode == -signal.SIGKILL
    assert untouched(db)  # no window, no sample, every probe still planned (the hot journal rolled back)
    r = I.ingest_file(results, measured["bundle"], db)
    assert sorted(r["probes"]) == sorted(p.id for p in PROBES)
    with Campaign.open(db) as c:
        assert c.status_counts() == {"done": len(PROBES)}
