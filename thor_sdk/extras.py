"""Optional extras: which ``thor-sdk[...]`` extra brings a heavy module, and the one-line error when one is missing.

The core install (``pip install thor-sdk``: the CLI, the stdlib runtime, ``check``, ``estimate`` on a
layer-list JSON) has none of these modules; the extras declared in ``pyproject.toml`` bring them:
``[fit]`` numpy, scipy, scikit-learn; ``[probe]`` torch, nvidia-ml-py and ``[fit]``; ``[export]`` torch, onnx,
onnxruntime, onnxscript, coremltools; ``[all]`` all of them. ``tests/test_packaging.py`` checks this table
against ``pyproject.toml``.
"""

from thor_sdk.errors import MissingExtraError

# extra -> ((importable module, pip distribution), ...); the first extra (in this order) that holds a
# module is the one suggested for it, unless the command's own extra (COMMAND_EXTRA) holds it too.
EXTRAS = (
    ("fit", (("numpy", "numpy"), ("scipy", "scipy"), ("sklearn", "scikit-learn"))),
    ("probe", (("torch", "torch"), ("pynvml", "nvidia-ml-py"), ("numpy", "numpy"), ("scipy", "scipy"),
               ("sklearn", "scikit-learn"))),
    ("export", (("torch", "torch"), ("numpy", "numpy"), ("onnx", "onnx"), ("onnxruntime", "onnxruntime"),
                ("onnxscript", "onnxscript"), ("onnx_ir", "onnx-ir"), ("coremltools", "coremltools"),
                ("google.protobuf", "protobuf"))),
    ("report", (("matplotlib", "matplotlib"),)),
)

# command -> the extra it needs beyond the core (commands not named here: "probe" for torch and the like)
COMMAND_EXTRA = {"fit": "fit", "export": "export", "bundle": "export"}


def _modules(extra):
    """``{module: distribution}`` of one extra (``"all"``: every extra's)."""
    return {m: d for name, mods in EXTRAS if extra in (name, "all") for m, d in mods}


def extra_for(module, command=None):
    """``(extra, distribution)`` that brings importable ``module`` (a dotted name is matched by its
    longest known prefix), preferring ``command``'s own extra; None for a module no extra brings."""
    parts = str(module or "").split(".")
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        for extra in (COMMAND_EXTRA.get(command), *(e for e, _ in EXTRAS)):
            dist = _modules(extra).get(name) if extra else None
            if dist:
                return extra, dist
    return None


def missing_extra(exc, command=None):
    """The ``MissingExtraError`` for ``exc`` when it is (or was explicitly raised from) a
    ``ModuleNotFoundError`` of a module an extra brings, else None. ``command``: the ``thor-sdk``
    subcommand being run, named in the message."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, MissingExtraError):
            return exc
        if isinstance(exc, ModuleNotFoundError):
            found = extra_for(exc.name, command)
            if found:
                return MissingExtraError(found[0], found[1], f"thor-sdk {command}" if command else "thor-sdk",
                                         name=exc.name)
            return None
        exc = exc.__cause__
    return None


def require(extra, what=None):
    """Raise ``MissingExtraError`` naming ``extra`` when one of its modules is not installed (looked up,
    not imported: cheap). ``what``: who needs it, for the message (default ``thor-sdk``)."""
    import importlib.util

    mods = _modules(extra)
    if not mods:
        raise ValueError(f"unknown thor-sdk extra {extra!r} (known: {', '.join(e for e, _ in EXTRAS)}, all)")
    for module, dist in mods.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a parent package missing (google for google.protobuf)
            found = False
        if not found:
            raise MissingExtraError(extra, dist, what or "thor-sdk", name=module)
