"""The package ships every folder it imports, the core install is light, and heavy imports stay lazy."""

import ast
import json
import pathlib
import re
import subprocess
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _package_dirs():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return cfg["packages"], cfg["package-dir"]


def test_every_package_folder_is_listed():
    packages, package_dir = _package_dirs()
    found = set()
    for base, root in (("thor_sdk", "thor_sdk"), ("thor_sdk.exporters", "exporters"), ("thor_sdk.models", "models")):
        for init in (ROOT / root).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / root)
            found.add(".".join([base, *rel.parts]) if rel.parts else base)
    assert found <= set(packages), f"missing from pyproject packages: {sorted(found - set(packages))}"
    assert package_dir["thor_sdk.exporters"] == "exporters" and package_dir["thor_sdk.models"] == "models"


def test_no_generic_top_level_modules_installed():
    code = "import importlib.util as u; print(u.find_spec('exporters'), u.find_spec('models'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/").stdout
    assert out.strip() == "None None"


def test_shipped_code_has_no_pickle():
    for root in ("thor_sdk", "exporters", "models"):
        for f in (ROOT / root).rglob("*.py"):
            text = f.read_text()
            for word in ("import pickle", "import joblib", "import dill", "cloudpickle", "shell=True", "os.system("):
                assert word not in text, f"{f}: {word}"


# ---- the light core install and its extras (issue 11, part 5) -------------------------------------------

HEAVY = ("torch", "onnx", "onnxruntime", "onnxscript", "onnx_ir", "coremltools", "numpy", "scipy", "sklearn",
         "pynvml", "matplotlib")
# Runs thor_sdk.cli.main.main(argv) with every HEAVY module unimportable (as in a core-only install); prints
# the heavy imports that were attempted, as one JSON line on stderr, after the command's own output.
BLOCKED_RUN = r"""
import importlib.abc, json, sys
HEAVY, tried = set(sys.argv[1].split(",")), []
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HEAVY:
            tried.append(name)
            raise ModuleNotFoundError(f"No module named {name!r} (blocked: core install)", name=name)
sys.meta_path.insert(0, Block())
from thor_sdk.cli.main import main
try:
    main(sys.argv[2:])
    code = 0
except SystemExit as e:
    code = e.code
sys.stdout.flush()
print("BLOCKED-TRIED " + json.dumps(sorted(set(tried))), file=sys.stderr)
sys.exit(code)
"""
VECTORS = ROOT / "tests" / "vectors"


def _blocked(*args, cwd):
    r = subprocess.run([sys.executable, "-c", BLOCKED_RUN, ",".join(HEAVY), *map(str, args)],
                       capture_output=True, text=True, cwd=cwd, timeout=120)
    *err, last = r.stderr.splitlines() or [""]
    assert last.startswith("BLOCKED-TRIED "), r.stderr
    return r.returncode, r.stdout, err, json.loads(last[len("BLOCKED-TRIED "):])


def _requirement_names(reqs):
    """``{name: extras}`` of PEP 508 requirement strings (names lower-cased, ``_`` as ``-``)."""
    out = {}
    for req in reqs:
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", req)
        out[m.group(1).lower().replace("_", "-")] = {e.strip() for e in (m.group(2) or "").split(",") if e.strip()}
    return out


def _resolved(project, extra):
    """Every distribution an extra installs, its self-references (``thor-sdk[fit]``) followed."""
    names, todo, done = set(), [extra], set()
    while todo:
        e = todo.pop()
        if e in done:
            continue
        done.add(e)
        for name, extras in _requirement_names(project["optional-dependencies"][e]).items():
            if name == "thor-sdk":
                todo += sorted(extras)
            else:
                names.add(name)
    return names


def _project():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_core_install_is_light_and_extras_bring_the_rest():
    project = _project()
    core = set(_requirement_names(project["dependencies"]))
    heavy = {"torch", "onnx", "onnxruntime", "onnxscript", "coremltools", "numpy", "scipy", "scikit-learn",
             "nvidia-ml-py", "matplotlib"}
    assert core == {"click", "jsonschema"}, core
    assert set(project["optional-dependencies"]) >= {"fit", "probe", "export", "report", "all", "dev"}
    assert _resolved(project, "report") == {"matplotlib"}
    assert _resolved(project, "fit") == {"numpy", "scipy", "scikit-learn"}
    assert _resolved(project, "probe") == {"torch", "nvidia-ml-py", "numpy", "scipy", "scikit-learn"}
    assert _resolved(project, "export") >= {"torch", "onnx", "onnxruntime", "onnxscript", "coremltools"}
    assert _resolved(project, "all") == heavy
    assert _resolved(project, "dev") == _resolved(project, "all") | {"pytest", "pytest-xdist", "hypothesis", "xmlschema",
                                                                     "tree-sitter", "tree-sitter-swift"}
    # thor_sdk.extras (what the one-line error suggests) agrees with what each extra installs
    from thor_sdk.extras import EXTRAS

    for extra, modules in EXTRAS:
        for module, dist in modules:
            # onnx-ir and protobuf come with onnxscript and onnx
            assert dist in _resolved(project, extra) or module in ("onnx_ir", "google.protobuf"), (extra, dist)
    # the README's set-up line and CI install the extra the tests need
    readme = (ROOT / "README.md").read_text()
    assert 'pip install -e ".[dev]" -c constraints.txt' in readme
    assert 'pip install -q -e ".[dev]" -c constraints.txt' in (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^torch==", (ROOT / "constraints.txt").read_text(), re.M)


def test_everything_the_tests_import_is_declared_in_dev():
    """A module a test imports is in the standard library, thor-sdk's own, or installed by ``[dev]``."""
    dist_of = {"sklearn": "scikit-learn", "pynvml": "nvidia-ml-py", "onnx_ir": "onnxscript", "google": "onnx",
               "yaml": "pyyaml"}
    local = {"thor_sdk", "fixtures", "fake_device", "conftest"} | {p.stem for p in (ROOT / "tests").glob("*.py")}
    project = _project()
    dev = _resolved(project, "dev") | set(_requirement_names(project["dependencies"]))
    missing = {}
    for f in (ROOT / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module]
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "importorskip"
                  and node.args and isinstance(node.args[0], ast.Constant)):
                names = [node.args[0].value]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in local:
                    continue
                if dist_of.get(top, top).replace("_", "-") not in dev:
                    missing.setdefault(top, f.name)
    assert not missing, f"imported by tests but not installed by [dev] in pyproject.toml: {missing}"


