"""One training step as a plain ONNX graph that stock onnxruntime executes.

The graph computes forward, loss, backward and the optimizer update of a ``torch.nn.Module`` on one
batch. Everything that changes from step to step is an explicit input and output:

=================  ==============================================  ===============================
role               inputs                                          outputs
=================  ==============================================  ===============================
``param``          each trained parameter, named as in the module  ``<name>.new``
``frozen``         each frozen one (``requires_grad`` False: a     --
                   fine-tuned net's backbone): read, never updated
``buffer``         each buffer (BatchNorm running stats)           ``<name>.new``
``optim``          Adam: ``adam.m.<name>``, ``adam.v.<name>``,     ``<input name>.new``
                   ``adam.step`` (float scalar)
``data``           ``x``, ``y``                                    --
``hparam``         ``lr`` (float scalar)                           --
=================  ==============================================  ===============================

plus the output ``loss`` and, when the input's gradient is part of the measured work (a THOR
3-layer probe's identity input layer), ``x_grad`` -- kept as an output so the runtime cannot
eliminate the work as dead code. A harness runs the step *chained*: it feeds each ``<name>.new``
output back as ``<name>`` on the next step (the pairs are also listed in the model's metadata
``thor_sdk.training_step``). Every input also has an initializer of the same name holding its
starting value (ONNX IR >= 4 treats those as defaults), so a harness can run the first step with an
empty feed.

How the graph is made (torch 2.13 / onnxscript 0.7): the step function is traced once with
``make_fx`` on fake tensors (backward ops decomposed into forward ops, see ``decompositions``; the
mkldnn kernels and fused attention disabled so their math versions are traced), its few in-place
ops are rewritten into dataflow (``fx_passes``), and the graph is translated by torch.onnx's own
translator (``method="direct"``), skipping the two extra full re-traces ``torch.onnx.export``
would make; ``method="public"`` goes through ``torch.onnx.export(dynamo=True, optimize=False)``
instead and gives the same graph. Three exporter defects give *silently wrong numbers* and are
avoided on purpose (the parity tests catch each):

- onnxscript's ``nll_loss_forward`` fakes ``total_weight`` (gradients come out batch-size times
  too large): the cross-entropy here is log-softmax + gather + mean, and ``nll_loss`` is decomposed
  if anything else emits it;
- the exporter's graph optimizer drops Adam's ``+ eps`` (NaN wherever a gradient is exactly zero):
  it is never run;
- onnxscript exports training-mode batch norm as inference-mode ``BatchNormalization``
  (normalises with the running statistics, never updates them): batch norm is decomposed into
  mean/variance arithmetic.

Local functions the translator emits are inlined, so the file holds standard-domain ops only. Static
views are translated as one ``Reshape`` of a constant shape, and torch.onnx's translator runs with a
schema-signature cache (``onnx_ops``): the same graph math, about half the nodes and time.

Dropout stays real: each step draws a fresh mask with ONNX's ``RandomUniformLike`` (the runtime's
generator, not torch's), so an exported step with dropout cannot match eager torch bit for bit.
Parity tests use p = 0; the measured graph keeps the model's p.
"""

import hashlib
import json
import os

from thor_sdk.errors import ExportError, UsageError

EXPORTER_VERSION = "thor-sdk onnx_train 3"  # 2: static views as one Reshape; 3: frozen parameters not trained
OPTIMIZERS = ("sgd", "adam")
LOSSES = ("ce", "mse")
OPSET = 18
METADATA_KEY = "thor_sdk.training_step"
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


def _check_options(optimizer, loss):
    if optimizer not in OPTIMIZERS:
        raise UsageError(f"unknown optimizer {optimizer!r} (known: {', '.join(OPTIMIZERS)})")
    if loss not in LOSSES:
        raise UsageError(f"unknown loss {loss!r} (known: {', '.join(LOSSES)})")


