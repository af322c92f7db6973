"""Split an ONNX file into THOR's ordered layer list (the ONNX counterpart of ``extract.py``).

The graph is shape-inferred with ``onnx.shape_inference`` and walked in topological order; each node
maps to a layer kind with the same config features the torch.fx path gives (see
``docs/layer-list.md`` for the table). Conventions:

- Axis 0 of the model's (single) input is the batch; a symbolic batch is fixed before shape
  inference, and every per-sample shape drops axis 0.
- Nodes computing only from constants (initializers, ``Constant``, ``Shape``) are constant-folded
  and free, as are ``Identity``, ``Cast`` and the layout plumbing exporters put around ``LSTM``.
- A layer's role is ``hidden`` iff one of its inputs depends on a layer with parameters, else
  ``input`` (the rule ``extract.py`` uses); the final Linear becomes the ``output`` head.
- Every operator with no layer kind is collected and reported in one ``UnsupportedOperatorError``.
"""

import functools
import os

from thor_sdk.errors import FormatError, ModelError, NotFoundError, UsageError

from .extract import (_adaptive_max_layer, _avg_pool1d_layer, _mean_layer, _pool_layer, _reduce_layer,
                      _upsample_layer, add_layer, add_stand_in_layers, bidirectional_layers, conv_dilation,
                      einsum_chain_stand_in,
                      einsum_stand_in, finish_layers, instance_norm_stand_in, layernorm_layer, matmul_stand_in,
                      pad_config, refuse_unsupported, transposed_conv_stand_in)

_BATCH = 2  # batch size substituted for a symbolic batch dimension before shape inference

_ALWAYS_FREE = {"Identity", "Cast", "CastLike", "Constant", "Shape", "Size"}
_CONTROL_FLOW = {"If", "Loop", "Scan", "SequenceMap"}
_SIMPLE = {"Relu": "relu", "Tanh": "tanh", "Sigmoid": "sigmoid", "Gelu": "gelu", "HardSwish": "hardswish",
           "HardSigmoid": "hardsigmoid", "LeakyRelu": "leaky_relu", "Elu": "elu", "Selu": "elu", "Celu": "elu",
           "Softplus": "elementwise"}
_RESHAPES = {"Flatten", "Reshape", "Squeeze", "Unsqueeze"}
_LAYOUT = {"Transpose", "Reshape", "Squeeze", "Unsqueeze"}
_SLICING = {"Gather", "Slice"}  # indexing an activation with constant indices: free, like getitem in fx
_PARAM_KINDS = {"conv1d", "conv2d", "conv_transpose2d", "linear", "batchnorm1d", "batchnorm2d", "groupnorm",
                "layernorm", "embedding", "lstm", "gru", "prelu", "mha"}
_RECURRENT = ("LSTM", "GRU")  # ONNX's recurrent nodes with a kind: their layout plumbing is free


class _UnknownShape(Exception):
    def __init__(self, tensor):
        super().__init__(tensor)
        self.tensor = tensor


def _first_line(e):
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _prod(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _load(path):
    if not os.path.isfile(path):
        raise NotFoundError(f"no such ONNX file: {path}")
    import onnx
    from google.protobuf.message import DecodeError

    try:
        # Weights are not needed (only their dims, which live in the graph), so external data is not read.
        model = onnx.load(path, load_external_data=False)
    except (DecodeError, ValueError, RuntimeError, OSError, UnicodeDecodeError) as e:
        raise FormatError(f"{path} is not a readable ONNX model ({_first_line(e)})") from e
    if not model.opset_import or not model.graph.node or not model.graph.output:
        raise FormatError(f"{path} is not an ONNX model (no opset, graph nodes or graph outputs)")
    return model


def _real_inputs(graph):
    init = {t.name for t in graph.initializer}
    return [i for i in graph.input if i.name not in init]


def _fix_input_shape(model, source, input_shape):
    """Give the single graph input a concrete shape (symbolic batch -> _BATCH); per-sample dims from
    ``input_shape`` when given. Returns (per-sample shape, dtype name, symbolic batch name or None)."""
    from onnx import TensorProto

    graph = model.graph
    inputs = _real_inputs(graph)
    if len(inputs) != 1:
        names = ", ".join(i.name for i in inputs) or "none"
        raise ModelError(f"{source} has {len(inputs)} graph inputs ({names}); a THOR layer list describes "
                         "a model with one input")
    inp = inputs[0]
    if not inp.type.HasField("tensor_type"):
        raise ModelError(f"{source}: input {inp.name!r} is not a tensor")
    tt = inp.type.tensor_type
    if tt.elem_type in (TensorProto.INT64, TensorProto.INT32):
        dtype = "int64"
    elif tt.elem_type in (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE):
        dtype = "float32"  # THOR layer lists describe float32 training
    else:
        raise ModelError(f"{source}: input {inp.name!r} has element type "
                         f"{TensorProto.DataType.Name(tt.elem_type)}; expected float or integer token ids")
    if not tt.HasField("shape") and input_shape is None:
        raise ModelError(f"{source}: input {inp.name!r} has no shape; give --input-shape")
    dims = tt.shape.dim
    batch_param = dims[0].dim_param if len(dims) and dims[0].HasField("dim_param") else None
    if input_shape is not None:
        per_sample = [int(s) for s in input_shape]
        if len(dims) and len(dims) != len(per_sample) + 1:
            raise UsageError(f"{source}: input {inp.name!r} has rank {len(dims)} (batch + {len(dims) - 1} axes), "
                             f"but --input-shape gives {len(per_sample)} axes")
        fixed = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in list(dims)[1:]]
        if any(f is not None and f != v for f, v in zip(fixed, per_sample)):
            shown = ",".join(str(f) if f is not None else "?" for f in fixed)
            raise UsageError(f"{source}: input {inp.name!r} has the fixed per-sample shape {shown}; "
                             f"--input-shape {','.join(map(str, per_sample))} contradicts it")
        first = dims[0].dim_value if len(dims) and dims[0].HasField("dim_value") else _BATCH
        del dims[:]
        for v in [first] + per_sample:
            dims.add().dim_value = v
        return per_sample, dtype, batch_param
    if len(dims) < 2:
        raise ModelError(f"{source}: input {inp.name!r} has rank {len(dims)}; axis 0 must be the batch, "
                         "followed by the per-sample axes")
    if not dims[0].HasField("dim_value") or dims[0].dim_value <= 0:
        dims[0].dim_value = _BATCH
    dynamic = [i for i, d in enumerate(dims) if i > 0 and (not d.HasField("dim_value") or d.dim_value <= 0)]
    if dynamic:
        labels = ", ".join(f"axis {i} ({dims[i].dim_param or '?'})" for i in dynamic)
        raise UsageError(f"{source}: input {inp.name!r} has dynamic per-sample dimensions: {labels}; "
                         "give the per-sample input shape (--input-shape)")
    return [int(d.dim_value) for d in dims[1:]], dtype, batch_param


def _fix_batch_annotations(graph, batch_param):
    """Exporters annotate intermediate tensors with the symbolic batch name (``batch``, ``s0``);
    give those dims the concrete batch too, so that shape inference agrees with the annotations."""
    if not batch_param:
        return
    for vi in list(graph.value_info) + list(graph.output):
        if not vi.type.HasField("tensor_type"):
            continue
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param == batch_param:
                d.dim_value = _BATCH


#: operators whose output shape depends on the value of other inputs than their data (input index -> what): where an
#: exporter computes such a value from sizes (torch.onnx writes F.pad's pads and a Resize's sizes so), shape
#: inference leaves the output's shape unknown until that value is folded (``_infer_folding``)
_VALUE_INPUTS = {"Pad": (1, 2), "Resize": (1, 2, 3), "Upsample": (1,), "Reshape": (1,), "Expand": (1,), "Tile": (1,),
                 "Slice": (1, 2, 3, 4), "ConstantOfShape": (0,), "Range": (0, 1, 2)}
#: rounds of folding and inference (each folds every value it can; a value computed from a shape that the previous
#: round's fold made known waits a round: ShuffleNetV2's 16 units, a channel shuffle and a split each, took 29)
_MAX_FOLDS = 64
_MAX_FOLD_NODES = 256  # nodes computing one folded value, at most


def _infer(model, source):
    import onnx

    try:
        # no data_prop: onnx's own propagation of values materialises a ConstantOfShape of any size a file asks for
        # (a hostile one: std::bad_alloc); the values shapes need are folded by ``_fold_value``, within bounds
        return onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=False)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError, RuntimeError, ValueError) as e:
        raise FormatError(f"{source}: ONNX shape inference failed ({_first_line(e)})") from e


def _infer_folding(model, source):
    """``model`` shape-inferred, with the values shape inference needs folded into initializers where they are
    computed from constants and known shapes only (``Shape`` of a tensor whose shape is known): torch.onnx writes
    F.pad's pads through ConstantOfShape, Reshape, Slice and Transpose of sizes, which shape inference does not
    follow (nor, before, its ``data_prop``), and everything after such a Pad had no shape. Bounded: ``_MAX_FOLDS``
    rounds."""
    model = _infer(model, source)
    for _ in range(_MAX_FOLDS):
        if not _fold_values(model):
            break
        model = _infer(model, source)
    return model


def _tensor_shapes(graph):
    """Tensor name -> its shape, as the initializers and the inferred value infos give it (None for an unknown
    dimension)."""
    shapes = {t.name: list(t.dims) for t in graph.initializer}
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.HasField("shape"):
            shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
    return shapes


def _known_shapes(graph):
    """``_tensor_shapes`` of the tensors whose every dimension is known."""
    return {name: [int(d) for d in s] for name, s in _tensor_shapes(graph).items() if None not in s}


def _fold_values(model):
    """Replace each value input (``_VALUE_INPUTS``) of a node whose output shape is unknown by an initializer where
    ``_fold_value`` computes it; whether any was."""
    from onnx import numpy_helper

    graph = model.graph
    shapes = _known_shapes(graph)
    producer = {o: n for n in graph.node for o in n.output if o}
    inits = {t.name: t for t in graph.initializer}
    changed = False
    for node in graph.node:
        if node.op_type not in _VALUE_INPUTS or all(o in shapes for o in node.output if o):
            continue
        for i in _VALUE_INPUTS[node.op_type]:
            name = node.input[i] if i < len(node.input) else ""
            if not name or name in inits:
                continue
            value = _fold_value(model, producer, inits, shapes, name)
            if value is None:
                continue
            folded = f"{name}::folded"
            if folded not in inits:
                inits[folded] = numpy_helper.from_array(value, folded)
                graph.initializer.append(inits[folded])
            node.input[i] = folded
            changed = True
    return changed


