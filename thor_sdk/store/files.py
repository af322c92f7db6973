"""Files in and out: outputs written whole or not at all, user-given JSON and CSV inputs read strictly.

Every file thor-sdk writes (estimators, power tables, results, manifests, layer lists, exported
models, bundles' zips) goes through ``atomic_output``: the target is checked first (``check_output``:
its folder exists and is writable, and an existing target is a regular file, never a device node, a
folder or a symlink), the content is written to a temporary file in the same folder, flushed to disk
and renamed over the target; on any error (a full disk, a kill before the rename) the temporary file is
removed and the target is as it was. A temporary file that a kill -9 left behind is swept by the next
write of the same target once its process is gone and it is STALE_TMP_S old (``sweep_stale_tmp``).

Every JSON or CSV file a user hands thor-sdk is read the other way round, by ``read_json`` / ``read_csv``:
size capped, strict UTF-8 (a UTF-16 file or a NUL byte is named as such), strict numbers (no NaN or
Infinity tokens, nothing beyond the float range, integers of at most MAX_INT_DIGITS digits), no key
twice in one object (which copy would win?), nesting capped, CSV headers without duplicates and rows of the header's width; anything else is one FormatError
naming the file. Standard library only (the stdlib runtime reads estimators through it too).
"""

import contextlib
import csv
import io
import json
import math
import os

from thor_sdk.errors import FormatError, NotFoundError, StoreError, UsageError


def check_output(path, what="output"):
    """UsageError when ``path`` cannot be written as a file: call it before measuring or exporting."""
    path = os.fspath(path)
    if not path or path.endswith(os.sep):
        raise UsageError(f"{what} path {path!r} is not a file name")
    check_parent(path, what)
    if os.path.lexists(path) and (os.path.islink(path) or not os.path.isfile(path)):
        raise UsageError(f"refusing to replace {path}: it is not a regular file")
    return path


def check_parent(path, what="output"):
    """UsageError unless the folder ``path`` goes in exists and is writable; returns that folder."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"cannot write {what} {path}: no such folder {folder}")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"cannot write {what} {path}: folder {folder} is not writable")
    return folder


#: a temporary file left by a writer that was killed (kill -9, power loss) is swept once it is this old
#: (seconds) and its process is gone; a live writer keeps its file fresh, and a writer on another machine
#: sharing the folder (whose PID means nothing here) is never this slow to rename
STALE_TMP_S = 600.0


def pid_alive(pid):
    """False only when no process ``pid`` runs here; someone else's process, or a PID this OS cannot check,
    counts as alive (what a killed writer left is removed only when it surely is)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True
    return True


def sweep_stale_tmp(folder, base, suffixes=("",), now=None):
    """Remove ``.<base>.tmp<PID><suffix>`` files in ``folder`` that a killed writer left: its PID no longer
    runs here and the file is older than STALE_TMP_S. Returns the names removed. Never raises (POSIX
    only: elsewhere nothing is swept)."""
    import re
    import time

    if os.name != "posix":
        return []
    pattern = re.compile(re.escape(f".{base}.tmp") + "([1-9][0-9]*)(?:" + "|".join(map(re.escape, suffixes)) + ")")
    now = time.time() if now is None else now
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    for name in names:
        m = pattern.fullmatch(name)
        if m is None:
            continue
        pid = int(m.group(1))
        full = os.path.join(folder, name)
        try:
            if (pid == os.getpid() or pid_alive(pid) or not os.path.isfile(full) or os.path.islink(full)
                    or now - os.path.getmtime(full) < STALE_TMP_S):
                continue
            os.unlink(full)
            removed.append(name)
        except OSError:
            continue
    return removed


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
    sweep_stale_tmp(folder, os.path.basename(path), ("", suffix) if suffix else ("",))


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