def cross_entropy(logits, y):
    """Mean cross-entropy written as log-softmax + gather (no ``nll_loss``; see the module doc)."""
    import torch

    c = logits.shape[-1]
    logp = torch.log_softmax(logits.reshape(-1, c), dim=-1)
    return -logp.gather(1, y.reshape(-1, 1)).mean()


def mse(out, y):
    return ((out - y) ** 2).mean()


def _dtype_name(t):
    return str(t.dtype).replace("torch.", "")


def _spec(name, t, role):
    return {"name": name, "shape": [int(s) for s in t.shape], "dtype": _dtype_name(t), "role": role}


def step_layout(module, x, y, optimizer="sgd", x_requires_grad=False):
    """Names, shapes and roles of the step's inputs and outputs, and the (output, input) state pairs."""
    params = [(n, p) for n, p in module.named_parameters()]
    trained = [(n, p) for n, p in params if p.requires_grad]
    buffers = [(n, b) for n, b in module.named_buffers()]
    inputs = [_spec(n, p, "param" if p.requires_grad else "frozen") for n, p in params]
    inputs += [_spec(n, b, "buffer") for n, b in buffers]
    if optimizer == "adam":
        inputs += [_spec(f"adam.m.{n}", p, "optim") for n, p in trained]
        inputs += [_spec(f"adam.v.{n}", p, "optim") for n, p in trained]
        inputs.append({"name": "adam.step", "shape": [], "dtype": "float32", "role": "optim"})
    state = [s for s in inputs if s["role"] != "frozen"]
    inputs += [_spec("x", x, "data"), _spec("y", y, "data"),
               {"name": "lr", "shape": [], "dtype": "float32", "role": "hparam"}]
    outputs = [{"name": "loss", "shape": [], "dtype": "float32", "role": "loss"}]
    outputs += [dict(s, name=s["name"] + ".new") for s in state]
    if x_requires_grad:
        outputs.append(dict(_spec("x_grad", x, "grad")))
    pairs = [[s["name"] + ".new", s["name"]] for s in state]
    return {"inputs": inputs, "outputs": outputs, "state_pairs": pairs}


def make_step_fn(module, loss="ce", optimizer="sgd", x_requires_grad=False, betas=ADAM_BETAS, eps=ADAM_EPS):
    """The training step as a pure function of flat tensors, in ``step_layout`` order.

    ``step(*params, *buffers, [*m, *v, step], x, y, lr) -> (loss, *new params, *new buffers,
    [*new m, *new v, new step], [x_grad])``, the new params and Adam's state those of the trained parameters only
    (a frozen one, ``requires_grad`` False, is read and gets no gradient). Used for tracing; runs eagerly too.
    """
    import torch

    pnames = [n for n, _ in module.named_parameters()]
    trains = [p.requires_grad for _, p in module.named_parameters()]
    bnames = [n for n, _ in module.named_buffers()]
    n_p, n_b, n_t = len(pnames), len(bnames), sum(trains)
    loss_fn = cross_entropy if loss == "ce" else mse
    b1, b2 = betas

    def step(*flat):
        params = flat[:n_p]
        buffers = flat[n_p:n_p + n_b]
        rest = flat[n_p + n_b:]
        if optimizer == "adam":
            ms, vs, t = rest[:n_t], rest[n_t:2 * n_t], rest[2 * n_t]
            rest = rest[2 * n_t + 1:]
        x, y, lr = rest
        # trace_step passes trained parameters (and x) that already require grad: no detach nodes in the graph
        ps = [p if not tr or p.requires_grad else p.detach().requires_grad_(True) for p, tr in zip(params, trains)]
        pt = [p for p, tr in zip(ps, trains) if tr]
        bs = [b.clone() for b in buffers]  # BatchNorm updates these in place; they become outputs
        xin = x
        if x_requires_grad and not x.requires_grad:
            xin = x.detach().requires_grad_(True)
        with torch.enable_grad():
            out = torch.func.functional_call(module, {**dict(zip(pnames, ps)), **dict(zip(bnames, bs))}, (xin,))
            value = loss_fn(out, y)
            wrt = pt + ([xin] if x_requires_grad else [])
            grads = torch.autograd.grad(value, wrt, allow_unused=True) if wrt else []
        grads = [torch.zeros_like(w) if g is None else g for g, w in zip(grads, wrt)]
        gp = grads[:n_t]
        with torch.no_grad():
            outs = [value]
            if optimizer == "sgd":
                outs += [p - lr * g for p, g in zip(pt, gp)]
                outs += bs
            else:
                t1 = t + 1.0
                bc1 = 1.0 - torch.pow(b1, t1)
                bc2_sqrt = torch.sqrt(1.0 - torch.pow(b2, t1))
                new_m = [m + (g - m) * (1.0 - b1) for m, g in zip(ms, gp)]
                new_v = [v * b2 + g * g * (1.0 - b2) for v, g in zip(vs, gp)]
                step_size = lr / bc1
                outs += [p - step_size * m / (torch.sqrt(v) / bc2_sqrt + eps) for p, m, v in zip(pt, new_m, new_v)]
                outs += bs + new_m + new_v + [t1]
            if x_requires_grad:
                outs.append(grads[-1])
        return tuple(o.detach() if o.requires_grad else o for o in outs)

    return step


