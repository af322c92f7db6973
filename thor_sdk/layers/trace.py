"""torch.fx tracing of a module: symbolic, or with the sizes of an example input where symbolic tracing fails."""

import contextlib
import operator

#: ``node.meta`` key of the nodes traced inside ``torch.utils.checkpoint``: their forward runs again in backward
RECOMPUTED = "thor_recomputed"
#: how a recomputed layer's ``approx`` reason begins (after a stand-in's own reason, where it is one too)
RECOMPUTE_REASON = "its forward runs again in backward (torch.utils.checkpoint)"


class ModelRunError(Exception):
    """The module's own code failed on the example input while it was traced with concrete sizes (the input's
    shape does not suit it), as opposed to code that fx cannot trace."""


def trace(module, leaves, example=None):
    """``module`` as a torch.fx ``GraphModule``, modules of the types ``leaves`` kept whole, the arguments after the
    input that have a default at their defaults (``defaults``).

    Without ``example``: fx's symbolic trace (sizes read off a tensor are nodes of the graph). With ``example``
    (one input tensor): the module runs on it as it is traced, and a tensor's sizes (``x.size()``, ``x.shape``,
    ``x.dim()``, ``len(x)``, iterating over it) are the example's numbers, so code that needs them as Python
    numbers traces (slicing a buffer by ``T``, ``range(x.size(1))``, ``B, T, C = x.shape`` used as sizes). That
    graph holds for inputs of the example's shape only; ``layers_from_module`` traces at its two batch sizes and
    checks that the graphs agree. The module is traced as it is (its training flag decides its branches) on a
    copy, so running it (a batch norm's running statistics) leaves the caller's untouched. Raises fx's own
    exception for what still cannot be traced (control flow on a tensor's values) and ``ModelRunError`` where
    the module's code fails on the example."""
    from torch import fx

    class _Tracer(fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return isinstance(m, leaves) or super().is_leaf_module(m, qualname)

    if example is None:
        tracer = _Tracer()
        with checkpoints_marked(module, tracer):
            return fx.GraphModule(module, tracer.trace(module, concrete_args=defaults(module)))
    import copy

    import torch

    root = copy.deepcopy(module)
    values = {}  # node -> its value on the example
    inputs = [example]

    def value_of(a):
        return values[a.node] if isinstance(a, fx.Proxy) else a

    class _Sized(fx.Proxy):
        """A proxy whose tensor sizes are the example's numbers."""

        def _value(self):
            return values.get(self.node)

        def size(self, *args, **kwargs):
            v = self._value()
            return v.size(*args, **kwargs) if isinstance(v, torch.Tensor) else self.__getattr__("size")(*args, **kwargs)

        def dim(self):
            v = self._value()
            return v.dim() if isinstance(v, torch.Tensor) else self.__getattr__("dim")()

        @property
        def shape(self):
            v = self._value()
            return v.shape if isinstance(v, torch.Tensor) else self.__getattr__("shape")

        @property
        def ndim(self):
            v = self._value()
            return v.dim() if isinstance(v, torch.Tensor) else self.__getattr__("ndim")

        def __len__(self):
            v = self._value()
            if isinstance(v, (torch.Tensor, tuple, list)):
                return len(v)
            return super().__len__()

        def __iter__(self):
            v = self._value()
            if isinstance(v, (tuple, list)) or isinstance(v, torch.Tensor) and v.dim() > 0:
                return iter([self[i] for i in range(len(v))])
            return super().__iter__()

    running = []  # non-empty while the tracer runs an operator on the example's values

    class _SizedTracer(_Tracer):
        def proxy(self, node):
            return _Sized(node, self)

        def call_module(self, m, forward, args, kwargs):  # fx patches every module's call while it traces
            return forward(*args, **kwargs) if running else super().call_module(m, forward, args, kwargs)

        def getattr(self, attr, attr_val, parameter_proxy_cache):
            return attr_val if running else super().getattr(attr, attr_val, parameter_proxy_cache)

        def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None, proxy_factory_fn=None):
            proxy = super().create_proxy(kind, target, args, kwargs, name, type_expr, proxy_factory_fn)
            a = fx.node.map_aggregate(args, value_of)
            k = fx.node.map_aggregate(kwargs, value_of)
            running.append(proxy)
            try:
                if kind == "placeholder":  # the example, then each further argument's default
                    value = inputs.pop(0) if inputs else (a[0] if a else None)
                elif kind == "get_attr":
                    value = operator.attrgetter(target)(root)
                elif kind == "call_function":
                    value = target(*a, **k)
                elif kind == "call_method":
                    value = getattr(a[0], target)(*a[1:], **k)
                elif kind == "call_module":
                    value = root.get_submodule(target)(*a, **k)
                else:
                    value = None
            except Exception as e:
                raise ModelRunError(f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}") from e
            finally:
                running.pop()
            values[proxy.node] = value
            return proxy

    tracer = _SizedTracer()
    with torch.no_grad(), checkpoints_marked(root, tracer):
        graph = tracer.trace(root, concrete_args=defaults(root))
    return fx.GraphModule(root, graph)


