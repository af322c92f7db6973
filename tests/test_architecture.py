"""The house rules of the tree: packages in layers (so no import cycle between them), a one-line docstring per file.

Every module under ``thor_sdk/``, ``exporters/`` (``thor_sdk.exporters``) and ``models/``
(``thor_sdk.models``) is parsed with ``ast``; every import of a ``thor_sdk`` module is collected,
at module level and inside functions alike (a function-level import is a dependency all the same).

The rule, bottom to top:

- **Base modules** (``BASE``) import nothing of thor_sdk but other base modules; every package may
  use them. They are the error tree, the option bounds, the extras map, the strict file reader/writer,
  the layer kinds' table and the measurement protocol: plain Python that everything shares.
- Every other module belongs to its package (``thor_sdk.X``; a top-level module such as
  ``thor_sdk.api`` is its own unit), and the packages stand in the layers of ``LAYERS``: a module
  imports only its own package, base modules, and packages of a *lower* layer. Two packages of the
  same layer do not import each other.

So the package graph has no cycle; the test also looks for one directly and prints it.
"""

import ast
import os
from collections import defaultdict

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: package name -> folder (pyproject's package-dir)
ROOTS = {"thor_sdk": "thor_sdk", "thor_sdk.exporters": "exporters", "thor_sdk.models": "models"}

#: modules that stand alone: each imports no thor_sdk module but these
BASE = ("thor_sdk", "thor_sdk.errors", "thor_sdk.bounds", "thor_sdk.extras", "thor_sdk.store.files",
        "thor_sdk.layers.kinds", "thor_sdk.harness.protocol")

#: bottom first; a unit imports only units of lower layers (and its own modules, and BASE)
LAYERS = [
    ("thor_sdk.models", "thor_sdk.meters", "thor_sdk.transports"),  # networks; energy meters; device links
    ("thor_sdk.runtime",),      # the stdlib runtime an app ships (uses the kinds' table)
    ("thor_sdk.layers",),       # model -> layer list
    ("thor_sdk.probes",),       # probe models of a layer
    ("thor_sdk.store",),        # the campaign database
    ("thor_sdk.baselines",),    # FLOPs, TDP, STEP, PRE
    ("thor_sdk.fitting",),      # per-kind GPs, the estimator writer
    ("thor_sdk.exporters",),    # training steps as files; bundles written and verified
    ("thor_sdk.harness",),      # trainers, running a bundle, the results format
    ("thor_sdk.devices",),      # where steps run (host, remote devices through transports)
    ("thor_sdk.campaign",),     # campaigns that measure; results ingest
    ("thor_sdk.check", "thor_sdk.power"),  # build-time budgets; power-aware training
    ("thor_sdk.api",),          # the library API
    ("thor_sdk.evaluate", "thor_sdk.prune"),  # reports and plans built on the API
    ("thor_sdk.cli",),          # the command line
]


def _modules():
    """{module name: (path, is_package)} of every .py file of the three roots."""
    out = {}
    for pkg, folder in ROOTS.items():
        base = os.path.join(REPO, folder)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            rel = os.path.relpath(dirpath, base)
            parts = [] if rel == "." else rel.split(os.sep)
            if pkg == "thor_sdk" and parts and parts[0] in ("exporters", "models"):
                continue
            for f in sorted(filenames):
                if f.endswith(".py"):
                    name = ".".join([pkg] + parts + ([] if f == "__init__.py" else [f[:-3]]))
                    out[name] = (os.path.join(dirpath, f), f == "__init__.py")
    return out


def _imports(name, path, is_package, modules):
    """(imported thor_sdk module, line) of every import in the file, module- and function-level."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    package = name if is_package else name.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            # ``from pkg import sub`` imports the submodule; ``from mod import name`` the module
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod for a in node.names]
        else:
            continue
        for t in targets:
            if t == "thor_sdk" or t.startswith("thor_sdk."):
                yield t, node.lineno


def _unit(module):
    """The node a module counts as: a base module itself, else its package (thor_sdk.X)."""
    for b in BASE:
        if module == b:
            return b
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else parts[0]


def _edges():
    """{(from unit, to unit): ["module:line", ...]} across units."""
    modules = _modules()
    edges = defaultdict(list)
    for name, (path, is_package) in modules.items():
        for target, line in _imports(name, path, is_package, modules):
            if target not in modules and target.rsplit(".", 1)[0] in modules:  # from mod import obj
                target = target.rsplit(".", 1)[0]
            src, dst = _unit(name), _unit(target)
            if src != dst:
                edges[(src, dst)].append(f"{os.path.relpath(path, REPO)}:{line}")
    return edges


def _find_cycle(graph):
    """One cycle of ``graph`` ({node: set(nodes)}) as a list of nodes, or None."""
    state, stack = {}, []

    def visit(v):
        state[v] = "open"
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == "open":
                return stack[stack.index(w):] + [w]
            if w not in state:
                found = visit(w)
                if found:
                    return found
        stack.pop()
        state[v] = "done"
        return None

    for v in sorted(graph):
        if v not in state:
            found = visit(v)
            if found:
                return found
    return None


def test_every_module_belongs_to_a_layer_or_is_a_base_module():
    placed = {u for layer in LAYERS for u in layer} | set(BASE)
    units = {_unit(m) for m in _modules()}
    assert units - placed == set(), f"place these in LAYERS or BASE of {__file__}: {sorted(units - placed)}"
    assert placed - units == set(), f"no such modules: {sorted(placed - units)}"


def test_no_import_cycle_between_packages():
    edges = _edges()
    graph = defaultdict(set)
    for src, dst in edges:
        graph[src].add(dst)
    cycle = _find_cycle(graph)
    if cycle:
        lines = [f"  {a} -> {b}  ({', '.join(edges[(a, b)][:3])})" for a, b in zip(cycle, cycle[1:])]
        raise AssertionError("import cycle between packages:\n" + "\n".join(lines))


def test_packages_import_only_lower_layers_and_base_modules():
    rank = {u: i for i, layer in enumerate(LAYERS) for u in layer}
    bad = []
    for (src, dst), where in sorted(_edges().items()):
        if dst in BASE:
            ok = True
        elif src in BASE:
            ok = False  # a base module imports only base modules
        else:
            ok = rank.get(dst, 99) < rank.get(src, -1)
        if not ok:
            bad.append(f"  {src} -> {dst}  ({', '.join(where[:3])})")
    assert not bad, "imports against the layering (tests/test_architecture.py's LAYERS and BASE):\n" + "\n".join(bad)


def test_every_file_opens_with_one_line_saying_what_it_owns():
    bad = []
    for name, (path, _pkg) in sorted(_modules().items()):
        doc = ast.get_docstring(ast.parse(open(path, encoding="utf-8").read(), path), clean=False)
        lines = (doc or "").split("\n")
        if not lines[0].strip():
            bad.append(f"  {os.path.relpath(path, REPO)}: no docstring, or it does not start on its first line")
        elif len(lines) > 1 and lines[1].strip():
            bad.append(f"  {os.path.relpath(path, REPO)}: the docstring's first line runs on (one line, then a blank)")
    assert not bad, "every file opens with one line saying what it owns:\n" + "\n".join(bad)


def test_the_rule_catches_a_cycle():
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": {"c"}}) is None