def initial_values(module, x, y, optimizer="sgd", lr=0.01):
    """Starting value of every input, in ``step_layout`` order (torch tensors)."""
    import torch

    vals = [p.detach().clone() for _, p in module.named_parameters()]
    vals += [b.detach().clone() for _, b in module.named_buffers()]
    if optimizer == "adam":
        ps = [p.detach() for _, p in module.named_parameters() if p.requires_grad]
        vals += [torch.zeros_like(p) for p in ps] + [torch.zeros_like(p) for p in ps]
        vals.append(torch.tensor(0.0))
    vals += [x.detach().clone(), y.detach().clone(), torch.tensor(float(lr))]
    return vals


class _quiet:
    """Silence torch's notes while exporting (the TF32 note of the mkldnn switch, torch.onnx's
    registry warnings about torchvision): they are not about the user's model. Restored on exit."""

    def __enter__(self):
        import logging
        import warnings

        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        warnings.simplefilter("ignore")
        self._logger = logging.getLogger("torch.onnx")
        self._level = self._logger.level
        self._logger.setLevel(logging.ERROR)
        return self

    def __exit__(self, *exc):
        self._logger.setLevel(self._level)
        return self._warnings.__exit__(*exc)


class _tracing_context:
    """Math kernels while tracing: no mkldnn LSTM/conv kernels, no fused attention."""

    def __enter__(self):
        import contextlib

        import torch

        self._stack = contextlib.ExitStack()
        self._stack.enter_context(_quiet())
        self._stack.enter_context(torch.backends.mkldnn.flags(enabled=False))
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel

            self._stack.enter_context(sdpa_kernel(SDPBackend.MATH))
        except ImportError:  # older torch: no sdpa_kernel; the math path is the CPU default there
            pass
        return self

    def __exit__(self, *exc):
        return self._stack.__exit__(*exc)


def trace_step(module, x, y, loss="ce", optimizer="sgd", x_requires_grad=False, lr=0.01, extra_decompositions=None):
    """The step as an FX graph of forward-only ATen ops (``make_fx`` with fake tensors).

    Returns ``(graph_module, example_args)``.
    """
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    from .decompositions import decomposition_table

    fn = make_step_fn(module, loss, optimizer, x_requires_grad)
    args = initial_values(module, x, y, optimizer, lr)
    trains = [p.requires_grad for p in module.parameters()]
    traced_args = [a.requires_grad_(True) if i < len(trains) and trains[i] else a for i, a in enumerate(args)]
    if x_requires_grad:
        traced_args[-3] = traced_args[-3].clone().requires_grad_(True)
    table = dict(extra_decompositions or {})
    table.update(decomposition_table())
    was_training = module.training
    module.train()
    try:
        with _tracing_context(), torch.no_grad():
            gm = make_fx(fn, decomposition_table=table, tracing_mode="fake")(*traced_args)
        return gm, [a.detach() for a in args]
    except ExportError:
        raise
    except Exception as e:  # torch raises many types while tracing; all mean "cannot export"
        raise ExportError(f"could not trace the training step: {type(e).__name__}: {_first_line(e)}") from e
    finally:
        module.train(was_training)