def test_core_commands_import_no_heavy_module(tmp_path):
    """``--help``, ``kinds``, ``models``, ``layers`` and ``estimate`` on a layer-list JSON work in a core
    install: torch, numpy, scikit-learn, onnx, ... are never even tried (here they cannot be imported)."""
    layers = VECTORS / "layers_time_profile_0.json"
    estimator = VECTORS / "estimator_time_profile.json"
    for args in (["--help"], ["kinds"], ["kinds", "--json"], ["models"], ["layers", layers],
                 ["layers", layers, "--json", "--out", tmp_path / "copy.json"],
                 ["estimate", "--estimator", estimator, "--model", layers, "--batch-size", 8]):
        code, out, err, tried = _blocked(*args, cwd=tmp_path)
        assert code == 0 and not err and out.strip(), (args, code, err)
        assert tried == [], (args, tried)
    assert json.loads((tmp_path / "copy.json").read_text())["layers"]
    # the same figures as with every module present (nothing changed but where numpy is imported)
    code, out, err, tried = _blocked("estimate", "--estimator", estimator, "--model", layers, "--batch-size", 8,
                                     "--json", cwd=tmp_path)
    assert code == 0 and tried == [], err
    import thor_sdk

    want = thor_sdk.estimate(str(estimator), str(layers), batch_size=8)
    got = json.loads(out)
    assert got["total"] == want["total"] and got["flops_baseline"] == want["flops_baseline"]
    assert [r["mean"] for r in got["layers"]] == [r["mean"] for r in want["layers"]]


def test_a_command_needing_a_missing_extra_says_which_in_one_line(tmp_path):
    layers = VECTORS / "layers_time_profile_0.json"
    estimator = VECTORS / "estimator_time_profile.json"
    from thor_sdk.layers.kinds import get_kind

    feats = get_kind("linear").features
    csv = tmp_path / "samples.csv"
    csv.write_text("kind,batch_size,time_s," + ",".join(feats) + "\n"
                   + "".join(f"linear,{b},{1e-4 * b},"
                             + ",".join({"bias": "1", "frozen": "0"}.get(f, str(8 * (i + 1)))
                                        for i, f in enumerate(feats))
                             + "\n" for b in (1, 2, 4, 8)))
    cases = [
        (["probe", "--device", "host", "--model", layers, "--out", tmp_path / "c.db"], "probe", "torch", "probe"),
        (["measure", "--device", "host", "--model", "lenet5"], "measure", "torch", "probe"),
        (["estimate", "--estimator", estimator, "--model", "lenet5"], "estimate", "torch", "probe"),
        (["layers", "lenet5"], "layers", "torch", "probe"),
        (["fit", "--samples", csv, "--out", tmp_path / "e.json"], "fit", "numpy", "fit"),
        (["export", "--help"], None, None, None),  # help never needs an extra
    ]
    for args, command, dist, extra in cases:
        code, out, err, _ = _blocked(*args, cwd=tmp_path)
        if command is None:
            assert code == 0 and "Usage" in out, (args, err)
            continue
        assert code == 2, (args, code, err)
        assert err == [f"Error: thor-sdk {command} needs {dist}: pip install 'thor-sdk[{extra}]'"], (args, err)
    assert not (tmp_path / "c.db").exists() and not (tmp_path / "e.json").exists()  # nothing written


def test_missing_extra_library_helpers():
    from thor_sdk.errors import MissingExtraError, ThorError
    from thor_sdk.extras import extra_for, missing_extra, require

    assert extra_for("torch") == ("probe", "torch") and extra_for("torch.nn.functional") == ("probe", "torch")
    assert extra_for("torch", "export") == ("export", "torch") and extra_for("sklearn.gaussian_process")[0] == "fit"
    assert extra_for("onnxruntime") == ("export", "onnxruntime") and extra_for("google.protobuf.message")[0] == "export"
    assert extra_for("yaml") is None and extra_for(None) is None
    e = missing_extra(ModuleNotFoundError("No module named 'torch'", name="torch"), "probe")
    assert isinstance(e, MissingExtraError) and isinstance(e, ThorError) and isinstance(e, ImportError)
    assert str(e) == "thor-sdk probe needs torch: pip install 'thor-sdk[probe]'" and e.exit_code == 2
    assert e.extra == "probe" and e.name == "torch"
    assert missing_extra(ModuleNotFoundError("x", name="not_an_extra_module")) is None
    assert missing_extra(ValueError("x")) is None
    try:  # a ThorError raised from a missing module (a user's model file importing torch) names the extra too
        try:
            raise ModuleNotFoundError("No module named 'torch'", name="torch")
        except ImportError as inner:
            raise ThorError("could not import net.py") from inner
    except ThorError as outer:
        assert missing_extra(outer, "layers").extra == "probe"
    require("fit")  # installed here ([dev] brings every extra)
    try:
        require("nope")
    except ValueError as err:
        assert "nope" in str(err)
    else:
        raise AssertionError("an unknown extra must be refused")
