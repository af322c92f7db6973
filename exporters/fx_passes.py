"""Small FX graph passes that make a traced training step cheaper to translate to ONNX.

The traced step has only a few in-place ops (BatchNorm's running statistics written into fresh
clones of the buffers) and many identity ops (detach, alias). Rewriting those here avoids
torch's general functionalization re-trace, the slowest part of exporting a big network. Where a
graph has a mutation this pass does not understand, it says so and the caller falls back to
``torch.func.functionalize``.
"""

# identities that keep strides too (a clone may make a tensor contiguous for a later view, and the
# exporter re-runs the graph on fake tensors, so clones stay)
_IDENTITY_OPS = ("aten::detach", "aten::alias")
_VIEW_OPS = ("aten::view", "aten::_unsafe_view", "aten::reshape", "aten::permute", "aten::t", "aten::transpose",
             "aten::expand", "aten::slice", "aten::select", "aten::unsqueeze", "aten::squeeze", "aten::alias",
             "aten::detach", "aten::as_strided", "aten::diagonal", "aten::unfold", "aten::split",
             "aten::split_with_sizes", "aten::chunk", "aten::unbind", "aten::narrow", "aten::view_as")


def _schema(node):
    return getattr(node.target, "_schema", None) if node.op == "call_function" else None


def _op_name(node):
    s = _schema(node)
    return s.name if s is not None else ""


def _val(node):
    return node.meta.get("val") if hasattr(node, "meta") else None


def _functional_variant(node):
    """The out-of-place overload of an in-place op (``add_.Tensor`` -> ``add.Tensor``), or None."""
    import torch

    s = _schema(node)
    base, _, overload = str(node.target).rpartition(".")  # e.g. "aten.bernoulli_", "float"
    ns, _, name = base.partition(".")
    if ns != "aten" or not name.endswith("_"):
        return None
    special = {"bernoulli_.float": "bernoulli.p"}
    if f"{name}.{overload}" in special:
        fname, _, fov = special[f"{name}.{overload}"].partition(".")
    else:
        fname, fov = name[:-1], overload
    packet = getattr(torch.ops.aten, fname, None)
    op = getattr(packet, fov, None) if packet is not None else None
    if op is None or op._schema.is_mutable or len(op._schema.arguments) != len(s.arguments):
        return None
    return op


def functionalize_copies(gm):
    """Rewrite in-place ops into plain dataflow: ``copy_(dst, src)`` becomes ``src``, ``op_(dst, ...)``
    becomes ``op(dst, ...)``, and later readers of ``dst`` read the new value.

    Only the first argument may be mutated, it must be a tensor computed inside the graph (not a
    graph input) that no view reads, and copies must keep shape and dtype. Returns False, leaving
    the graph untouched, when any mutation breaks those rules -- the cases where this simple
    rewrite could be wrong; the caller then uses torch's functionalization.
    """
    graph = gm.graph
    nodes = list(graph.nodes)
    order = {n: i for i, n in enumerate(nodes)}
    plan = []
    for n in nodes:
        s = _schema(n)
        if s is None or not s.is_mutable:
            continue
        written = [i for i, a in enumerate(s.arguments) if a.alias_info is not None and a.alias_info.is_write]
        if written != [0] or n.kwargs.get("non_blocking"):
            return False
        dst = n.args[0]
        if getattr(dst, "op", None) != "call_function" or any(_op_name(u) in _VIEW_OPS for u in dst.users):
            return False
        if s.name == "aten::copy_":
            src = n.args[1]
            dv, sv = _val(dst), (_val(src) if hasattr(src, "op") else None)
            if dv is None or sv is None or tuple(dv.shape) != tuple(sv.shape) or dv.dtype != sv.dtype:
                return False
            plan.append((n, dst, src, None))
        else:
            op = _functional_variant(n)
            if op is None:
                return False
            plan.append((n, dst, None, op))
    for n, dst, src, op in plan:
        if src is None:
            kwargs = dict(n.kwargs)
            for a in _schema(n).arguments[len(n.args):]:  # defaults the trace left out (bernoulli_'s p=0.5)
                if a.name not in kwargs and a.has_default_value():
                    kwargs[a.name] = a.default_value
            with graph.inserting_before(n):
                src = graph.call_function(op, n.args, kwargs)
            src.meta = dict(n.meta)
            order[src] = order[n]
        pos = order[n]
        for u in list(dst.users):
            if u is not n and u is not src and order.get(u, len(nodes)) > pos:
                u.replace_input_with(dst, src)
        n.replace_all_uses_with(src)
        graph.erase_node(n)
    graph.eliminate_dead_code()
    return True


def drop_writes_into(gm, inputs):
    """Erase the ``copy_`` nodes torch's functionalization appends to write a mutated graph input back (an in-place
    first layer overwriting the data batch): an ONNX step has no in-place, reads its inputs and leaves them as they
    are. Only copies into ``inputs`` that nothing reads are erased. Returns how many."""
    import torch

    dropped = 0
    for n in list(gm.graph.nodes):
        if n.op == "call_function" and n.target is torch.ops.aten.copy_.default and n.args[0] in inputs \
                and not n.users:
            gm.graph.erase_node(n)
            dropped += 1
    if dropped:
        gm.graph.lint()
        gm.recompile()
    return dropped


def has_mutation(gm):
    return any((_schema(n) is not None and _schema(n).is_mutable) for n in gm.graph.nodes)


def remove_identities(gm):
    """Drop detach/alias nodes of a graph without mutations (they are identities there)."""
    if has_mutation(gm):
        return 0
    removed = 0
    for n in list(gm.graph.nodes):
        if _op_name(n) in _IDENTITY_OPS and n.args and hasattr(n.args[0], "op"):
            n.replace_all_uses_with(n.args[0])
            gm.graph.erase_node(n)
            removed += 1
    return removed


def distinct_outputs(gm, clone_op):
    """Make every graph output a distinct node that is not a graph input (ONNX needs distinct output
    values); inserts ``clone_op`` nodes (exported as Identity) where needed."""
    graph = gm.graph
    out_node = next(n for n in graph.nodes if n.op == "output")
    outs = list(out_node.args[0])
    seen = set()
    for i, o in enumerate(outs):
        if o.op == "placeholder" or o in seen:
            with graph.inserting_before(out_node):
                new = graph.call_function(clone_op, (o,))
            new.meta = dict(o.meta)
            outs[i] = new
        seen.add(outs[i])
    out_node.args = (tuple(outs),)
    return outs