#: operators a folded value may be computed by: none makes a tensor larger than its inputs together but
#: ConstantOfShape, whose requested size is checked first (``_MAX_FOLD_ELEMENTS``); a hostile file asks for no more
_FOLDABLE = {"Shape", "Size", "Constant", "Identity", "Cast", "Gather", "Slice", "Concat", "Unsqueeze", "Squeeze",
             "Reshape", "Transpose", "Add", "Sub", "Mul", "Div", "Neg", "Floor", "Ceil", "Max", "Min", "Abs",
             "ConstantOfShape", "Equal", "Where", "Not"}
_MAX_FOLD_ELEMENTS = 1024  # elements of any tensor a fold makes
_FOLD_TOTAL = 8  # and of all of them together, at most this many times that


def _fold_value(model, producer, inits, shapes, name, foldable=_FOLDABLE, max_elements=_MAX_FOLD_ELEMENTS,
                dtypes="iuf", external=None):
    """The value of tensor ``name`` where it is computed from initializers, Constants and the shapes of tensors whose
    shape is known (``Shape``, ``Size``) by ``foldable`` operators alone, each run by onnx's reference evaluator
    with every tensor it makes at most ``max_elements`` elements (``_FOLD_TOTAL`` times that together), and its dtype
    one of ``dtypes`` (numpy kinds); None otherwise (the shape stays unknown). An initializer kept in a file beside
    the model is read by ``external`` (``_Graph.external_value``; None: never read, the value is not computed)."""
    import numpy as np
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    nodes, todo, seen = [], [name], set()
    while todo:  # the nodes computing ``name``, back to initializers and shapes
        t = todo.pop()
        if t in seen or not t or t in inits:
            continue
        seen.add(t)
        n = producer.get(t)
        if n is None or n.op_type not in foldable or n.domain not in ("", "ai.onnx") or len(nodes) >= _MAX_FOLD_NODES:
            return None  # a graph input, another operator, or too far
        nodes.append(n)
        if n.op_type not in ("Shape", "Size"):
            todo.extend(n.input)
    order = {id(n): k for k, n in enumerate(model.graph.node)}
    values, made = {}, 0  # made: elements of every tensor the fold has made so far

    def value_of(t):
        if t not in values:
            tensor = inits[t]
            if tensor.data_location == tensor.EXTERNAL:  # never read relative to the working directory
                v = external(tensor) if external is not None else None
                if v is None:
                    raise ValueError(f"{t}: external data not read")
                values[t] = v
            else:
                values[t] = numpy_helper.to_array(tensor)
        return values[t]

    try:
        for n in sorted(nodes, key=lambda n: order.get(id(n), -1)):  # the file's order (shape ops come first)
            if n.op_type in ("Shape", "Size"):
                dims = shapes.get(n.input[0])
                if dims is None:
                    return None
                a = {x.name: helper.get_attribute_value(x) for x in n.attribute}
                values[n.output[0]] = (np.array(int(np.prod(dims)), dtype=np.int64) if n.op_type == "Size" else
                                       np.array(dims[a.get("start", 0):a.get("end", len(dims))], dtype=np.int64))
                continue
            feeds = {t: value_of(t) for t in n.input if t}
            if n.op_type == "ConstantOfShape" and float(np.prod(feeds[n.input[0]])) > max_elements:
                return None
            one = helper.make_graph([n], "fold", [helper.make_tensor_value_info(t, 0, None) for t in feeds],
                                    [helper.make_tensor_value_info(o, 0, None) for o in n.output if o])
            outs = ReferenceEvaluator(helper.make_model(one, opset_imports=list(model.opset_import))).run(None, feeds)
            for o, v in zip([o for o in n.output if o], outs):
                v = np.asarray(v)
                made += v.size
                if v.size > max_elements or made > _FOLD_TOTAL * max_elements:
                    return None
                values[o] = v
    except Exception:  # a malformed node, an operator the evaluator cannot run: the shape stays unknown, as before
        return None
    value = values.get(name)
    return value if value is not None and value.dtype.kind in dtypes else None


