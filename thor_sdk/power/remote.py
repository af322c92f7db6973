"""Power-aware profiling and training on a remote Jetson: ``--device jetson://user@host[:port]``.

The board has thor-sdk installed (as for probes, ``thor_sdk.devices.jetson``). ``profile_remote`` and
``train_remote`` run the same thor-sdk command ON the board through a transport (ssh for a
``jetson://`` target; any ``Transport`` in tests), with ``--device jetson`` there:

1. a fresh run folder ``power-<random>`` in the transport's work folder (``transport.workdir()``);
2. ``--resume``: the local profile database is pushed into it first, so the board continues it;
   ``train --table``: the local table is pushed; ``--data`` naming a local folder: the folder is pushed;
3. ``[sudo -n] thor-sdk table profile|train --device jetson ... --out RUN/FILE --json --quiet`` as an
   argument list (the transport quotes each argument for the remote shell);
4. its ``--json`` result is parsed; the file it wrote is pulled through ``transport.pull`` into a
   temporary file beside ``--out`` and moved into place only once complete and readable (a failed
   pull never damages an existing profile); the path the board reports must lie inside the run
   folder (``validate_device_path``: no ``..``, no absolute path of its own);
5. the run folder on the board is removed.

Frequency control needs root on the board: ``sudo=True`` prefixes ``sudo -n`` (never a password
prompt). The command runs through the one remote runner (``thor_sdk.devices.remote.RemoteCommand``, also
the probe harness's): failures become one-line errors: ``RemoteSudoError`` (sudo wants a password, or the user
may not use it), ``RemoteThorSdkMissing`` (exit 127 / ``command not found``), ``RemoteCommandError``
(the board's thor-sdk failed: its own ``Error: ...`` line and exit status). When a remote profile
fails part way, the rows it committed are pulled back into ``--out`` so ``--resume`` continues them.
If the connection drops, the run folder is left on the board and the error names it (the command
may still be running there; it restores the frequencies when it ends).

The board's progress is not streamed: the transport returns a command's output when it ends, so the
lines the board printed on stderr are relayed (``log``) after it finished, and its ``--json`` result
is shown like a local run's.
"""

import json
import os
import posixpath
import secrets
import tempfile

from thor_sdk.devices.remote import RemoteCommand
from thor_sdk.errors import DeviceError, FormatError, NotFoundError, RemoteCommandError, ThorError, UsageError
from thor_sdk.transports.base import TransportDisconnected, validate_device_path


class BoardCommand(RemoteCommand):
    """The one remote runner (``thor_sdk.devices.remote.RemoteCommand``) with what a power run adds: the
    board's ``--device jetson [--sysfs-root]``, its ``--json`` result, and a run folder on the board."""

    def __init__(self, transport, command=("thor-sdk",), sudo=False, sysfs_root=None, timeout_s=None, log=None):
        super().__init__(transport, command, sudo=sudo, timeout_s=timeout_s, log=log, what="thor-sdk",
                         path_option="--remote-command")
        self.sysfs_root = sysfs_root

    def device_args(self):
        """``--device jetson`` (and ``--sysfs-root`` on the board when one was given)."""
        return ["--device", "jetson"] + (["--sysfs-root", self.sysfs_root] if self.sysfs_root else [])

    def run_json(self, args):
        """Run; relay the board's stderr lines; return its ``--json`` result (raises the mapped errors)."""
        res = self.run(args)
        try:
            return json.loads(res.stdout)
        except ValueError:
            last = (res.stdout.strip().splitlines() or ["no output"])[-1][:200]
            raise FormatError(f"thor-sdk on {self.where} printed no JSON result (is it the same thor-sdk version "
                              f"as here?): {last}") from None

    # -- the run folder ----------------------------------------------------------------------------
    def make_run_dir(self):
        d = posixpath.join(self.transport.workdir(), "power-" + secrets.token_hex(6))
        self.transport.run(["mkdir", "-p", d], timeout_s=60)
        return d

    def remove_run_dir(self, run_dir):
        """``rm -rf`` the run folder; a failure is logged (never hides the run's own outcome)."""
        try:
            res = self.transport.run(["rm", "-rf", run_dir], timeout_s=60, check=False)
        except DeviceError as e:
            self.log(f"could not remove {run_dir} on {self.where}: {e}")
            return False
        if res.returncode != 0:
            self.log(f"could not remove {run_dir} on {self.where}: {(res.stderr.strip() or 'no output')[-200:]}")
        return res.returncode == 0