# ----------------------------------------------------------------------------- readers
#: the largest JSON or CSV file a reader opens (bytes): an estimator is about 100 KB, a layer list of a
#: 1,000-layer model about 1 MB; a bigger file is refused before it is read
MAX_READ_BYTES = 64 * 1024 * 1024
#: nesting depth of a JSON document (objects and arrays); our formats need 6
MAX_JSON_DEPTH = 64
#: digits of a JSON integer literal; 10^30 is beyond any count, size or id a format holds
MAX_INT_DIGITS = 30
#: bytes of one CSV field (the csv module's own limit, said here so the error can name it)
MAX_CSV_FIELD = 131072
_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
         (b"\xfe\xff", "UTF-16"))


def read_text(path, what="file", max_bytes=MAX_READ_BYTES):
    """The text of a UTF-8 file (a UTF-8 byte-order mark is dropped). FormatError naming ``path`` for a file
    over ``max_bytes``, a UTF-16/32 file, bytes that are not UTF-8, or a NUL byte; NotFoundError when it is
    not a readable regular file."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise NotFoundError(f"no such file: {path} ({what})")
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size > max_bytes:  # refused unread
                raise FormatError(f"{what} {path} is larger than {max_bytes} bytes; not read")
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise NotFoundError(f"cannot read {what} {path}: {e.strerror or e}") from None
    if len(data) > max_bytes:
        raise FormatError(f"{what} {path} is larger than {max_bytes} bytes; not read")
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise FormatError(f"{what} {path} is {name} text; save it as UTF-8")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise FormatError(f"{what} {path} is not UTF-8 text (byte {e.start}: {data[e.start:e.start + 1]!r}); "
                          "save it as UTF-8") from None
    if "\x00" in text:
        raise FormatError(f"{what} {path} contains a NUL byte (at character {text.index(chr(0))}): not a text file")
    return text


def _json_int(text):
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise FormatError(f"an integer of {len(text.lstrip('-'))} digits (at most {MAX_INT_DIGITS} are read)")
    return int(text)


def _json_float(text):
    v = float(text)
    if not math.isfinite(v):
        raise FormatError(f"the number {text[:40]} is out of range")
    return v


def _json_object(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):
        seen = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise FormatError(f"key {dup[:80]!r} appears twice in one object")
    return d


def _json_constant(name):
    raise FormatError(f"{name} is not a number JSON allows (write a finite number)")


def json_depth(doc):
    """Nesting depth of a parsed JSON value (a scalar: 0), counted without recursion."""
    depth, stack = 0, [(doc, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = list(v.values())
        elif not isinstance(v, list):
            continue
        depth = max(depth, d)
        stack.extend((x, d + 1) for x in v if isinstance(x, (list, dict)))
    return depth


def parse_json(text, what="JSON"):
    """Strict JSON: no NaN/Infinity tokens, no number out of the float range, integers of at most
    MAX_INT_DIGITS digits, no key twice in one object, nesting at most MAX_JSON_DEPTH deep. FormatError naming ``what`` otherwise."""
    try:
        doc = json.loads(text, parse_int=_json_int, parse_float=_json_float, parse_constant=_json_constant,
                         object_pairs_hook=_json_object)
    except FormatError as e:
        raise FormatError(f"{what} is not valid JSON: {e}") from None
    except json.JSONDecodeError as e:
        raise FormatError(f"{what} is not valid JSON: {e}") from None
    except RecursionError:
        raise FormatError(f"{what} is nested more than {MAX_JSON_DEPTH} levels deep") from None
    except ValueError as e:
        raise FormatError(f"{what} is not valid JSON: {e}") from None
    if json_depth(doc) > MAX_JSON_DEPTH:
        raise FormatError(f"{what} is nested more than {MAX_JSON_DEPTH} levels deep")
    return doc


def read_json(path, what="JSON file", max_bytes=MAX_READ_BYTES):
    """A parsed JSON file, read by ``read_text`` and ``parse_json``: one FormatError naming the file for
    anything malformed (encoding, NUL bytes, size, syntax, non-finite or oversized numbers, depth)."""
    path = os.fspath(path)
    return parse_json(read_text(path, what, max_bytes), f"{what} {path}")


def read_csv(path, required=(), what="CSV file", max_bytes=MAX_READ_BYTES):
    """``(header, rows)`` of a CSV file, each row a dict of the header's columns (stripped strings).

    FormatError naming the file (and line) for: anything ``read_text`` refuses, no header, a duplicate or
    empty column name, a missing ``required`` column, a row with more or fewer fields than the header, a
    field over MAX_CSV_FIELD bytes, or broken quoting. Blank lines are skipped."""
    path = os.fspath(path)
    text = read_text(path, what, max_bytes)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header, rows = None, []
    try:
        for fields in reader:
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue
            line = reader.line_num
            if header is None:
                header = [h.strip() for h in fields]
                dup = sorted({h for h in header if header.count(h) > 1})
                if dup:
                    raise FormatError(f"{what} {path}: column {dup[0]!r} appears more than once")
                if "" in header:
                    raise FormatError(f"{what} {path}: column {header.index('') + 1} has no name")
                missing = [c for c in required if c not in header]
                if missing:
                    raise FormatError(f"{what} {path} lacks columns {', '.join(missing)} (has {', '.join(header)})")
                continue
            if len(fields) != len(header):
                raise FormatError(f"{what} {path}:{line}: {len(fields)} fields, the header has {len(header)}")
            rows.append((line, {h: v.strip() for h, v in zip(header, fields)}))
    except csv.Error as e:
        if "field larger than field limit" in str(e):
            raise FormatError(f"{what} {path}:{reader.line_num}: a field is longer than {MAX_CSV_FIELD} bytes") from None
        raise FormatError(f"{what} {path}:{reader.line_num}: not valid CSV: {e}") from None
    if header is None:
        raise FormatError(f"{what} {path} is empty (no header)")
    return header, rows


def csv_number(text, where, column, integer=False, low=None, high=None, low_open=False):
    """A finite number from a CSV field, in ``[low, high]`` (``low_open``: ``(low, high]``); an integer
    value when ``integer``. FormatError naming ``where`` and the column otherwise."""
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise FormatError(f"{where}: {column} is not a number: {text!r}") from None
    if not math.isfinite(v):
        raise FormatError(f"{where}: {column} is not a finite number: {text!r}")
    if integer and v != int(v):
        raise FormatError(f"{where}: {column} must be an integer, got {text!r}")
    if low is not None and (v <= low if low_open else v < low):
        raise FormatError(f"{where}: {column} must be {'>' if low_open else '>='} {low:g}, got {text!r}")
    if high is not None and v > high:
        raise FormatError(f"{where}: {column} must be at most {high:g}, got {text!r}")
    return int(v) if integer else v


def load_schema(name):
    """One of the package's JSON Schemas (``thor_sdk/schemas/NAME``) as a dict."""
    from importlib import resources

    return json.loads(resources.files("thor_sdk").joinpath("schemas", name).read_text(encoding="utf-8"))


def schema_error(e, what):
    """One short line for a jsonschema ``ValidationError``: where, and what rule (a message that would
    quote a long value, e.g. a 5,000-layer list that is too long, names the rule instead)."""
    where = "/".join(str(p) for p in e.absolute_path) or "(top level)"
    where = where if len(where) <= 200 else where[:200] + "..."
    msg = e.message
    if len(msg) > 300:
        msg = f"fails {e.validator} {json.dumps(e.validator_value, default=str)[:100]}"
    return f"{what} breaks its schema at {where}: {msg}"


def validate_schema(doc, schema, what):
    """Validate ``doc`` against a JSON Schema (a dict, or the name of one of ours); FormatError, one line,
    with the first problem. The one place thor-sdk calls ``jsonschema``."""
    import jsonschema

    try:
        jsonschema.validate(doc, load_schema(schema) if isinstance(schema, str) else schema)
    except jsonschema.ValidationError as e:
        raise FormatError(schema_error(e, what)) from None
    return doc


def json_default(o):
    """``json.dumps(..., default=json_default)``: objects with ``to_dict()`` and numpy values as plain JSON."""
    if hasattr(o, "to_dict"):
        return o.to_dict()
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