class _Graph:
    """The shape-inferred, live, topologically ordered graph and what is known about its tensors."""

    def __init__(self, model, source, batch_param=None, base_dir=None):
        from onnx import numpy_helper

        self.source, self.base_dir = source, base_dir
        graph = model.graph
        _fix_batch_annotations(graph, batch_param)
        model = _infer_folding(model, source)
        graph = model.graph
        self.model, self.graph = model, graph
        #: the default domain's opset (Softmax's default axis changed at 13)
        self.opset = max((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")), default=1)
        self._numpy_helper = numpy_helper
        self.initializers = {t.name: t for t in graph.initializer}
        self.shapes = _tensor_shapes(graph)
        inputs = _real_inputs(graph)  # the batch size the shapes were inferred at (the file's, or _BATCH)
        self.batch = (self.shapes.get(inputs[0].name) or [None])[0] if len(inputs) == 1 else None
        self.outputs = {o.name for o in graph.output}
        self.nodes = self._live(self._toposort(list(graph.node)))
        self.producer = {o: n for n in self.nodes for o in n.output if o}
        self.consumers = {}
        for n in self.nodes:
            for i, name in enumerate(n.input):
                if name:
                    self.consumers.setdefault(name, []).append((n, i))
        self.consts = set(self.initializers)
        for n in self.nodes:
            ins = [i for i in n.input if i]
            if n.op_type in ("Constant", "Shape", "Size") or (
                    n.op_type not in _CONTROL_FLOW and all(i in self.consts for i in ins)):
                self.consts.update(o for o in n.output if o)

    def _toposort(self, nodes):
        import heapq

        produced = {o: k for k, n in enumerate(nodes) for o in n.output if o}
        deps = [set() for _ in nodes]
        users = [[] for _ in nodes]
        for k, n in enumerate(nodes):
            for name in n.input:
                j = produced.get(name)
                if j is not None and j != k and j not in deps[k]:
                    deps[k].add(j)
                    users[j].append(k)
        left = [len(d) for d in deps]
        ready = [k for k in range(len(nodes)) if not left[k]]
        heapq.heapify(ready)
        order = []
        while ready:
            k = heapq.heappop(ready)
            order.append(nodes[k])
            for u in users[k]:
                left[u] -= 1
                if not left[u]:
                    heapq.heappush(ready, u)
        if len(order) != len(nodes):
            raise FormatError(f"{self.source}: the ONNX graph has a cycle")
        return order

    def _live(self, nodes):
        """Drop nodes whose outputs reach no graph output (e.g. BatchNorm's running-stat outputs)."""
        needed = set(self.outputs)
        live = []
        for n in reversed(nodes):
            if any(o in needed for o in n.output if o):
                live.append(n)
                needed.update(i for i in n.input if i)
        return live[::-1]

    # -- tensors --------------------------------------------------------------------------------
    @functools.cached_property
    def known_shapes(self):
        """``_known_shapes`` of the graph, once (a mask's fold needs them; most graphs have no mask)."""
        return _known_shapes(self.graph)

    def is_const(self, name):
        return name in self.consts

    def shape(self, name):
        s = self.shapes.get(name)
        if s is None or any(d is None for d in s):
            raise _UnknownShape(name)
        return [int(d) for d in s]

    def per_sample(self, name):
        return self.shape(name)[1:]

    def value(self, name):
        """The numpy value of an initializer or a Constant node's output, else None."""
        if name in self.initializers:
            t = self.initializers[name]
            if t.data_location == t.EXTERNAL:  # torch.onnx's dynamo exporter writes all but the smallest apart
                return self.external_value(t)
            return self._numpy_helper.to_array(t)
        n = self.producer.get(name)
        if n is None or n.op_type != "Constant":
            return None
        import numpy as np

        for a in n.attribute:
            if a.name == "value":
                return self._numpy_helper.to_array(a.t)
            if a.name == "value_float":
                return np.array(a.f, dtype=np.float32)
            if a.name == "value_floats":
                return np.array(list(a.floats), dtype=np.float32)
            if a.name == "value_int":
                return np.array(a.i, dtype=np.int64)
            if a.name == "value_ints":
                return np.array(list(a.ints), dtype=np.int64)
        return None

    def external_value(self, t):
        """An initializer stored in a file beside the model, read where that file is a plain relative name in the
        model's folder (no absolute path, no ``..``) and the tensor at most ``_MAX_MASK_ELEMENTS`` elements (onnx
        checks the file and its bounds again as it reads); None otherwise, or where it cannot be read."""
        info = {e.key: e.value for e in t.external_data}
        loc = info.get("location", "")
        n = 1
        for d in t.dims:
            n *= int(d)
        if (self.base_dir is None or not loc or os.path.isabs(loc) or "\0" in loc or ".." in loc.replace("\\", "/").split("/")
                or n > _MAX_MASK_ELEMENTS or not os.path.isfile(os.path.join(self.base_dir, loc))):
            return None
        try:
            return self._numpy_helper.to_array(t, self.base_dir)
        except Exception:  # noqa: BLE001 -- onnx's own checks (a link, bounds past the file's end): not read
            return None

    def scalar(self, name):
        v = self.value(name) if name else None
        if v is None or v.size != 1:
            return None
        x = v.reshape(-1)[0]
        # the shortest decimal that round-trips the stored precision: float32 0.2 -> 0.2, not 0.2000000029
        return float(str(x)) if v.dtype.kind == "f" else float(x)

    def users(self, name):
        return self.consumers.get(name, [])

    def sole_user(self, name):
        """The one node consuming ``name`` when nothing else (graph outputs included) does."""
        users = self.users(name)
        if len(users) != 1 or name in self.outputs:
            return None
        return users[0][0]

    def activations(self, node):
        return [i for i in node.input if i and not self.is_const(i)]


def _unexpanded(g, name):
    """The activation ``name`` repeats where an ``Expand`` of it made ``name`` (torch's ``expand_as``), else
    ``name``."""
    p = g.producer.get(name)
    while p is not None and p.op_type == "Expand" and not g.is_const(p.input[0]):
        name = p.input[0]
        p = g.producer.get(name)
    return name


def _attrs(node):
    import onnx

    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _decode(v):
    return v.decode() if isinstance(v, bytes) else v


# -- patterns that span several nodes -------------------------------------------------------------

def _other(node, name):
    """The input of a two-input node that is not ``name`` (None when both are)."""
    ins = list(node.input)
    if len(ins) != 2 or name not in ins:
        return None
    return ins[1] if ins[0] == name else ins[0]


def _close(g, name, target, tol=1e-3):
    v = g.scalar(name) if name else None
    return v is not None and abs(v - target) <= tol * max(1.0, abs(target))


def _match_gelu(g, erf):
    """x * 0.5 * (1 + erf(x / sqrt(2))) in any of the usual node orders -> (anchor, x, nodes)."""
    pre = g.producer.get(erf.input[0])
    if pre is None or g.sole_user(erf.input[0]) is not erf:
        return None
    acts = g.activations(pre)
    if len(acts) != 1:
        return None
    x = acts[0]
    c = _other(pre, x)
    if not ((pre.op_type == "Div" and list(pre.input).index(x) == 0 and _close(g, c, 2 ** 0.5))
            or (pre.op_type == "Mul" and _close(g, c, 2 ** -0.5))):
        return None
    add = g.sole_user(erf.output[0])
    if add is None or add.op_type != "Add" or not _close(g, _other(add, erf.output[0]), 1.0):
        return None
    m1 = g.sole_user(add.output[0])
    if m1 is None or m1.op_type != "Mul":
        return None
    o1 = _other(m1, add.output[0])
    if o1 == x:  # (x * (1 + erf)) * 0.5
        m2 = g.sole_user(m1.output[0])
        if m2 is not None and m2.op_type == "Mul" and _close(g, _other(m2, m1.output[0]), 0.5):
            return m2, x, [pre, erf, add, m1]
        return None
    if _close(g, o1, 0.5):  # x * ((1 + erf) * 0.5)
        m2 = g.sole_user(m1.output[0])
        if m2 is not None and m2.op_type == "Mul" and _other(m2, m1.output[0]) == x:
            return m2, x, [pre, erf, add, m1]
        return None
    half = g.producer.get(o1)  # (x * 0.5) * (1 + erf)
    if (half is not None and half.op_type == "Mul" and g.sole_user(o1) is m1
            and _other(half, x) is not None and _close(g, _other(half, x), 0.5)):
        return m1, x, [pre, erf, add, half]
    return None


def _bias_add(g, node, out_features):
    """The Add that adds a constant bias of out_features to ``node``'s only output, if any."""
    add = g.sole_user(node.output[0])
    if add is None or add.op_type != "Add":
        return None
    b = _other(add, node.output[0])
    if b is None or not g.is_const(b):
        return None
    shape = g.shapes.get(b)
    if shape is None or not shape or shape[-1] != out_features or any(d != 1 for d in shape[:-1]):
        return None
    return add


def _reorders_sample(node):
    """Whether a Transpose reorders a sample's axes (not only where the batch axis goes): a model's permute
    (a 1-D CNN's (C, T) to an LSTM's (T, C)) that an exporter fused with the batch-to-axis-1 move of a
    sequence-first recurrent node."""
    perm = _attrs(node).get("perm") if node.op_type == "Transpose" else None
    order = [int(p) for p in perm if int(p) != 0] if perm is not None else []
    return order != sorted(order)


def _match_group_norm(g, inorm):
    """``(config, folded nodes)`` of nn.GroupNorm as torch.onnx writes it -- x [C, *spatial] reshaped to [G, rest],
    an InstanceNormalization of G constant scales and biases, reshaped back to x's shape, then (with its affine)
    a Mul and an Add of constants of one value per channel -- or None for any other InstanceNormalization."""
    try:
        pre = g.producer.get(inorm.input[0])
        if pre is None or pre.op_type != "Reshape" or g.sole_user(pre.output[0]) is not inorm:
            return None
        xs, grouped = g.per_sample(pre.input[0]), g.per_sample(inorm.input[0])
        post = g.sole_user(inorm.output[0])
        if (len(xs) < 2 or len(grouped) != 2 or post is None or post.op_type != "Reshape"
                or g.per_sample(post.output[0]) != xs or xs[0] % grouped[0]
                or _prod(xs) != _prod(grouped) or len(inorm.input) < 3
                or not all(g.is_const(i) and _prod(g.shape(i)) == grouped[0] for i in inorm.input[1:3])):
            return None
        folded, last = [pre, post], post
        for op in ("Mul", "Add"):  # the per-channel affine: [C, 1, ...] constants broadcast over the sample
            nxt = g.sole_user(last.output[0])
            other = _other(nxt, last.output[0]) if nxt is not None and nxt.op_type == op else None
            if other is None or not g.is_const(other) or _prod(g.shape(other)) != xs[0]:
                break
            folded.append(nxt)
            last = nxt
    except _UnknownShape:
        return None
    return {"channels": xs[0], "num_groups": grouped[0], "spatial": _prod(xs[1:])}, folded


#: operators a constant attention mask may be computed by (beyond ``_FOLDABLE``): a causal mask's triangle and
#: comparisons; its values are read only to tell whether it is causal
_MASK_FOLDABLE = _FOLDABLE | {"Trilu", "Expand", "Range", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And",
                              "Or", "Xor", "Tile", "EyeLike"}
_MAX_MASK_ELEMENTS = 1 << 20  # a 1,024 x 1,024 mask: larger ones are not read (the attention then has no kind)
_MASKED = -1e4  # an additive mask's value at or below this (or -inf) hides a key; 0 keeps it


def _const_value(g, name, max_elements=_MAX_MASK_ELEMENTS):
    """The value of a constant tensor (an initializer, or computed from constants and shapes by ``_MASK_FOLDABLE``
    operators, at most ``max_elements`` elements each), booleans included; None where it cannot be computed."""
    v = g.value(name)
    if v is not None:
        return v if v.size <= max_elements else None
    return _fold_value(g.model, g.producer, g.initializers, g.known_shapes, name, foldable=_MASK_FOLDABLE,
                       max_elements=max_elements, dtypes="biuf", external=g.external_value)


def _causal_hidden(hidden, lq, lk):
    """Whether the boolean ``hidden`` (True where a key is hidden from a query), broadcast over leading axes, is
    PyTorch's ``is_causal`` pattern for ``lq`` queries over ``lk`` keys: key j hidden from query i iff j > i."""
    import numpy as np

    if hidden.ndim < 2 or hidden.shape[-2:] != (lq, lk):
        return False
    rows = hidden.reshape(-1, lq, lk)
    return bool((rows == rows[0]).all() and (rows[0] == np.triu(np.ones((lq, lk), dtype=bool), 1)).all())


def _mask_step(g, node, scores, lq, lk):
    """How ``node`` (a user of the attention ``scores``) treats them: ``"scale"`` (times or over one constant
    number), ``"causal"`` (a constant causal mask added, or filled in by ``Where``), ``"mask"`` (another mask), or
    None (not a step between the scores and their softmax)."""
    import numpy as np

    other = _other(node, scores)
    if node.op_type in ("Mul", "Div") and other is not None and g.is_const(other) \
            and (node.op_type == "Mul" or node.input[0] == scores):
        shape = g.shapes.get(other)
        return "scale" if shape is not None and None not in shape and _prod(shape) == 1 else None
    if node.op_type == "Add" and other is not None and g.is_const(other):
        m = _const_value(g, other)
        if m is None or m.dtype.kind != "f":
            return "mask"
        kept, hidden = m == 0, m <= _MASKED
        return "causal" if (kept | hidden).all() and _causal_hidden(hidden, lq, lk) else "mask"
    if node.op_type == "Where" and len(node.input) == 3 and scores in node.input[1:] \
            and node.input[0] != scores and all(g.is_const(i) for i in node.input if i != scores):
        fill_name = node.input[1] if node.input[2] == scores else node.input[2]
        cond, fill = _const_value(g, node.input[0]), _const_value(g, fill_name)
        if cond is None or fill is None or fill.size != 1 or not float(np.asarray(fill).reshape(-1)[0]) <= _MASKED:
            return "mask"
        hidden = cond.astype(bool) if node.input[2] == scores else ~cond.astype(bool)
        return "causal" if _causal_hidden(hidden, lq, lk) else "mask"
    return None


#: layout operators attention's queries, keys and values pass through on their way from a projection: the batch
#: is followed through them (``_batch_place``), views of them into attention are free (``_into_attention``), and
#: nn.MultiheadAttention's heads are cut out of its input projection through them (``_in_projection``)
_ATTENTION_LAYOUT = {"Transpose", "Reshape", "Gather", "Split", "Slice", "Squeeze", "Unsqueeze", "Identity"}


def _batch_place(g, name, depth=0):
    """``(axis, merged)``: the batch axis of tensor ``name`` and how many elements of the axes after it share that
    axis with it (1: the axis is the batch alone; m: it holds batch x m, the batch outermost, as a Reshape of
    ``(B, H, T, d)`` into ``(B x H, T, d)`` leaves it), following the layout operators that made it back to a
    tensor the reader takes as batch first (a graph input, any other operator's output); None where the batch is
    lost (indexed away, split, merged behind another axis) or cannot be told."""
    p = g.producer.get(name)
    if p is None or p.op_type not in _ATTENTION_LAYOUT or depth > 24:
        return 0, 1
    try:
        a, rank_in = _attrs(p), len(g.shape(p.input[0]))
        place = _batch_place(g, p.input[0], depth + 1)
        if place is None:
            return None
        b, merged = place
        if p.op_type == "Reshape":  # the batch stays outermost: axis 0 holds it, with what else its size says
            out = g.shape(name)[0]
            return (0, out // g.batch) if b == 0 and g.batch and out % g.batch == 0 else None
        if p.op_type == "Transpose":
            perm = [int(x) for x in a.get("perm", range(rank_in - 1, -1, -1))]
            return (perm.index(b), 1) if merged == 1 else (0, merged) if perm[0] == 0 == b else None
        if p.op_type in ("Squeeze", "Unsqueeze"):
            axes = a.get("axes") if "axes" in a else (g.value(p.input[1]) if len(p.input) > 1 and p.input[1] else None)
            if axes is None:
                return None
            rank_out = len(g.shape(name))
            axes = sorted(int(x) % (rank_in if p.op_type == "Squeeze" else rank_out) for x in list(axes))
            if p.op_type == "Squeeze":
                return None if b in axes else (b - sum(x < b for x in axes), merged)
            for x in axes:  # each inserted axis at or before the batch's place pushes it on
                if x <= b:
                    b += 1
            return b, merged
        axis = int(a.get("axis", 0)) % rank_in
        if p.op_type == "Gather":
            if not g.is_const(p.input[1]) or axis == b:
                return None
            return b - (axis < b and len(g.shape(p.input[1])) == 0), merged
        if p.op_type == "Split" and axis == b:
            return None
        return b, merged  # Slice (of constant bounds: another operator), Split along another axis, Identity
    except (_UnknownShape, ValueError, TypeError):
        return None


def _batch_axis(g, name):
    """The axis of tensor ``name`` that is the batch alone (``_batch_place``), or None."""
    place = _batch_place(g, name)
    return place[0] if place is not None and place[1] == 1 else None


def _attention_core(g, softmax):
    """The attention around ``softmax`` as exporters write it -- ``MatMul(q, k^T)``, a scale (of the scores, or of q
    and k^T), a constant mask, ``Softmax`` over the keys, a ``Dropout``, ``MatMul(., v)``, each part used by the
    next alone -- as a dict: ``anchor`` (the second MatMul), ``nodes`` (the others), ``operands`` (q, k^T, v),
    ``q`` (q's per-sample shape), ``lq``, ``lk``, ``p`` (dropout), ``mask`` (None, ``"causal"``: PyTorch's
    ``is_causal`` one, ``"mask"``: another); or None."""
    try:
        xs = g.per_sample(softmax.input[0])
        rank = len(xs) + 1
        if len(xs) < 2 or int(_attrs(softmax).get("axis", -1 if g.opset >= 13 else 1)) % rank != rank - 1:
            return None
        nodes, t = [softmax], softmax.input[0]
        lq, lk = xs[-2], xs[-1]
        mask = None
        for _ in range(4):  # the scale and mask steps between the scores and the softmax
            p = g.producer.get(t)
            if p is None or g.sole_user(t) is None or p.op_type == "MatMul":
                break
            scores = next((i for i in p.input if i and not g.is_const(i)), None)
            step = _mask_step(g, p, scores, lq, lk) if scores is not None else None
            if step is None or g.sole_user(scores) is not p or (step != "scale" and mask is not None):
                return None
            mask = mask if step == "scale" else step
            nodes.append(p)
            t = scores
        mm1 = g.producer.get(t)
        if mm1 is None or mm1.op_type != "MatMul" or g.sole_user(t) is None or len(g.activations(mm1)) != 2:
            return None
        nodes.append(mm1)
        after, p_drop = g.sole_user(softmax.output[0]), 0.0
        if after is not None and after.op_type == "Dropout":
            ratio = after.input[1] if len(after.input) > 1 and after.input[1] else None
            p_drop = g.scalar(ratio) if ratio else float(_attrs(after).get("ratio", 0.5))
            if p_drop is None or not 0 <= p_drop < 1:
                return None
            nodes.append(after)
            after = g.sole_user(after.output[0])
        out = nodes[-1].output[0] if nodes[-1].op_type == "Dropout" else softmax.output[0]
        if after is None or after.op_type != "MatMul" or after.input[0] != out or g.is_const(after.input[1]):
            return None
        operands = []
        for x in (mm1.input[0], mm1.input[1]):  # q and k^T, each perhaps times a constant number
            p = g.producer.get(x)
            if p is not None and p.op_type in ("Mul", "Div") and g.sole_user(x) is mm1 and len(g.activations(p)) == 1 \
                    and _mask_step(g, p, g.activations(p)[0], lq, lk) == "scale":
                nodes.append(p)
                x = g.activations(p)[0]
            operands.append(x)
        operands.append(after.input[1])
        q, kt, v = (g.per_sample(x) for x in operands)
        if not (len(q) == len(kt) == len(v) == len(xs) and q[:-2] == kt[:-2] == v[:-2] == xs[:-2]
                and q[-1] == kt[-2] == v[-1] and kt[-1] == v[-2] == lk and q[-2] == lq):
            return None
    except _UnknownShape:
        return None
    return {"anchor": after, "nodes": nodes, "operands": operands, "q": q, "lq": lq, "lk": lk, "p": float(p_drop),
            "mask": mask}


def _match_attention(g, core):
    """``(anchor, config, nodes, operands)`` of attention (``core``: ``_attention_core``'s) read as kind ``sdpa``
    (the torch.fx reader's F.scaled_dot_product_attention: its config; written-out attention exports the same
    graph): q, k^T and v each batch first, no mask or the causal one; or None."""
    if core["mask"] == "mask" or any(_batch_axis(g, x) != 0 for x in core["operands"]):
        return None
    q = core["q"]
    config = {"num_heads": _prod(q[:-2]), "seq_len": core["lq"], "kv_len": core["lk"], "head_dim": q[-1],
              "causal": int(core["mask"] == "causal"), "p": core["p"]}
    return core["anchor"], config, core["nodes"], core["operands"]


def _projection(g, node, bias=True):
    """``(width in, width out, its bias Add or None)`` of a MatMul or Gemm of an activation and a constant 2-D
    weight with a bias (its C, or an Add after it; ``bias`` False: or none), or None."""
    if node.op_type not in ("MatMul", "Gemm") or len(node.input) < 2 or not g.is_const(node.input[1]) \
            or g.is_const(node.input[0]):
        return None
    ws = g.shapes.get(node.input[1])
    if not ws or len(ws) != 2 or None in ws or node.op_type == "Gemm" and int(_attrs(node).get("transA", 0)):
        return None
    n_in, n_out = (ws[1], ws[0]) if node.op_type == "Gemm" and int(_attrs(node).get("transB", 0)) else (ws[0], ws[1])
    if node.op_type == "Gemm" and len(node.input) > 2 and node.input[2]:
        return n_in, n_out, None
    add = _bias_add(g, node, n_out)
    return (n_in, n_out, add) if add is not None or not bias else None


def _in_projection(g, operand):
    """``(projection node, its bias Add, the module's input tensor)`` that attention operand ``operand`` was cut
    from through layout operators and a scale: nn.MultiheadAttention's input projection of a batch-first input
    moved sequence-first by a ``Transpose(1, 0, 2)``; or None."""
    x = operand
    for _ in range(24):
        p = g.producer.get(x)
        if p is None:
            return None
        acts = g.activations(p)
        if p.op_type in _ATTENTION_LAYOUT or p.op_type in ("Mul", "Div") and len(acts) == 1 \
                and _mask_step(g, p, acts[0], 0, 0) == "scale":
            if len(acts) != 1 or acts[0] != p.input[0] and p.op_type != "Mul":  # data first; a Mul either way
                return None
            x = acts[0]
            continue
        if p.op_type != "Add" or len(acts) != 1 or g.producer.get(acts[0]) is None:
            return None
        proj = g.producer[acts[0]]
        got = _projection(g, proj)
        if got is None or got[2] is not p:
            return None
        moved = g.producer.get(proj.input[0])
        if moved is None or moved.op_type != "Transpose" or [int(i) for i in _attrs(moved).get("perm", [])] != [1, 0, 2]:
            return None
        return proj, p, moved.input[0]
    return None


def _match_mha(g, core):
    """``(anchor, config, nodes)`` of ``nn.MultiheadAttention`` (batch_first, with its biases, one embedding width)
    as torch.onnx writes it, read as kind ``mha`` as torch.fx reads the module: its input moved sequence-first, the
    input projection(s), the heads merged with the batch, attention (``core``: ``_attention_core``'s), the output
    projection, the output moved back batch first; every node between the module's input(s) and its output, used by
    nothing else, folded into the anchor (the last Transpose). Or None."""
    try:
        projs = [_in_projection(g, x) for x in core["operands"]]
        if any(pr is None for pr in projs):
            return None
        (pq, _, xq), (pk, _, xk), (pv, _, xv) = projs
        if pk is not pv or xk != xv:
            return None
        cross = pq is not pk
        e = g.per_sample(xq)[-1]
        widths = [_projection(g, pr)[:2] for pr in {id(pq): pq, id(pk): pk}.values()]
        if widths != ([(e, e), (e, 2 * e)] if cross else [(e, 3 * e)]) or g.per_sample(xk)[-1] != e \
                or g.per_sample(xq) != [core["lq"], e] or g.per_sample(xk) != [core["lk"], e]:
            return None
        head_dim = core["q"][-1]
        if e % head_dim:
            return None
        heads = e // head_dim
        # forward: the heads merged back, the output projection, the output moved batch first
        t, out_proj = core["anchor"].output[0], None
        for _ in range(8):
            u = g.sole_user(t)
            if u is None:
                return None
            # the output projection: torch.onnx's dynamo exporter drops its bias while it is zero (as
            # nn.MultiheadAttention initialises it); the input projection's bias tells the module has biases
            if out_proj is None and u.input[0] == t and (got := _projection(g, u, bias=False)) is not None:
                out_proj = u
                n_in, n_out, add = got
                if (n_in, n_out) != (e, e):
                    return None
                t = (add or u).output[0]
                continue
            if u.op_type not in ("Transpose", "Reshape"):
                return None
            t = u.output[0]
            if out_proj is not None and u.op_type == "Transpose":
                if [int(i) for i in _attrs(u).get("perm", [])] != [1, 0, 2] or g.per_sample(t) != [core["lq"], e]:
                    return None
                anchor = u
                break
        else:
            return None
        # the module: every node from its input(s) to its output, used by nothing outside it
        inputs, nodes, todo, seen = {xq, xk}, [], [anchor.output[0]], set()
        while todo:
            name = todo.pop()
            if name in seen or name in inputs or g.is_const(name):
                continue
            seen.add(name)
            p = g.producer.get(name)
            if p is None:
                return None  # a graph input reached before the module's own
            if p not in nodes:
                nodes.append(p)
                todo.extend(i for i in p.input if i)
        ids = {id(n) for n in nodes}
        for n in nodes:
            for o in n.output:
                if o and o != anchor.output[0] and (o in g.outputs or any(
                        id(u) not in ids and u.op_type not in ("Shape", "Size") for u, _ in g.users(o))):
                    return None
    except _UnknownShape:
        return None
    mask, nw = core["mask"], int(len(core["q"]) == 2)  # (batch x heads, tokens, head_dim): PyTorch's explicit path
    config = {"embed_dim": e, "num_heads": heads, "seq_len": core["lq"], "kv_len": core["lk"], "cross": int(cross),
              "need_weights": nw, "p": core["p"], "mask": int(mask == "mask" or mask == "causal" and nw),
              "causal": int(mask == "causal" and not nw)}
    return anchor, config, [n for n in nodes if n is not anchor]


def _attention_op(g, node):
    """``(config, None)`` of ONNX's own ``Attention`` operator (opset 23: torch.onnx's dynamo exporter writes
    F.scaled_dot_product_attention so from that opset) read as kind ``sdpa``, or ``(None, reason)``: queries, keys
    and values of one head width and as many heads (4-D ``(B, heads, T, d)``, or 3-D ``(B, T, heads x d)`` with
    ``q_num_heads``/``kv_num_heads``), each batch first; ``is_causal`` its ``causal``; no mask, cache, softcap or
    second output used (the kind's probe has none); no dropout (the operator has none)."""
    a = _attrs(node)
    ins = list(node.input) + [""] * 7
    if any(ins[3:7]) or any(o and (g.users(o) or o in g.outputs) for o in node.output[1:]):
        return None, "a mask, a key/value cache or its scores as an output"
    if float(a.get("softcap", 0.0)) != 0.0 or any(g.is_const(i) for i in ins[:3]):
        return None, "a softcap, or a constant query, key or value"
    q, k, v = (g.per_sample(i) for i in ins[:3])
    if len(q) == len(k) == len(v) == 2:  # (T, heads x d): the heads from the attributes
        hq, hk = int(a.get("q_num_heads", 0)), int(a.get("kv_num_heads", 0))
        if hq < 1 or hk != hq or q[1] % hq or k[1] != q[1] or v[1] != q[1] or k[0] != v[0]:
            return None, "3-D inputs whose heads are not one number of one width"
        heads, lq, lk, d = hq, q[0], k[0], q[1] // hq
    elif len(q) == len(k) == len(v) == 3:
        if not (q[0] == k[0] == v[0] and q[2] == k[2] == v[2] and k[1] == v[1]):
            return None, "grouped heads, or keys, values and queries of other widths"
        heads, lq, lk, d = q[0], q[1], k[1], q[2]
    else:
        return None, "inputs not 3-D or 4-D"
    if any(_batch_axis(g, i) != 0 for i in ins[:3]):
        return None, "inputs not batch first"
    return {"num_heads": heads, "seq_len": lq, "kv_len": lk, "head_dim": d,
            "causal": int(bool(a.get("is_causal", 0))), "p": 0.0}, None


_VIEWS = {"Transpose", "Squeeze", "Unsqueeze"}


def _into_attention(g, operands, attention):
    """The Transpose, Squeeze and Unsqueeze nodes whose values reach attention only as its queries, keys and values
    (through indexing, splits and other such views): strided views kind ``sdpa``'s probe reads as they are, free as
    the torch.fx reader's ``_view_into_attention`` makes a permute and indexing (``q, k, v = qkv``, which torch.onnx
    writes as a Split and a Squeeze per part). ``operands``: every matched attention's q, k^T and
    v; ``attention``: the ids of the nodes each was read from."""
    targets = set(operands)
    free, memo = [], {}

    def only_attention(name, depth=0):
        if (name, depth) in memo:
            return memo[(name, depth)]
        users = [u for u, _ in g.users(name) if u.op_type not in ("Shape", "Size")]
        ok = depth < 8 and bool(users) and name not in g.outputs and all(
            (name in targets and id(u) in attention)
            or (u.op_type in _ATTENTION_LAYOUT and id(u) not in attention
                and all(only_attention(o, depth + 1) for o in u.output if o)) for u in users)
        memo[(name, depth)] = ok
        return ok

    for n in g.nodes:
        if n.op_type in _VIEWS and id(n) not in attention and not g.is_const(n.input[0]) \
                and only_attention(n.output[0]):
            free.append(n)
    return free


def _find_patterns(g, owned=None):
    """Multi-node layers: {anchor: info} and the set of nodes folded into some anchor; ``owned`` (a dict, filled
    when given): the id of each anchor -> the nodes folded into it (whose parameters are the anchor layer's)."""
    absorbed, info = set(), {}
    operands, attention = [], set()  # matched attention's q, k^T and v; its nodes' ids
    owned = {} if owned is None else owned

    def take(anchor, extra, nodes):
        info.setdefault(id(anchor), {}).update(extra)
        absorbed.update(id(n) for n in nodes)
        owned.setdefault(id(anchor), []).extend(n for n in nodes if n is not anchor)

    for n in g.nodes:
        if n.op_type == "Erf":
            got = _match_gelu(g, n)
            if got:
                anchor, x, nodes = got
                take(anchor, {"gelu_of": x}, nodes)
        elif n.op_type in ("MatMul", "Gemm") and len(n.input) >= 2 and g.is_const(n.input[1]) \
                and not g.is_const(n.input[0]):
            has_c = n.op_type == "Gemm" and len(n.input) > 2 and bool(n.input[2])
            w = g.shapes.get(n.input[1])
            if has_c or not w or len(w) != 2:
                continue
            trans_b = n.op_type == "Gemm" and _attrs(n).get("transB", 0)
            add = _bias_add(g, n, w[0] if trans_b else w[1])
            if add is not None:
                take(n, {"bias": 1}, [add])
        elif n.op_type == "Sigmoid" and not g.is_const(n.input[0]):
            # x * sigmoid(x): how exporters write nn.SiLU (an SE block's gate multiplies another tensor: not this)
            mul = g.sole_user(n.output[0])
            if mul is not None and mul.op_type == "Mul" and _other(mul, n.output[0]) == n.input[0]:
                take(mul, {"silu_of": n.input[0]}, [n])
        elif n.op_type == "InstanceNormalization":
            got = _match_group_norm(g, n)
            if got:
                take(n, {"group_norm": got[0]}, got[1])
        elif n.op_type == "Gather" and g.is_const(n.input[0]) and not g.is_const(n.input[1]):
            add = g.sole_user(n.output[0])
            if add is not None and add.op_type == "Add" and g.is_const(_other(add, n.output[0]) or ""):
                take(n, {"positional": 1}, [add])
        elif n.op_type == "Attention" and n.domain in ("", "ai.onnx"):
            try:
                config, why = _attention_op(g, n)
            except _UnknownShape:
                config, why = None, "shapes unknown"
            take(n, {"attention": config} if config else {"attention_refused": why}, [])
            if config:
                operands.extend(n.input[:3])
                attention.add(id(n))
        elif n.op_type == "Softmax" and (core := _attention_core(g, n)) is not None:
            # (a core's softmax feeds its weighted sum: never the head's loss below)
            if (got := _match_mha(g, core)) is not None:  # the stricter pattern first
                anchor, config, nodes = got
                take(anchor, {"mha": config}, nodes)
                attention.update(id(x) for x in nodes + [anchor])
            elif (got := _match_attention(g, core)) is not None:
                anchor, config, nodes, ops = got
                take(anchor, {"attention": config}, nodes)
                operands.extend(ops)
                attention.update(id(x) for x in nodes + [anchor])
        elif n.op_type == "Softmax" or n.op_type == "LogSoftmax":
            # a classifier exported for inference: the softmax is part of the output head's loss
            if n.output[0] in g.outputs and not g.users(n.output[0]):
                take(n, {"head_softmax": 1}, [n])
    absorbed.update(id(n) for n in _into_attention(g, operands, attention))
    # Layout plumbing around LSTM and GRU (batch_first transposes, the num_directions axis): free.
    rnns = [n for n in g.nodes if n.op_type in _RECURRENT]
    after = {}  # tensor -> the LSTM or GRU whose Y it carries through layout-only ops
    for rnn in rnns:
        after[rnn.output[0]] = rnn
    for n in g.nodes:
        if n.op_type in _LAYOUT and n.input and n.input[0] in after:
            out = g.shapes.get(n.output[0])
            if out is not None and len(out) >= 3:
                absorbed.add(id(n))
                after[n.output[0]] = after[n.input[0]]
    before = set()
    for n in reversed(g.nodes):
        if n.op_type in _LAYOUT and id(n) not in absorbed and n.input and not g.is_const(n.input[0]):
            # its users: the LSTM's or GRU's X, other such layout ops, and Shape/Size (sizing the initial state)
            users = [(u, i) for u, i in g.users(n.output[0]) if u.op_type not in ("Shape", "Size")]
            if users and n.output[0] not in g.outputs and all(
                    (u.op_type in _RECURRENT and i == 0) or id(u) in before for u, i in users):
                if _reorders_sample(n):  # the model's own permute, fused with the sequence-first plumbing
                    info.setdefault(id(n), {})["rnn_permute"] = 1
                else:
                    before.add(id(n))
    absorbed |= before
    # Stacked LSTM (GRU) nodes, one per layer -> one lstm (gru) layer with num_layers.
    for rnn in rnns:
        x = rnn.input[0]
        while x not in after and g.producer.get(x) is not None and id(g.producer[x]) in before:
            x = g.producer[x].input[0]
        prev = after.get(x)
        if prev is None or prev is rnn or prev.op_type != rnn.op_type:
            continue
        chain_ok = all(len(g.users(t)) == 1 and t not in g.outputs for t, src in after.items() if src is prev)
        if chain_ok and _attrs(prev).get("hidden_size") and \
                _attrs(prev).get("direction", b"forward") == _attrs(rnn).get("direction", b"forward"):
            root = info.get(id(prev), {}).get("rnn_root", prev)
            info.setdefault(id(root), {})["num_layers"] = info.get(id(root), {}).get("num_layers", 1) + 1
            info.setdefault(id(rnn), {})["rnn_root"] = root
            absorbed.add(id(rnn))
            owned.setdefault(id(root), []).append(rnn)  # a stacked layer's weights are the one layer's
    return absorbed, info


# -- one node -> (kind, config) --------------------------------------------------------------------

def _side_padding(a, size, kernels, strides, op, unsupported):
    """Symmetric padding per spatial side from ``pads``/``auto_pad`` (None when unsupported)."""
    auto = _decode(a.get("auto_pad", "NOTSET"))
    if auto == "VALID":
        return [0] * len(size)
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for s, kernel, stride in zip(size, kernels, strides):
            total = max((-(-s // stride) - 1) * stride + kernel - s, 0)
            if total % 2:
                unsupported.append(f"{op}(auto_pad={auto} with odd padding)")
                return None
            pads.append(total // 2)
        return pads
    pads = [int(p) for p in a.get("pads", [0] * 2 * len(size))]
    half = len(pads) // 2
    if pads[:half] != pads[half:]:
        unsupported.append(f"{op}(asymmetric padding)")
        return None
    return pads[:half] or [0] * len(size)


def _window(a, kernel_shape, xs, op, unsupported, dilation=1):
    """A 2-D Conv's ``(kernels, strides, pads)``, each (along the height, along the width), from its
    attributes on a per-sample input ``xs`` = [C, H, W]; None when unsupported (recorded). ``dilation``: a Conv's
    (one for both sides): ``auto_pad`` SAME pads for its dilated kernel, ``dilation x (kernel - 1) + 1`` wide."""
    kernels = [int(k) for k in kernel_shape]
    strides = [int(s) for s in a.get("strides", [1, 1])]
    if len(kernels) != 2 or len(strides) != 2:
        unsupported.append(f"{op}(kernel or strides not 2-D)")
        return None
    pads = _side_padding(a, xs[1:], [dilation * (k - 1) + 1 for k in kernels], strides, op, unsupported)
    if pads is None or len(pads) != 2:
        return None
    return kernels, strides, pads


def _conv(g, node, a, unsupported):
    x, w = node.input[0], node.input[1]
    if not g.is_const(w):
        unsupported.append("Conv(non-constant weight)")
        return None
    ws = g.shape(w)
    if len(ws) == 3:
        return _conv1d(g, node, a, ws, unsupported)
    if len(ws) != 4:
        unsupported.append(f"Conv({len(ws) - 2}-D)")
        return None
    xs = g.per_sample(x)
    if len(xs) != 3:  # a 2-D weight on an input that is not [C, H, W]: not a model ONNX would run
        unsupported.append(f"Conv(input of {len(xs)} axes per sample, weight of 4)")
        return None
    kernel_shape = a.get("kernel_shape", ws[2:])
    dilations = [int(d) for d in a.get("dilations", [1, 1])]
    if len(dilations) != 2 or len(kernel_shape) != 2:
        unsupported.append("Conv(kernel or dilations not 2-D)")
        return None
    n_unsupported = len(unsupported)
    dilation = conv_dilation(dilations, kernel_shape, unsupported, "Conv")
    if len(unsupported) > n_unsupported:
        return None
    window = _window(a, kernel_shape, xs, "Conv", unsupported, dilation)
    if window is None:
        return None
    kernels, strides, pads = window
    return "conv2d", {"in_channels": xs[0], "out_channels": ws[0], "kernel": kernels[0], "stride": strides[0],
                      "padding": pads[0], "groups": int(a.get("group", 1)), "height": xs[1], "width": xs[2],
                      "bias": int(len(node.input) > 2 and bool(node.input[2])), "dilation": dilation,
                      "kernel_w": kernels[1], "stride_w": strides[1], "padding_w": pads[1]}


def _conv1d(g, node, a, ws, unsupported):
    """A 1-D Conv (weight [C_out, C_in / group, k] on [C, L]) as kind ``conv1d``, as the torch.fx reader reads
    nn.Conv1d: its kernel, stride, symmetric padding (``auto_pad`` SAME of the dilated kernel) and dilation."""
    xs = g.per_sample(node.input[0])
    if len(xs) != 2:
        unsupported.append(f"Conv(input of {len(xs)} axes per sample, weight of 3)")
        return None
    kernel = [int(k) for k in a.get("kernel_shape", ws[2:])]
    strides = [int(s) for s in a.get("strides", [1])]
    dilations = [int(d) for d in a.get("dilations", [1])]
    if not (len(kernel) == len(strides) == len(dilations) == 1):
        unsupported.append("Conv(kernel, strides or dilations not 1-D)")
        return None
    pads = _side_padding(a, xs[1:], [dilations[0] * (kernel[0] - 1) + 1], strides, "Conv", unsupported)
    if pads is None or len(pads) != 1:
        return None
    return "conv1d", {"in_channels": xs[0], "out_channels": ws[0], "kernel": kernel[0], "stride": strides[0],
                      "padding": pads[0], "groups": int(a.get("group", 1)), "length": xs[1],
                      "bias": int(len(node.input) > 2 and bool(node.input[2])), "dilation": dilations[0]}


def _deconv(g, node, a, unsupported):
    """A 2-D ConvTranspose as kind ``conv_transpose2d`` (square kernel, stride, padding and output padding, one
    group, no dilation, no ``output_shape``), as the torch.fx reader takes nn.ConvTranspose2d; else recorded
    unsupported (``--unknown-ops approx``: the stride-1 conv of the same FLOPs, ``_stand_in``)."""
    ws, xs = g.shape(node.input[1]), g.per_sample(node.input[0])  # W: [C_in, C_out / group, kH, kW]
    sides = {"kernel": a.get("kernel_shape", ws[2:]), "stride": a.get("strides", [1, 1]),
             "output_padding": a.get("output_padding", [0, 0])}
    pads = [int(p) for p in a.get("pads", [0, 0, 0, 0])]
    why = [what for what, bad in (
        ("non-constant weight", not g.is_const(node.input[1])), ("not 2-D", len(ws) != 4 or len(xs) != 3),
        ("group>1", int(a.get("group", 1)) != 1), ("dilation>1", any(int(d) != 1 for d in a.get("dilations", [1]))),
        ("auto_pad or output_shape", _decode(a.get("auto_pad", "NOTSET")) != "NOTSET" or "output_shape" in a),
        ("non-square kernel, stride or padding",
         any(len({int(v) for v in t}) != 1 for t in (*sides.values(), pads)))) if bad]
    if why:
        unsupported.append(f"ConvTranspose({', '.join(why)})")
        return None
    return "conv_transpose2d", {"in_channels": xs[0], "out_channels": ws[1], **{k: int(v[0]) for k, v in sides.items()},
                                "padding": pads[0], "height": xs[1], "width": xs[2],
                                "bias": int(len(node.input) > 2 and bool(node.input[2]))}


def _pad(g, node, a, unsupported):
    """A constant Pad as kind ``pad``, its pads read off the input's and output's shapes (exporters compute them
    from sizes: a U-Net's to match its skip), as the torch.fx reader reads F.pad; another mode is recorded
    unsupported."""
    mode = _decode(a.get("mode", "constant"))
    if mode != "constant":
        unsupported.append(f"Pad(mode={mode!r}: only constant padding has a kind)")
        return None
    full_in, full_out = g.shape(node.input[0]), g.shape(node.output[0])
    if not full_in or not full_out:  # a scalar (a reduction over every axis before it): no batch axis to keep
        unsupported.append("Pad(of a tensor without a batch axis)")
        return None
    if full_in[0] != full_out[0]:
        unsupported.append("Pad(pads the batch axis)")
        return None
    xs, ys = g.per_sample(node.input[0]), g.per_sample(node.output[0])
    got = pad_config([p for x, y in zip(xs[::-1], ys[::-1]) for p in (0, y - x)], xs, ys) if len(xs) == len(ys) \
        else "an output of another rank"
    if isinstance(got, str):
        unsupported.append(f"Pad({got})")
        return None
    return "pad", got


def _resize(g, node, a, unsupported):
    """A Resize of [C, H, W] by one integer scale along H and W: kind ``upsample`` (mode nearest) or
    ``upsample_bilinear`` (mode linear), as the torch.fx reader reads nn.Upsample and F.interpolate."""
    mode = {"nearest": "nearest", "linear": "bilinear"}.get(_decode(a.get("mode", "nearest")), "other")
    xs, ys = g.per_sample(node.input[0]), g.per_sample(node.output[0])
    if len(xs) == len(ys) == 3 and xs[0] != ys[0]:
        unsupported.append("Resize(of the channels)")
        return None
    return _upsample_layer(mode, xs, ys, unsupported, "Resize")


def _reduce_axes(g, node, a):
    """A Reduce* node's axes: its attribute (older opsets), else its constant second input; None when neither."""
    axes = a.get("axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        v = g.value(node.input[1])
        axes = None if v is None else [int(i) for i in v.reshape(-1)]
    return axes


def _reduce(g, node, a, unsupported):
    """ReduceSum, ReduceMean and ReduceMax as the torch.fx reader reads ``x.sum(dim)``, ``x.mean(dim)`` and
    ``x.amax(dim)`` (ONNX's ReduceMax keeps no argmax): a mean over an image's spatial axes or a sequence is the
    pooling those run, any other reduction over adjacent axes its ``reduce_*`` kind."""
    op = node.op_type
    axes = _reduce_axes(g, node, a)
    if axes is None or int(a.get("noop_with_empty_axes", 0)):
        unsupported.append(f"{op}(over axes not known, or every axis)")
        return None
    dims, xs = tuple(int(i) for i in axes), tuple(g.per_sample(node.input[0]))
    if op == "ReduceMean":
        return _mean_layer(dims, xs, unsupported, op)
    return _reduce_layer("reduce_sum" if op == "ReduceSum" else "reduce_max", dims, xs, unsupported, op,
                         None if op == "ReduceSum" else 0)


def _pool(g, node, a, unsupported):
    """MaxPool and AveragePool as the torch.fx reader reads nn.MaxPool1d/2d and nn.AvgPool1d/2d (``_pool_layer``): a
    2-D one's kernel, stride and symmetric padding per side; a 1-D MaxPool kind ``maxpool1d``, a 1-D AveragePool the
    ``avgpool2d`` over (C, 1, L) PyTorch runs it as; ``ceil_mode`` only where it leaves the output's shape as is;
    dilation recorded unsupported."""
    op = node.op_type
    xs = g.per_sample(node.input[0])
    if len(xs) not in (2, 3):
        unsupported.append(f"{op}({len(xs) - 1}-D)")
        return None
    kernels = [int(k) for k in a["kernel_shape"]]
    strides = [int(s) for s in a.get("strides", [1] * len(kernels))]
    if len(kernels) != len(xs) - 1 or len(strides) != len(kernels):
        unsupported.append(f"{op}(kernel or strides of another rank than its input)")
        return None
    if any(int(d) != 1 for d in a.get("dilations", [1])):
        unsupported.append(f"{op}(dilation)")
        return None
    pads = _side_padding(a, xs[1:], kernels, strides, op, unsupported)
    if pads is None:
        return None
    ceil_mode, ys = int(a.get("ceil_mode", 0)), g.per_sample(node.output[0])
    if op == "MaxPool" and kernels == list(xs[1:]) and not any(pads):
        # one window over the whole input: how exporters write nn.AdaptiveMaxPool2d(1) (CBAM's, a 1-D CNN's
        # concat pooling), read as GlobalMaxPool is
        return _adaptive_max_layer(1, False, xs, unsupported, op)
    if len(xs) == 2:
        if op == "MaxPool":
            return _pool_layer("maxpool1d", kernels[0], strides[0], pads[0], 1, ceil_mode, xs, ys, unsupported, op)
        return _avg_pool1d_layer(kernels[0], strides[0], pads[0], ceil_mode, xs, ys, unsupported, op)
    return _pool_layer("maxpool2d" if op == "MaxPool" else "avgpool2d", tuple(kernels), tuple(strides),
                       tuple(pads), 1, ceil_mode, xs, ys, unsupported, op)


def _linear(g, node, a, extra, unsupported):
    x, w = node.input[0], node.input[1]
    op = node.op_type
    if g.is_const(x) or not g.is_const(w):
        unsupported.append(f"{op}(of two activations)" if not g.is_const(w) else f"{op}(constant input)")
        return None
    ws = g.shape(w)
    if len(ws) != 2:
        unsupported.append(f"{op}(weight of rank {len(ws)})")
        return None
    if op == "Gemm":
        if int(a.get("transA", 0)):
            unsupported.append("Gemm(transA=1)")
            return None
        in_f, out_f = (ws[1], ws[0]) if int(a.get("transB", 0)) else (ws[0], ws[1])
        bias = int(len(node.input) > 2 and bool(node.input[2]))
    else:
        in_f, out_f = ws
        bias = 0
    xs = g.per_sample(x)
    return "linear", {"in_features": in_f, "out_features": out_f, "tokens": _prod(xs[:-1]),
                      "bias": int(bias or extra.get("bias", 0))}


def _stand_in(g, node, extra=None):
    """``((kind, config), reason)`` of a kind standing in for a node without one under ``unknown_ops="approx"``,
    through the torch.fx reader's own stand-ins (``extract``: same kinds, same FLOPs), or None. A MatMul of two
    activations: a ``linear``; an Einsum of two activations (batch first): a ``linear`` of the same FLOPs; of three: its two
    pairwise contractions left to right (``([(suffix, (kind, config), reads_input)], reason)``, a list of
    layers); a 2-D ConvTranspose: the stride-1 conv of the same kernel; an InstanceNormalization: the batch
    norm of the same sizes; a bidirectional LSTM: an lstm per direction and layer and their cats
    (``bidirectional_layers``; ``extra``: the node's pattern information, a stack's ``num_layers``)."""
    op, a = node.op_type, _attrs(node)
    if op == "MatMul":
        x, w = node.input[0], node.input[1]
        if g.is_const(x) or g.is_const(w):
            return None
        xs, ys = g.per_sample(x), g.per_sample(node.output[0])
        if not xs or not ys or len(g.shape(w)) < 2:
            return None
        return matmul_stand_in(xs[-1], ys, "MatMul(of two activations)")
    if op == "Einsum" and len(node.input) in (2, 3) and not any(g.is_const(i) for i in node.input):
        # batch first: every operand and the result as (1, *per sample); the batch letter is never summed over
        args = (_decode(a.get("equation", "")), [[1, *g.per_sample(i)] for i in node.input],
                [1, *g.per_sample(node.output[0])])
        # three: its two pairwise contractions, left to right (a list of layers; see ``layers_from_onnx``)
        return einsum_stand_in(*args) if len(node.input) == 2 else einsum_chain_stand_in(*args)
    if op == "InstanceNormalization":
        return instance_norm_stand_in(g.per_sample(node.input[0]), "InstanceNormalization")
    if op == "LSTM" and _decode(a.get("direction", "forward")) == "bidirectional":  # as torch.fx's stand-in for it
        sizes = _recurrent_sizes(g, node, a, "bidirectional")
        if sizes is None:
            return None
        return (bidirectional_layers("lstm", *sizes, int((extra or {}).get("num_layers", 1))),
                "LSTM(bidirectional) has no kind: estimated as one lstm layer per direction and layer, and the cat of "
                "the two directions")
    if op == "ConvTranspose" and g.is_const(node.input[1]):
        ws, xs = g.shape(node.input[1]), g.per_sample(node.input[0])  # W: [C_in, C_out / group, kH, kW]
        k = ws[2:] if len(ws) == 4 else []
        if len(xs) != 3 or len(set(k)) != 1 or any(int(v) != 1 for v in a.get("dilations", [1, 1])):
            return None
        group = int(a.get("group", 1))
        return transposed_conv_stand_in("conv2d", xs[0], ws[1] * group, k[0], group,
                                        len(node.input) > 2 and bool(node.input[2]), xs[1:], "ConvTranspose")
    return None


def _clip(g, node, a):
    if len(node.input) > 1:  # opset >= 11: bounds are inputs
        lo = g.scalar(node.input[1]) if node.input[1] else float("-inf")
        hi = g.scalar(node.input[2]) if len(node.input) > 2 and node.input[2] else float("inf")
    else:
        lo, hi = a.get("min", float("-inf")), a.get("max", float("inf"))
    if lo == 0.0 and hi == 6.0:  # what nn.ReLU6 exports as (x.clamp(0, 6) too: the graph cannot tell them apart)
        return "relu6"
    if lo == 0.0 and hi == float("inf"):
        return "relu"
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and lo == lo and hi == hi and lo <= hi:
        return "clamp"  # other number bounds: torch.clamp's, whose backward is not the activations'
    return None


def _node_layer(g, node, extra, unsupported):
    """(kind, config) for one node, None when it is free or unsupported (recorded in ``unsupported``)."""
    op, a = node.op_type, _attrs(node)
    acts = g.activations(node)
    first = acts[0] if acts else node.input[0]
    if "gelu_of" in extra:
        return "gelu", {"numel": _prod(g.per_sample(extra["gelu_of"]))}
    if "silu_of" in extra:
        return "silu", {"numel": _prod(g.per_sample(extra["silu_of"]))}
    if "group_norm" in extra:
        return "groupnorm", extra["group_norm"]
    if "attention" in extra:
        return "sdpa", extra["attention"]
    if "attention_refused" in extra:
        unsupported.append(f"Attention({extra['attention_refused']})")
        return None
    if "mha" in extra:
        return "mha", extra["mha"]
    if op in _ALWAYS_FREE:
        return None
    if op == "Conv":
        return _conv(g, node, a, unsupported)
    if op in ("Gemm", "MatMul"):
        return _linear(g, node, a, extra, unsupported)
    if op in ("MaxPool", "AveragePool"):
        return _pool(g, node, a, unsupported)
    if op == "ConvTranspose":
        return _deconv(g, node, a, unsupported)
    if op == "Pad":
        return _pad(g, node, a, unsupported)
    if op == "Resize":
        return _resize(g, node, a, unsupported)
    if op in ("ReduceSum", "ReduceMean", "ReduceMax"):
        return _reduce(g, node, a, unsupported)
    if op == "GlobalMaxPool":  # as torch.fx reads nn.AdaptiveMaxPool2d(1) / nn.AdaptiveMaxPool1d(1)
        return _adaptive_max_layer(1, False, g.per_sample(node.input[0]), unsupported, op)
    if op == "GlobalAveragePool":  # as nn.AdaptiveAvgPool2d(1) / nn.AdaptiveAvgPool1d(1)
        xs = g.per_sample(node.input[0])
        if len(xs) == 2:
            return "adaptive_avgpool1d", {"channels": xs[0], "length": xs[1], "out_size": 1}
        if len(xs) != 3:
            unsupported.append(f"{op}({len(xs) - 1}-D)")
            return None
        return "adaptive_avgpool2d", {"channels": xs[0], "height": xs[1], "width": xs[2], "out_size": 1}
    if op == "BatchNormalization":  # as nn.BatchNorm2d over [C, H, W]; nn.BatchNorm1d over [C, L] or [C]
        xs = g.per_sample(node.input[0])
        if len(xs) == 3:
            return "batchnorm2d", {"channels": xs[0], "height": xs[1], "width": xs[2]}
        if len(xs) in (1, 2):
            return "batchnorm1d", {"channels": xs[0], "length": xs[1] if len(xs) == 2 else 1}
        unsupported.append(f"BatchNormalization(of {len(xs)} axes per sample)")
        return None
    if op == "LayerNormalization":  # over the axes from ``axis`` on (the batch first): the last len(xs) + 1 - axis
        xs = g.per_sample(node.input[0])
        axis = int(a.get("axis", -1))
        axis = axis + len(xs) + 1 if axis < 0 else axis
        return layernorm_layer(len(xs) + 1 - axis, xs, 0, unsupported, "LayerNormalization")
    if op in _SIMPLE:
        if op == "Gelu" and _decode(a.get("approximate", "none")) != "none":
            unsupported.append("Gelu(approximate=tanh)")
            return None
        return _SIMPLE[op], {"numel": _prod(g.per_sample(first))}
    if op == "Clip":
        kind = _clip(g, node, a)
        if kind is None:
            unsupported.append("Clip(bounds that are not ordered numbers)")
            return None
        return kind, {"numel": _prod(g.per_sample(first))}
    if op == "PRelu":  # torch's nn.PReLU: a slope per channel ([C, 1, 1] or [C]) or one for all ([1])
        xs, slope = g.per_sample(first), g.shapes.get(node.input[1]) if len(node.input) > 1 else None
        n = _prod(slope) if slope is not None and g.is_const(node.input[1]) else None
        if not xs or n not in (1, xs[0]) or n != 1 and any(int(d) != 1 for d in slope[1:]):
            unsupported.append("PRelu(its slopes not one, nor one per channel)")
            return None
        return "prelu", {"channels": xs[0], "spatial": _prod(xs[1:]), "shared": int(n == 1 and xs[0] != 1)}
    if op == "Dropout":
        if len(node.input) > 1 and node.input[1]:
            p = g.scalar(node.input[1])
            if p is None:
                unsupported.append("Dropout(non-constant ratio)")
                return None
        else:
            p = float(a.get("ratio", 0.5))
        return "dropout", {"numel": _prod(g.per_sample(first)), "p": p}
    if op in _RESHAPES:
        return "flatten", {"numel": _prod(g.per_sample(first))}
    if op == "Transpose":  # as torch's transpose / permute (layout plumbing around an LSTM was absorbed above)
        perm = a.get("perm")
        if perm is not None and int(perm[0]) != 0 and not extra.get("rnn_permute"):
            unsupported.append("Transpose(moving the batch axis)")
            return None
        return "permute", {"numel": _prod(g.per_sample(first))}
    if op == "Split":  # as torch's chunk / split: views, free
        return None
    if op == "Concat":  # of activations (one computed from constants alone is folded before this), as torch.cat
        rank = len(g.per_sample(node.output[0])) + 1
        if int(a.get("axis", 0)) % rank == 0:
            unsupported.append("Concat(along the batch)")
            return None
        return "cat", {"numel": _prod(g.per_sample(node.output[0])), "parts": len([i for i in node.input if i])}
    if op in ("Add", "Sum") and len(node.input) == 2:
        return "add", {"numel": _prod(g.per_sample(node.output[0]))}
    if op == "Sub" and len(node.input) == 2:  # as torch's x - y: of two activations sub; x - c add; c - x scale
        if len(acts) == 2:
            return "sub", {"numel": _prod(g.per_sample(node.output[0]))}
        if len(acts) == 1 and g.scalar(_other(node, acts[0])) is not None:
            return ("add" if acts[0] == node.input[0] else "scale"), {"numel": _prod(g.per_sample(node.output[0]))}
        unsupported.append("Sub(of a constant tensor)")
        return None
    if op == "Expand" and acts == [node.input[0]]:  # as torch's y.expand_as(x): a view, its product a broadcast one
        return None
    if op == "Mul" and len(node.input) == 2:  # as torch's x * y: of two activations (one smaller: a gate), or a scale
        ys = g.per_sample(node.output[0])
        if len(acts) == 2:
            return "mul", {"numel": _prod(ys),
                           "broadcast": int(any(_prod(g.per_sample(_unexpanded(g, i))) < _prod(ys) for i in acts))}
        other = _other(node, first)
        if len(acts) == 1 and g.scalar(other) is not None:
            return "scale", {"numel": _prod(ys)}
        if len(acts) == 1:  # by a parameter or constant tensor (ConvNeXt's layer scale gamma * x), as torch.fx reads
            return "mul", {"numel": _prod(ys), "broadcast": 1}  # x * param: a product broadcast over the batch at least
        unsupported.append("Mul(of constants)")
        return None
    if op == "Div" and len(node.input) == 2 and acts == [node.input[0]] and g.scalar(node.input[1]) is not None:
        return "scale", {"numel": _prod(g.per_sample(node.output[0]))}  # as torch's x / number
    if op == "Neg" and acts:
        return "scale", {"numel": _prod(g.per_sample(node.output[0]))}  # as torch's -x
    if op == "Gather":
        data, idx = node.input[0], node.input[1]
        if g.is_const(data) and not g.is_const(idx):
            ws = g.shape(data)
            if len(ws) != 2 or int(a.get("axis", 0)) != 0:
                unsupported.append("Gather(not an embedding lookup)")
                return None
            return "embedding", {"num_embeddings": ws[0], "embedding_dim": ws[1],
                                 "seq_len": _prod(g.per_sample(idx)), "positional": int(extra.get("positional", 0))}
        if g.is_const(idx):
            return None
        unsupported.append("Gather(with computed indices)")
        return None
    if op == "Slice" and all(g.is_const(i) for i in node.input[1:] if i):
        return None
    if op == "Softmax":  # mid-graph (a trailing one is the head's loss): over the last axis only
        xs = g.per_sample(first)
        rank = len(xs) + 1
        if not xs or int(a.get("axis", -1 if g.opset >= 13 else 1)) % rank != rank - 1:
            unsupported.append("Softmax(not over the last axis)")
            return None
        return "softmax", {"numel": _prod(xs), "last_dim": xs[-1]}
    if op in _RECURRENT:  # as nn.LSTM / nn.GRU (one direction) returning the whole output sequence
        direction = _decode(a.get("direction", "forward"))
        if direction != "forward" and not (op == "GRU" and direction == "bidirectional"):
            unsupported.append(f"{op}(direction={direction})")
            return None
        if op == "GRU" and not int(a.get("linear_before_reset", 0)):
            # ONNX's default applies the reset gate before the recurrent matmul; PyTorch's GRU (the probes') after
            unsupported.append("GRU(linear_before_reset=0)")
            return None
        sizes = _recurrent_sizes(g, node, a, direction)
        if sizes is None:
            unsupported.append(f"{op}(input or weights not of a sequence's shapes)")
            return None
        input_size, hidden, seq_len = sizes
        if direction == "bidirectional":  # as torch.fx reads a bidirectional nn.GRU: its directions and their cats
            return bidirectional_layers("gru", input_size, hidden, seq_len, int(extra.get("num_layers", 1)))
        return op.lower(), {"input_size": input_size, "hidden_size": hidden, "seq_len": seq_len,
                            "num_layers": int(extra.get("num_layers", 1))}
    unsupported.append(op if node.domain in ("", "ai.onnx") else f"{node.domain}.{op}")
    return None


def _recurrent_sizes(g, node, a, direction):
    """``(input_size, hidden_size, seq_len)`` of an ONNX ``LSTM``/``GRU`` whose input and weights have a sequence's
    shapes (weights ``[num_directions, gates x hidden, input_size]``; input ``[seq, batch, input]``, or ``[batch,
    seq, input]`` at layout 1) for ``direction``, else None."""
    ws = g.shape(node.input[1])
    xs = g.shape(node.input[0])
    gates = 4 if node.op_type == "LSTM" else 3
    hidden = int(a.get("hidden_size", ws[1] // gates if len(ws) == 3 else 0))
    if len(xs) != 3 or len(ws) != 3 or ws[1] != gates * hidden or hidden < 1 or xs[2] != ws[2] \
            or ws[0] != (2 if direction == "bidirectional" else 1):
        return None
    return ws[2], hidden, xs[1] if int(a.get("layout", 0)) else xs[0]


#: ONNX operators doing dense linear algebra or recurrences: never approximated as an elementwise op
_COMPUTE_BOUND_OPS = {"Conv", "ConvTranspose", "ConvInteger", "Gemm", "MatMul", "MatMulInteger", "QLinearConv",
                      "QLinearMatMul", "LSTM", "GRU", "RNN", "Einsum", "Attention", "MultiHeadAttention"}


#: ONNX tensor types of parameters (float, float16, double, bfloat16); an int64 initializer is a shape or index
_FLOAT_TYPES = {1, 10, 11, 16}
#: inputs of a node that are buffers, not parameters (a batch norm's running mean and variance)
_BUFFER_INPUTS = {"BatchNormalization": (3, 4)}


def _param_sources(g, name, depth=0, scalar_ok=False):
    """The float initializers a constant input ``name`` is read from: itself, or those of the constant nodes
    computing it (a weight transposed or cast in the graph); empty for an activation or a shape, and for a single
    number (an attention's scale, a norm's epsilon folded into the graph: constants, not weights) unless
    ``scalar_ok`` (a PReLU's one shared slope)."""
    t = g.initializers.get(name)
    if t is not None:
        return [name] if t.data_type in _FLOAT_TYPES and (scalar_ok or _prod(t.dims) > 1) else []
    node = g.producer.get(name)
    if node is None or depth > 8 or name not in g.consts or node.op_type in ("Shape", "Size"):
        return []
    return [s for i in node.input if i for s in _param_sources(g, i, depth + 1, scalar_ok)]


def _layer_params(g, node, owned):
    """The names of the parameter initializers of the layer ``node`` anchors (its own inputs' and those of the
    nodes folded into it: an MHA's projections, a bias Add, a stacked LSTM's layers), each once, in order."""
    out = []
    for n in [node] + owned.get(id(node), []):
        skip = _BUFFER_INPUTS.get(n.op_type, ())
        for i, name in enumerate(n.input):
            if name and i not in skip:
                out += [s for s in _param_sources(g, name, scalar_ok=n.op_type == "PRelu" and i == 1) if s not in out]
    return out


def _trained_part(g, node, owned, trainable, seen, where):
    """``(trained, total)`` parameter initializers of the layer ``node`` anchors under the ``trainable`` patterns
    (their names added to ``seen``); UsageError where its weights are not named initializers."""
    from .trainable import matches

    names = _layer_params(g, node, owned)
    if not names:
        raise UsageError(f"{where}: its weights are not initializers of the file (Constant nodes?): --trainable "
                         "cannot choose what it trains; export the model with its parameters as initializers")
    seen.extend(n for n in names if n not in seen)
    return sum(any(matches(n, p) for p in trainable) for n in names), len(names)


def layers_from_onnx(path, input_shape=None, unknown_ops="error", trainable=None):
    """The ``ModelLayers`` of the ONNX model in ``path``.

    ``input_shape`` (per sample) is needed only when the file's input has dynamic per-sample axes.
    Raises ``NotFoundError`` (no file), ``FormatError`` (not ONNX), ``UnsupportedOperatorError``
    (naming every operator without a layer kind; with ``unknown_ops="approx"`` only those that are
    not elementwise: the others become generic ``elementwise`` layers marked ``approx``) or ``ModelError``.

    ``trainable``: parameter name patterns (``thor_sdk.layers.trainable``) over the file's initializer names
    (torch.onnx names them as the module's parameters, ``classifier.1.weight``): a layer none of whose weights
    match is frozen (``frozen`` 1, and, like a frozen layer in torch, it needs no gradient: a frozen backbone's
    layers are ``input`` layers); one trained in part is refused, or estimated as trained under approx. A batch
    norm's running statistics are buffers, not weights. None: every layer with weights trains (an ONNX file
    says nothing of ``requires_grad``).
    """
    from . import ModelLayers
    from .kinds import FREEZABLE
    from .trainable import check_patterns, trained_in_part, trained_names

    trainable = check_patterns(trainable)
    source = os.path.basename(path)
    model = _load(path)
    per_sample, dtype, batch_param = _fix_input_shape(model, source, input_shape)
    g = _Graph(model, source, batch_param, os.path.dirname(os.path.abspath(path)))
    owned = {}
    absorbed, info = _find_patterns(g, owned)
    param_names = []  # every parameter initializer of a layer, for the patterns' check

    layers, unsupported, unknown = [], [], []
    needs_grad = {}  # tensor -> whether it depends on a layer with parameters
    for k, node in enumerate(g.nodes):
        upstream = any(needs_grad.get(i, False) for i in node.input if i)
        outs = [o for o in node.output if o]
        extra = info.get(id(node), {})
        if all(o in g.consts for o in outs) or id(node) in absorbed:
            for o in outs:
                needs_grad[o] = upstream
            continue
        if node.op_type in _CONTROL_FLOW:
            unsupported.append(node.op_type)
            continue
        n_unsupported = len(unsupported)
        approx = None
        try:
            got = _node_layer(g, node, extra, unsupported)
            if len(unsupported) > n_unsupported and unknown_ops == "approx" and outs:
                stand_in = _stand_in(g, node, extra)
                if stand_in is not None:
                    got, approx = stand_in
                    del unsupported[n_unsupported:]
            if (got is None and len(unsupported) > n_unsupported and unknown_ops == "approx"
                    and node.op_type not in _COMPUTE_BOUND_OPS and outs):
                got = ("elementwise", {"numel": _prod(g.per_sample(outs[0]))})
                approx = f"{unsupported[-1]} has no kind: estimated as a generic elementwise op"
                del unsupported[n_unsupported:]
        except _UnknownShape as e:
            unknown.append(f"{e.tensor} (input of {node.op_type} {node.name or k})")
            got = None
        # a MatMul or Einsum stand-in is a product of activations: no parameters of its own
        has_params = (isinstance(got, tuple) and got[0] in _PARAM_KINDS
                      or isinstance(got, list) and any(part[0] in _PARAM_KINDS for _, part, _ in got)) \
            and not (node.op_type in ("MatMul", "Einsum") and approx)
        name = node.name or f"{node.op_type.lower()}_{k}"
        frozen = False
        if trainable and has_params:
            trained, total = _trained_part(g, node, owned, trainable, param_names, f"{source}: {name} ({node.op_type})")
            frozen = trained == 0
            if 0 < trained < total:
                why = trained_in_part(trained, total, "parameter initializers")
                if unknown_ops == "approx":
                    approx = approx or f"{node.op_type}: {why}"
                else:
                    unsupported.append(f"{name} ({node.op_type}: {why}; --unknown-ops approx estimates it so)")
        for o in outs:
            needs_grad[o] = upstream or (has_params and not frozen)
        if got is None:
            continue
        if frozen:  # every part with weights, a bidirectional GRU's both directions
            got = [(sfx, (kd, dict(c, frozen=1) if kd in FREEZABLE else c), r) for sfx, (kd, c), r in got] \
                if isinstance(got, list) else (got[0], dict(got[1], frozen=1) if got[0] in FREEZABLE else got[1])
        if isinstance(got, list):  # several layers: a stand-in's (an Einsum of three), a bidirectional GRU's
            add_stand_in_layers(layers, name, got, approx, upstream, node.op_type)
            continue
        add_layer(layers, name, got, upstream, node.op_type, approx)
    if trainable:
        trained_names(param_names, trainable, source)  # a pattern matching no weight of any layer is an error
    refuse_unsupported(unsupported, source, unknown_ops)
    if unknown:
        raise ModelError(f"{source}: ONNX shape inference left these shapes unknown: {', '.join(unknown[:5])}"
                         f"{' ...' if len(unknown) > 5 else ''}; export with fixed shapes")
    stem = source[:-5] if source.lower().endswith(".onnx") else source
    return ModelLayers(stem, per_sample, dtype, finish_layers(layers, source))