def _first_line(e):
    text = str(e).strip().splitlines()
    return text[0] if text else ""


class OnnxStepExporter:
    """Exports training steps; holds torch.onnx's op registry so a batch of exports builds it once.

    ``method``: ``"direct"`` translates the traced graph with torch.onnx's translator (fast),
    ``"public"`` goes through ``torch.onnx.export(dynamo=True, optimize=False)`` (two more full
    re-traces; slower), ``"auto"`` is direct where this torch has the translator internals used.
    """

    def __init__(self, opset=OPSET, method="auto"):
        if method not in ("auto", "direct", "public"):
            raise UsageError(f"unknown export method {method!r} (auto, direct, public)")
        self.opset = int(opset)
        self.method = method
        self._internals = None
        self._registry = None
        self._table = None

    def _prepare(self):
        if self.method == "public" or self._registry is not None:
            return
        internals = _exporter_internals()
        if internals is None:
            if self.method == "direct":
                raise ExportError("this torch lacks the torch.onnx internals the direct method uses; "
                                  "use method='public'")
            self.method = "public"
            return
        self._internals = internals
        from . import onnx_ops

        with _quiet(), onnx_ops.light_function_ir():
            self._registry = onnx_ops.register(internals["registry"](self.opset), self.opset)
            self._table = internals["table"](self._registry)

    def export(self, module, x, y, path, *, loss="ce", optimizer="sgd", x_requires_grad=False, lr=0.01,
               check=True):
        """Export one training step of ``module`` on the batch ``(x, y)`` to the ONNX file ``path``.

        Returns the step description (also stored in the model's metadata under
        ``thor_sdk.training_step``): inputs/outputs with shapes, dtypes and roles, the state pairs,
        loss, optimizer, lr.
        """
        from . import onnx_ops

        _check_options(optimizer, loss)
        self._prepare()
        layout = step_layout(module, x, y, optimizer, x_requires_grad)
        in_names = [s["name"] for s in layout["inputs"]]
        out_names = [s["name"] for s in layout["outputs"]]
        if self.method == "public":
            gm, args = trace_step(module, x, y, loss, optimizer, x_requires_grad, lr)
            with _quiet(), onnx_ops.signature_cache():
                model = _translate_public(gm, args, in_names, out_names, self.opset)
        else:
            gm, args = trace_step(module, x, y, loss, optimizer, x_requires_grad, lr,
                                  extra_decompositions=self._table)
            with _quiet(), onnx_ops.signature_cache():
                model = _translate_direct(self._internals, self._registry, self._table, gm, args, in_names,
                                          out_names)
        model = _finish(model, layout, args, loss, optimizer, lr, x_requires_grad)
        if check:
            verify_model(model)
        _atomic_write(path, model.SerializeToString())
        return describe(model)


def export_training_step(module, x, y, path, *, loss="ce", optimizer="sgd", x_requires_grad=False, lr=0.01,
                         opset=OPSET, check=True, method="auto"):
    """One-off ``OnnxStepExporter(opset, method).export(...)``."""
    return OnnxStepExporter(opset, method).export(module, x, y, path, loss=loss, optimizer=optimizer,
                                                  x_requires_grad=x_requires_grad, lr=lr, check=check)