@contextlib.contextmanager
def checkpoints_marked(module, tracer):
    """While ``tracer`` traces ``module``: ``torch.utils.checkpoint.checkpoint(fn, *args)`` traces ``fn(*args)``
    and marks the nodes it adds ``node.meta[RECOMPUTED]`` (in training their forward runs again in backward), and
    ``checkpoint_sequential`` does so for each segment but its last (which torch runs without a checkpoint).
    Both are replaced in ``torch.utils.checkpoint`` and wherever a forward of ``module``'s modules names them
    (``from torch.utils.checkpoint import checkpoint``), and put back after; fx traces straight through them
    otherwise, and the recomputed forward would be missing from the layer list with no sign of it."""
    import torch.utils.checkpoint as cp

    def marked(function, *args, **kwargs):
        for key in ("use_reentrant", "preserve_rng_state", "context_fn", "determinism_check", "debug",
                    "early_stop"):  # how torch checkpoints, not what the function computes
            kwargs.pop(key, None)
        before = set(tracer.graph.nodes)
        out = function(*args, **kwargs)
        for node in tracer.graph.nodes:
            if node not in before:
                node.meta[RECOMPUTED] = True
        return out

    def marked_sequential(functions, segments, input, use_reentrant=None, **kwargs):
        import torch

        if isinstance(functions, torch.nn.Sequential):
            functions = list(functions.children())

        def run(start, end):
            def forward(x):
                for j in range(start, end + 1):
                    x = functions[j](x)
                return x
            return forward

        size, end = len(functions) // segments, -1
        for start in range(0, size * (segments - 1), size):  # as torch's checkpoint_sequential splits them
            end = start + size - 1
            input = marked(run(start, end), input)
        return run(end + 1, len(functions) - 1)(input)

    swap = {cp.checkpoint: marked, cp.checkpoint_sequential: marked_sequential}
    patched = []  # (namespace, name, original)
    spaces = [vars(cp)] + [getattr(type(m).forward, "__globals__", None) for m in module.modules()]
    seen = set()
    try:
        for space in spaces:
            if not isinstance(space, dict) or id(space) in seen:
                continue
            seen.add(id(space))
            for name, value in list(space.items()):
                try:
                    new = swap.get(value)
                except TypeError:  # an unhashable global
                    continue
                if new is not None:
                    patched.append((space, name, value))
                    space[name] = new
        yield
    finally:
        for space, name, value in reversed(patched):
            space[name] = value


def defaults(module):
    """The arguments of ``module``'s forward after its input that have a default, at their defaults: traced as
    those values (``forward(self, idx, targets=None)``: ``if targets is not None`` takes the branch a call with
    one input takes; fx adds a check that the argument is None, a node of no cost)."""
    import inspect

    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    plain = (type(None), bool, int, float, str)  # a tensor or other object as a default stays an argument of the graph
    out = {p.name: p.default for p in params[1:] if p.kind in kinds and type(p.default) in plain}
    return out or None


def same_graph(a, b):
    """Whether two traced graphs run the same operators in the same order (the constants in their arguments,
    such as a batch size, may differ): then a node of one stands for the node of the other at its place."""
    na, nb = list(a.graph.nodes), list(b.graph.nodes)
    return len(na) == len(nb) and all(x.op == y.op and x.target == y.target and x.name == y.name
                                      and [i.name for i in x.all_input_nodes] == [i.name for i in y.all_input_nodes]
                                      for x, y in zip(na, nb))
