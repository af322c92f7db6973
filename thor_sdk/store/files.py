"""Output files written whole or not at all: checked before any work, written beside, fsynced, renamed.

Every file thor-sdk writes (estimators, power tables, results, manifests, layer lists, exported
models, bundles' zips) goes through ``atomic_output``: the target is checked first (``check_output``:
its folder exists and is writable, and an existing target is a regular file, never a device node, a
folder or a symlink), the content is written to a temporary file in the same folder, flushed to disk
and renamed over the target; on any error (a full disk, a kill before the rename) the temporary file is
removed and the target is as it was.
"""

import contextlib
import os

from thor_sdk.errors import StoreError, UsageError


def check_output(path, what="output"):
    """UsageError when ``path`` cannot be written as a file: call it before measuring or exporting."""
    path = os.fspath(path)
    if not path or path.endswith(os.sep):
        raise UsageError(f"{what} path {path!r} is not a file name")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"cannot write {what} {path}: no such folder {folder}")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"cannot write {what} {path}: folder {folder} is not writable")
    if os.path.lexists(path) and (os.path.islink(path) or not os.path.isfile(path)):
        raise UsageError(f"refusing to replace {path}: it is not a regular file")
    return path


@contextlib.contextmanager
def atomic_output(path, what="output", suffix=""):
    """``with atomic_output(p) as tmp:`` write to the path ``tmp``; on success it is fsynced and renamed to
    ``p``; on any error it is removed and ``p`` is untouched. ``suffix`` ends the temporary name (for
    writers that insist on an extension, e.g. ``.mlmodel``)."""
    path = check_output(path, what)
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp{os.getpid()}{suffix}")
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        if os.path.lexists(path) and (os.path.islink(path) or not os.path.isfile(path)):
            raise UsageError(f"refusing to replace {path}: it is not a regular file")
        os.replace(tmp, path)
    except OSError as e:
        raise StoreError(f"cannot write {what} {path}: {e.strerror or e}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text(path, text, what="output"):
    """Write ``text`` (UTF-8) to ``path`` atomically; returns the path."""
    with atomic_output(path, what) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
    return path


def write_bytes(path, data, what="output"):
    """Write ``data`` to ``path`` atomically; returns the path."""
    with atomic_output(path, what) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
    return path