def _exporter_internals():
    """torch.onnx exporter internals used by the direct method, or None where this torch lacks them."""
    # Private on purpose: torch 2.13's only public route, torch.onnx.export(dynamo=True) (method="public",
    # same graph, kept and tested), re-traces the step twice more; every probe part is exported, so "auto"
    # takes this faster path and falls back to the public one whenever a name below is missing.
    try:
        from torch.export import ExportedProgram
        from torch.export.graph_signature import (ExportGraphSignature, InputKind, InputSpec, OutputKind, OutputSpec,
                                                  TensorArgument)
        from torch.onnx._internal.exporter import _core, _decomp, _fx_passes, _registration
    except ImportError:
        return None
    needed = [(_core, "_exported_program_to_onnx_program"), (_decomp, "create_onnx_friendly_decomposition_table"),
              (_decomp, "get_onnx_implemented_overloads"), (_fx_passes, "insert_type_promotion_nodes"),
              (_fx_passes, "remove_assertion_nodes"), (_registration, "ONNXRegistry")]
    if not all(hasattr(mod, name) for mod, name in needed):
        return None

    def registry(opset):
        return _registration.ONNXRegistry.from_torchlib(opset_version=opset)

    def table(reg):
        return _decomp.create_onnx_friendly_decomposition_table(set(_decomp.get_onnx_implemented_overloads(reg)))

    return {"registry": registry, "table": table, "core": _core, "fx_passes": _fx_passes,
            "ExportedProgram": ExportedProgram, "ExportGraphSignature": ExportGraphSignature,
            "InputSpec": InputSpec, "InputKind": InputKind, "OutputSpec": OutputSpec, "OutputKind": OutputKind,
            "TensorArgument": TensorArgument}


def _translate_direct(internals, registry, onnx_table, gm, args, in_names, out_names):
    """Rewrite in-place ops (or, failing that, functionalize with one re-trace) and translate the graph
    with torch.onnx's translator."""
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    from . import fx_passes

    I = internals  # noqa: E741
    try:
        if fx_passes.functionalize_copies(gm):
            fgm = gm
        else:  # a mutation the simple pass does not handle: torch's functionalization (one more trace)
            with _tracing_context(), torch.no_grad():
                fgm = make_fx(torch.func.functionalize(gm, remove="mutations"), decomposition_table=onnx_table,
                              tracing_mode="fake")(*args)
            if "x" in in_names:  # an in-place first layer (a forward-only probe's ReLU) overwrote the batch
                fx_passes.drop_writes_into(fgm, [[n for n in fgm.graph.nodes if n.op == "placeholder"]
                                                 [in_names.index("x")]])
        fx_passes.remove_identities(fgm)
        placeholders = [n for n in fgm.graph.nodes if n.op == "placeholder"]
        outs = fx_passes.distinct_outputs(fgm, torch.ops.aten.clone.default)
        if len(placeholders) != len(in_names) or len(outs) != len(out_names):
            raise ExportError("traced step has an unexpected number of inputs or outputs")
        sig = I["ExportGraphSignature"](
            input_specs=[I["InputSpec"](I["InputKind"].USER_INPUT, I["TensorArgument"](p.name), None)
                         for p in placeholders],
            output_specs=[I["OutputSpec"](I["OutputKind"].USER_OUTPUT, I["TensorArgument"](o.name), None)
                          for o in outs])
        ep = I["ExportedProgram"](root=fgm, graph=fgm.graph, graph_signature=sig, state_dict={}, range_constraints={},
                                  module_call_graph=[], verifiers=[])
        I["fx_passes"].insert_type_promotion_nodes(ep.graph_module)
        ep._graph_module = I["fx_passes"].remove_assertion_nodes(ep.graph_module)
        prog = I["core"]._exported_program_to_onnx_program(ep, registry=registry)
        for value, name in zip(prog.model.graph.inputs, in_names):
            value.name = name
        for value, name in zip(prog.model.graph.outputs, out_names):
            value.name = name
        return prog.model_proto
    except ExportError:
        raise
    except Exception as e:  # the exporter raises its own error types; all mean "cannot export"
        raise ExportError(f"ONNX translation of the training step failed: {type(e).__name__}: {_first_line(e)}") from e


