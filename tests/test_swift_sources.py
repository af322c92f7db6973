"""The Swift sources, which no Swift toolchain here compiles: they parse, and the runtime reads every field
the estimator format requires (the same check holds the Java runtime to the schema)."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SWIFT = sorted((ROOT / "ios_harness").rglob("*.swift"))
SWIFT_ESTIMATOR = ROOT / "ios_harness/Runtime/Sources/ThorRuntime/Estimator.swift"
JAVA_ESTIMATOR = ROOT / "android_harness/runtime/src/main/java/dev/thorsdk/runtime/Estimator.java"


def _parser():
    ts = pytest.importorskip("tree_sitter")
    tss = pytest.importorskip("tree_sitter_swift")
    return ts.Parser(ts.Language(tss.language()))


def _errors(tree):
    out, stack = [], [tree.root_node]
    while stack:
        n = stack.pop()
        if n.type == "ERROR" or n.is_missing:
            out.append((n.start_point[0] + 1, n.type))
        stack.extend(n.children)
    return sorted(out)


def test_there_are_swift_sources():
    names = {p.name for p in SWIFT}
    assert {"Estimator.swift", "PowerTable.swift", "TrainingRun.swift", "Protocol.swift"} <= names


@pytest.mark.parametrize("path", SWIFT, ids=lambda p: str(p.relative_to(ROOT)))
def test_swift_source_parses(path):
    assert _errors(_parser().parse(path.read_bytes())) == []


def test_the_parse_check_catches_an_unbalanced_brace():
    src = SWIFT_ESTIMATOR.read_text()
    assert _errors(_parser().parse(src.replace("}", "", 1).encode())) != []
    assert _errors(_parser().parse((src + "\nfunc broken( {\n").encode())) != []


def _required(schema, *path):
    node = schema
    for p in path:
        node = node[p]
    return set(node["required"])


@pytest.mark.parametrize("source", [SWIFT_ESTIMATOR, JAVA_ESTIMATOR], ids=["swift", "java"])
def test_runtime_reads_every_field_a_kind_requires(source):
    schema = json.loads((ROOT / "thor_sdk/schemas/estimator.schema.json").read_text())
    gp = schema["$defs"]["kind_gp"]
    needed = _required(schema, "$defs", "kind_gp") | _required(gp, "properties", "mean_function") \
        | _required(gp, "properties", "kernel") | {"unit_per_flop", "overhead", "whole_model", "rel_std"}
    # optional, but it changes the math (version 3): a runtime that ignored it would misread such an entry
    needed |= {"per_step_byte"}
    literals = set(re.findall(r'"([A-Za-z_][A-Za-z0-9_]*)"', source.read_text()))
    assert needed - literals == set()


JAVA_TEST = ROOT / "android_harness/runtime/src/test/java/dev/thorsdk/runtime/EstimatorTest.java"
SWIFT_TEST = ROOT / "ios_harness/Runtime/Tests/ThorRuntimeTests/EstimatorTests.swift"


@pytest.mark.parametrize("test_source", [JAVA_TEST, SWIFT_TEST], ids=["java", "swift"])
def test_every_shared_vector_case_is_reproduced_by_each_runtime(test_source):
    """A case added to tests/vectors and left out of a runtime's list would pass there untested."""
    text = test_source.read_text()
    cases = sorted(p.name for p in (ROOT / "tests/vectors").glob("expected_*.json"))
    assert cases and [c for c in cases if f'"{c}"' not in text] == []


@pytest.mark.parametrize("source", [JAVA_ESTIMATOR, SWIFT_ESTIMATOR], ids=["java", "swift"])
def test_runtime_knows_the_defaulted_features_the_python_one_does(source):
    """The Java and Swift runtimes flag a layer that sets a feature its kind's model predates from their own copy
    of ``DEFAULT_FEATURES``; each kind and feature there must be Python's."""
    from thor_sdk.layers.kinds import DEFAULT_FEATURES

    text = source.read_text()
    line = next(ln for ln in text.splitlines() if "DEFAULT_FEATURES = Map.of" in ln or "let defaultFeatures" in ln)
    start = text.index(line)
    block = text[start:text.index(";" if source.suffix == ".java" else "\n]", start)]
    # per kind: Map.entry("kind", Map.of("feature", value, ...)) in Java, "kind": ["feature": value, ...] in Swift
    kinds = re.findall(r'"(\w+)"(?:,\s*Map\.of\(|:\s*\[)([^)\]]*)', block)
    pairs = {(k, f, float(v)) for k, inner in kinds for f, v in re.findall(r'"(\w+)"\s*[,:]\s*([0-9.]+)', inner)}
    assert pairs == {(k, f, float(v)) for k, d in DEFAULT_FEATURES.items() for f, v in d.items()}