def inside_run_dir(run_dir, reported):
    """The device path ``reported`` by the board, checked to lie inside ``run_dir`` (no ``..``)."""
    base = run_dir.rstrip("/") + "/"
    if not isinstance(reported, str) or not reported.startswith(base):
        raise FormatError(f"the board reported its output at {reported!r}, outside the run folder {run_dir}")
    return posixpath.join(run_dir, validate_device_path(reported[len(base):]))


def _pull_into(transport, remote_path, local_path, check=None):
    """Pull into a temporary folder beside ``local_path``, ``check(file)`` it, then move it into place."""
    import shutil

    folder = os.path.dirname(os.path.abspath(local_path))
    os.makedirs(folder, exist_ok=True)
    tmpdir = tempfile.mkdtemp(prefix=".thor-pull-", dir=folder)
    try:
        tmp = os.path.join(tmpdir, "pulled")
        transport.pull(remote_path, tmp)
        if not os.path.isfile(tmp) or os.path.islink(tmp):
            raise FormatError(f"the board sent a folder or a link, not a file, for {remote_path}")
        if check is not None:
            check(tmp)
        os.replace(tmp, local_path)
    finally:
        shutil.rmtree(tmpdir)


def _check_profile(path):
    from .profile import load_profile

    load_profile(path)


def _check_partial_profile(path):
    from .profile import load_profile

    if not load_profile(path)[1]:
        raise FormatError("the board's profile holds no rows yet")


def _disconnected(bc, run_dir, e, what):
    return TransportDisconnected(
        f"{e}; the {what} may still be running on {bc.where}: its folder {run_dir} was left there (it restores "
        "the GPU frequencies when it ends; after a hard kill, `thor-sdk table profile --device jetson://... "
        "--reset-frequency`)")


def profile_remote(transport, model, batch_sizes, out, power_cap_w=None, n_steps=5, resume=False,
                   command=("thor-sdk",), sudo=False, sysfs_root=None, timeout_s=None, log=None):
    """``thor-sdk table profile`` on the board; the profile database is pulled to ``out``.

    Returns the board's ``--json`` result with ``out`` set to the local path, plus ``board`` (where it
    ran) and ``remote_out`` (the path on the board, removed afterwards).
    """
    if os.path.exists(out) and not resume:
        raise UsageError(f"{out} exists; give --resume to continue it or another --out")
    if os.path.isdir(out):
        raise UsageError(f"{out} is a folder; give a file for --out")
    bc = BoardCommand(transport, command, sudo, sysfs_root, timeout_s, log)
    batch_sizes = sorted({int(b) for b in batch_sizes})
    run_dir = bc.make_run_dir()
    remote_out = posixpath.join(run_dir, "profile.db")
    keep = False
    try:
        args = ["table", "profile", *bc.device_args(), "--model", model,
                "--batch-sizes", ",".join(map(str, batch_sizes)), "--steps", int(n_steps), "--out", remote_out,
                "--json", "--quiet"]
        if power_cap_w is not None:
            args += ["--power-cap", repr(float(power_cap_w))]
        if resume:
            if os.path.isfile(out):
                _check_profile(out)
                transport.push(out, remote_out)
                bc.log(f"resuming {out}: pushed to {bc.where}")
            args.append("--resume")
        bc.log(f"profiling {model} on {bc.where} (the board's progress is not streamed; results come back when "
               "it ends)")
        try:
            doc = bc.run_json(args)
        except TransportDisconnected as e:
            keep = True
            raise _disconnected(bc, run_dir, e, "profile") from e
        except RemoteCommandError as e:
            raise RemoteCommandError(str(e) + _salvage(bc, remote_out, out), e.remote_exit_code) from e
        if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
            raise FormatError(f"thor-sdk on {bc.where} returned no profile rows")
        _pull_into(transport, inside_run_dir(run_dir, doc.get("out")), out, _check_profile)
    finally:
        if not keep:
            bc.remove_run_dir(run_dir)
    doc["out"] = out
    doc["remote_out"] = remote_out
    doc["board"] = bc.where
    return doc


def _salvage(bc, remote_out, out):
    """A profile that failed part way: pull the rows it committed into ``out`` (for --resume)."""
    from .profile import load_profile

    try:
        _pull_into(bc.transport, remote_out, out, _check_partial_profile)
    except ThorError as e:  # it failed before measuring anything (no file, no rows): nothing to keep
        bc.log(f"no partial profile to bring back from {bc.where}: {e}")
        return ""
    n = len(load_profile(out)[1])
    return f" ({n} rows measured so far kept in {out}; --resume continues them)"