def _translate_public(gm, args, in_names, out_names, opset):
    import torch

    from . import onnx_ops

    try:
        prog = torch.onnx.export(gm, tuple(args), input_names=in_names, output_names=out_names, dynamo=True,
                                 optimize=False, opset_version=opset, external_data=False, verbose=False,
                                 report=False, custom_translation_table=onnx_ops.custom_translations(opset))
    except Exception as e:  # the exporter raises its own error types; all mean "cannot export"
        raise ExportError(f"ONNX export of the training step failed: {type(e).__name__}: {_first_line(e)}") from e
    return prog.model_proto


def _finish(model, layout, args, loss, optimizer, lr, x_requires_grad):
    """Inline local functions, check the names, attach starting values as initializers and the metadata."""
    import onnx
    from onnx import numpy_helper

    import onnx.inliner

    if len(model.functions):
        model = onnx.inliner.inline_local_functions(model)
    g = model.graph
    for node in g.node:
        del node.metadata_props[:]
    got_in = [i.name for i in g.input]
    want_in = [s["name"] for s in layout["inputs"]]
    if got_in != want_in:
        raise ExportError(f"exported graph inputs do not match the step layout: {got_in[:5]}... vs {want_in[:5]}...")
    got_out = [o.name for o in g.output]
    want_out = [s["name"] for s in layout["outputs"]]
    if got_out != want_out:
        raise ExportError(f"exported graph outputs do not match the step layout: {got_out[:5]}...")
    existing = {i.name for i in g.initializer}
    for spec, value in zip(layout["inputs"], args):
        if spec["name"] in existing:
            raise ExportError(f"graph already has an initializer named {spec['name']!r}")
        g.initializer.append(numpy_helper.from_array(value.detach().cpu().numpy(), spec["name"]))
    meta = dict(layout, format="thor-sdk/onnx-training-step", version=1, exporter=EXPORTER_VERSION, loss=loss,
                optimizer=optimizer, lr=float(lr), x_requires_grad=bool(x_requires_grad),
                adam={"beta1": ADAM_BETAS[0], "beta2": ADAM_BETAS[1], "eps": ADAM_EPS} if optimizer == "adam" else None)
    del model.metadata_props[:]
    onnx.helper.set_model_props(model, {METADATA_KEY: json.dumps(meta, sort_keys=True)})
    model.producer_name = "thor-sdk"
    return model


def verify_model(model):
    """``onnx.checker`` full check, and only standard-domain ops (no custom or ORT-contrib ops)."""
    import onnx

    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        raise ExportError(f"exported training step fails onnx.checker: {_first_line(e)}") from e
    bad = sorted(domains_used(model) - {"", "ai.onnx"})
    if bad:
        raise ExportError(f"exported training step uses non-standard op domains: {', '.join(bad)}")


def domains_used(model):
    """Op domains of every node, inside local functions and subgraphs too."""
    seen = set()

    def walk(nodes):
        for n in nodes:
            seen.add(n.domain)
            for a in n.attribute:
                if a.g is not None and len(a.g.node):
                    walk(a.g.node)
                for sub in a.graphs:
                    walk(sub.node)

    walk(model.graph.node)
    for f in model.functions:
        walk(f.node)
    # functions are called through their own domain: what counts is what they contain
    seen -= {f.domain for f in model.functions}
    return seen


def describe(model_or_path):
    """The step description stored in an exported model's metadata."""
    import onnx

    model = model_or_path
    if isinstance(model_or_path, (str, os.PathLike)):
        from google.protobuf.message import DecodeError

        try:
            model = onnx.load(os.fspath(model_or_path), load_external_data=False)
        except (OSError, DecodeError) as e:
            raise ExportError(f"cannot read ONNX file {model_or_path}: {_first_line(e)}") from e
    props = {p.key: p.value for p in model.metadata_props}
    if METADATA_KEY not in props:
        raise ExportError("ONNX model carries no thor-sdk training-step metadata (not written by thor-sdk export)")
    try:
        return json.loads(props[METADATA_KEY])
    except json.JSONDecodeError as e:
        raise ExportError(f"ONNX model's thor-sdk training-step metadata is not JSON: {e}") from None


