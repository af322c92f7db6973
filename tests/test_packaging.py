"""The package ships every folder it imports, and heavy imports stay lazy."""

import pathlib
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