def reset_frequency_remote(transport, command=("thor-sdk",), sudo=False, sysfs_root=None, log=None):
    """``thor-sdk table profile --reset-frequency`` on the board: ``{"min_freq", "max_freq"}``."""
    bc = BoardCommand(transport, command, sudo, sysfs_root, 120, log)
    doc = bc.run_json(["table", "profile", *bc.device_args(), "--reset-frequency", "--json", "--quiet"])
    if not isinstance(doc, dict) or "min_freq" not in doc or "max_freq" not in doc:
        raise FormatError(f"thor-sdk on {bc.where} returned no frequency range")
    return doc


def train_remote(transport, power_cap_w, model="mlp", data="digits", target_accuracy=0.9, table_path=None,
                 batch_size=None, base_lr=0.1, max_epochs=30, seed=0, command=("thor-sdk",), sudo=False,
                 sysfs_root=None, timeout_s=None, log=None, ratios_path=None, batch_sizes=None, profile_steps=None):
    """``thor-sdk train`` on the board; returns its run report (pulled back from the board).

    ``table_path`` (a local power table) and ``ratios_path`` (local batch-size ratios, for a board that
    profiles for the cap itself when there is no table) are pushed to the board; ``data`` naming a
    local folder is pushed too (anything else, ``digits``, ``synthetic`` or a path on the board, is
    passed unchanged).
    """
    for path in (table_path, ratios_path):
        if path is not None and not os.path.isfile(path):
            raise NotFoundError(f"no such file: {path}")
    bc = BoardCommand(transport, command, sudo, sysfs_root, timeout_s, log)
    run_dir = bc.make_run_dir()
    remote_out = posixpath.join(run_dir, "run.json")
    keep = False
    try:
        args = ["train", *bc.device_args(), "--model", model, "--target-accuracy", repr(float(target_accuracy)),
                "--base-lr", repr(float(base_lr)), "--max-epochs", int(max_epochs), "--seed", int(seed),
                "--out", remote_out, "--json"]
        if power_cap_w is not None:
            args += ["--power-cap", repr(float(power_cap_w))]
        if batch_size is not None:
            args += ["--batch-size", int(batch_size)]
        if table_path is not None:
            remote_table = posixpath.join(run_dir, "table.json")
            transport.push(table_path, remote_table)
            args += ["--table", remote_table]
        if ratios_path is not None:
            remote_ratios = posixpath.join(run_dir, "ratios.json")
            transport.push(ratios_path, remote_ratios)
            args += ["--ratios", remote_ratios]
        if batch_sizes:
            args += ["--batch-sizes", ",".join(str(int(b)) for b in batch_sizes)]
        if profile_steps is not None:
            args += ["--profile-steps", int(profile_steps)]
        if os.path.isdir(data):
            name = os.path.basename(os.path.normpath(os.path.abspath(data)))
            remote_data = posixpath.join(run_dir, "data", validate_device_path(name))
            transport.push(data, remote_data)
            bc.log(f"copied the data folder {data} to {bc.where}")
            data = remote_data
        args += ["--data", data]
        bc.log(f"training {model} on {bc.where} (the board's epochs are not streamed; the report comes back when "
               "it ends)")
        try:
            bc.run_json(args)  # its printed report; the file it wrote is the one kept
        except TransportDisconnected as e:
            keep = True
            raise _disconnected(bc, run_dir, e, "training run") from e
        with tempfile.TemporaryDirectory(prefix="thor-train-remote-") as tmp:
            local = os.path.join(tmp, "run.json")
            _pull_into(transport, remote_out, local)
            try:
                with open(local, encoding="utf-8") as f:
                    report = json.load(f)
            except ValueError as e:
                raise FormatError(f"the run report from {bc.where} is not JSON: {e}") from e
        if not isinstance(report, dict):
            raise FormatError(f"the run report pulled from {bc.where} is not a JSON object")
    finally:
        if not keep:
            bc.remove_run_dir(run_dir)
    report.setdefault("notes", []).append(f"trained on the board {bc.where} through {transport.name} "
                                          "(thor-sdk run there with --device jetson)")
    return report


__all__ = ["profile_remote", "train_remote", "reset_frequency_remote", "BoardCommand", "inside_run_dir"]