def _atomic_write(path, data):
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    from thor_sdk.store.files import write_bytes

    write_bytes(path, data, "ONNX file")


# -- content-hash cache -----------------------------------------------------------------------------
def cache_dir():
    """Where exports are cached: ``$THOR_SDK_CACHE`` or ``~/.cache/thor-sdk`` (``/onnx`` below it)."""
    root = os.environ.get("THOR_SDK_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "thor-sdk")
    return os.path.join(root, "onnx")


def content_hash(module, x, y, **options):
    """sha256 of everything the exported graph depends on: exporter and library versions, the
    module's structure (its repr, and each submodule's plain attributes, which a repr may leave out: probes of
    ``x.sum`` and ``x.mean``, or of a full-size and a broadcast product, are one repr), source and tensors (and
    which parameters require a gradient: a fine-tune's step updates only those), the example batch and the
    export options."""
    import inspect

    import onnxscript
    import torch

    h = hashlib.sha256()

    def put(s):
        h.update(s.encode() if isinstance(s, str) else s)
        h.update(b"\0")

    put(EXPORTER_VERSION)
    put(torch.__version__)
    put(getattr(onnxscript, "__version__", "?"))
    put(json.dumps(options, sort_keys=True))
    put(repr(module))
    for name, m in module.named_modules():  # plain attributes a repr leaves out (a Reduce's op, a Mul's broadcast)
        state = {k: v for k, v in vars(m).items()
                 if not k.startswith("_") and isinstance(v, (bool, int, float, str, tuple, type(None)))}
        put(f"{name}:{json.dumps(state, sort_keys=True, default=repr)}")
    for cls in sorted({type(m) for m in module.modules()}, key=lambda c: f"{c.__module__}.{c.__qualname__}"):
        put(f"{cls.__module__}.{cls.__qualname__}")
        try:
            put(inspect.getsource(cls))
        except (OSError, TypeError):  # built-in or dynamically created class: its name must do
            pass
    for name, t in list(module.named_parameters()) + list(module.named_buffers()) + [("x", x), ("y", y)]:
        # requires_grad too: a frozen parameter is read, not updated (a fine-tune's graph is another graph)
        put(f"{name}:{t.dtype}:{tuple(t.shape)}:{bool(t.requires_grad)}")
        put(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def cached_export(module, x, y, *, loss="ce", optimizer="sgd", x_requires_grad=False, lr=0.01, cache=None,
                  exporter=None):
    """Path of the exported step for these inputs, exporting only when the cache lacks it.

    ``cache``: the cache folder (default ``cache_dir()``); ``exporter``: an ``OnnxStepExporter`` to
    reuse across many exports (its op registry is built once).
    """
    _check_options(optimizer, loss)
    exporter = exporter or OnnxStepExporter()
    options = {"loss": loss, "optimizer": optimizer, "x_requires_grad": bool(x_requires_grad), "lr": float(lr),
               "opset": exporter.opset}
    key = content_hash(module, x, y, **options)
    root = cache or cache_dir()
    path = os.path.join(root, f"{key}.onnx")
    if not os.path.isfile(path):
        exporter.export(module, x, y, path, loss=loss, optimizer=optimizer, x_requires_grad=x_requires_grad, lr=lr)
    return path


def example_batch(model_name, batch_size, loss="ce", seed=0):
    """A random batch for a reference net: ``(x, y)``; for MSE, ``y`` is the one-hot of random labels."""
    import torch

    from thor_sdk.models import example_batch as model_batch, model_spec

    spec = model_spec(model_name)
    x, y = model_batch(model_name, batch_size, seed)
    if loss == "mse":
        y = torch.nn.functional.one_hot(y, spec.num_classes).float()
    return x, y
