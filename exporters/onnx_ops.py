"""Leaner ONNX translations for the training-step exporter, and a cache for torch.onnx's translator.

Three costs dominated exporting MobileNetV2's training step (3,500 traced ATen nodes) with torch 2.13 /
onnxscript 0.7:

- ``aten.view`` is translated by onnxscript's torch_lib as one ``Constant`` per dimension, a
  ``Concat`` and a ``Reshape`` (7 ONNX nodes for a 4-D view) even when every dimension is a
  Python int. A training step is full of views (batch norm reshapes its per-channel statistics
  forward and backward), so half of MobileNetV2's ONNX graph was shape constants. ``static_view``
  emits one ``Constant`` and one ``Reshape`` for a static shape and defers to torch_lib otherwise.
- building torch.onnx's op registry asks every trace-only torch_lib function for its
  ``function_ir`` only to read its ONNX domain, and onnxscript computes that IR by re-parsing the
  function's source (500 functions, 1.5 s of every export process). ``light_function_ir`` answers
  the domain (the function's opset domain, which is what the IR would say) while the registry is
  built.
- torch.onnx's builder rebuilds an ``OpSignature`` from the ONNX ``OpSchema`` on *every* op it
  records (8,000 times for MobileNetV2, a quarter of the translation time). ``signature_cache``
  memoizes that per (domain, op, version) while a translation runs and restores the original
  afterwards; the signatures are read-only descriptions of the schema.

All three leave the numbers unchanged (the parity tests run on the graphs made this way). Together they
take MobileNetV2's ONNX export from 13-14.5 s to about 10 s in a warm process, and a cold
``thor-sdk export`` from 16-19 s to 13.7 s (``bench/bench_export.py --cold``).
"""

import contextlib


def _opset(version):
    import onnxscript.onnx_opset

    return getattr(onnxscript.onnx_opset, f"opset{int(version)}")


def custom_translations(opset_version):
    """``{aten overload: onnxscript trace-only function}`` to register before translating."""
    import onnxscript
    import torch
    from onnxscript.function_libs.torch_lib.ops import core

    op = _opset(opset_version)

    def static_view(self, size):
        if all(isinstance(s, int) for s in size):
            return op.Reshape(self, op.Constant(value_ints=[int(s) for s in size]), allowzero=True)
        return core.aten_view(self, size)  # symbolic dimensions: torch_lib's general form

    fn = onnxscript.values.TracedOnnxFunction(onnxscript.values.Opset("pkg.thor_sdk", 1), static_view)
    aten = torch.ops.aten
    return {aten.view.default: fn, aten._unsafe_view.default: fn}


def register(registry, opset_version):
    """Register ``custom_translations`` on a torch.onnx ``ONNXRegistry`` (custom entries win)."""
    for target, fn in custom_translations(opset_version).items():
        registry.register_op(target, fn)
    return registry


@contextlib.contextmanager
def signature_cache():
    """Memoize ``onnx_ir.schemas.OpSignature.from_op_schema`` for the duration of the block.

    A no-op where this onnx_ir lacks the method (the translation then simply runs uncached).
    """
    try:
        from onnx_ir import schemas
    except ImportError:
        yield
        return
    cls = getattr(schemas, "OpSignature", None)
    original = None if cls is None else cls.__dict__.get("from_op_schema")
    if not isinstance(original, classmethod):
        yield
        return
    build = original.__func__
    cache = {}

    def cached(klass, op_schema):
        key = (op_schema.domain, op_schema.name, op_schema.since_version)
        sig = cache.get(key)
        if sig is None:
            sig = cache[key] = build(klass, op_schema)
        return sig

    cls.from_op_schema = classmethod(cached)
    try:
        yield
    finally:
        cls.from_op_schema = original


class _DomainOnly:
    def __init__(self, domain):
        self.domain = domain


@contextlib.contextmanager
def light_function_ir():
    """While the block runs, ``TracedOnnxFunction.function_ir`` is an object with only ``domain``.

    For use around ``ONNXRegistry.from_torchlib`` only (it reads nothing else). A no-op where this
    onnxscript lacks the attributes relied on.
    """
    try:
        from onnxscript._internal.values import TracedOnnxFunction
    except ImportError:
        yield
        return
    original = TracedOnnxFunction.__dict__.get("function_ir")
    if not isinstance(original, property):
        yield
        return

    def function_ir(self):
        opset = getattr(self, "_opset", None)
        if opset is None:
            return original.fget(self)
        return _DomainOnly(opset.domain)

    TracedOnnxFunction.function_ir = property(function_ir)
    try:
        yield
    finally:
        TracedOnnxFunction.function_ir = original
