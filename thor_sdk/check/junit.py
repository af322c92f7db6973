"""The JUnit XML report of a check (one testcase per model and budget), written atomically.

The document keeps to the strictest common JUnit schema (Windy Road's ``JUnit.xsd`` for Apache Ant's
report, which Jenkins' ``junit-10.xsd`` also accepts): ``<testsuites>`` without attributes; one
``<testsuite>`` with ``package``, ``id``, ``name``, ``timestamp`` (UTC, no zone), ``hostname``,
``tests``, ``failures``, ``errors``, ``skipped`` and ``time``, holding ``<properties>``, the testcases,
``<system-out>`` and ``<system-err>`` in that order; a ``<testcase>`` (``name``, ``classname``,
``time``) holds at most one ``<failure message=... type=...>`` whose text is the explanation.
"""

import datetime
import re

SUITE = "thor-sdk check"
PACKAGE = "thor_sdk.check"
FAILURE_TYPE = "OverBudget"
#: characters XML 1.0 cannot carry (control characters but tab, newline, carriage return)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _text(s):
    return _NOT_XML.sub("?", str(s))


def _token(s):
    """An ``xs:token`` of at least one character: no runs of whitespace, no leading or trailing space."""
    return " ".join(_text(s).split()) or "-"


def _hostname():
    import socket

    try:
        return _token(socket.gethostname() or "localhost")
    except OSError:
        return "localhost"


def junit_xml(report, timestamp=None, elapsed_s=0.0):
    """The JUnit XML text (UTF-8 declaration included) of a ``CheckReport``: a testcase per model and budget
    (estimates without a budget are in ``<system-out>`` only), a ``<failure>`` per over-budget one with the
    estimate, the upper bound and the budget in its message and the explanation as its text."""
    import xml.etree.ElementTree as ET

    stamp = (timestamp or datetime.datetime.now(datetime.timezone.utc)).strftime("%Y-%m-%dT%H:%M:%S")
    cases = report.budgeted
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite", {
        "package": PACKAGE, "id": "0", "name": SUITE, "timestamp": stamp, "hostname": _hostname(),
        "tests": str(len(cases)), "failures": str(len(report.failures)), "errors": "0", "skipped": "0",
        "time": f"{max(float(elapsed_s), 0.0):.3f}"})
    props = ET.SubElement(suite, "properties")
    for name, value in [("device", report.device), ("runtime", report.runtime),
                        *((f"estimator.{m}", p) for m, p in sorted(report.estimators.items()))]:
        ET.SubElement(props, "property", {"name": _token(name), "value": _text(value)})
    classname = _token(f"{PACKAGE}.{report.device}.{report.runtime}".replace(" ", "_"))
    for r in cases:
        case = ET.SubElement(suite, "testcase", {
            "name": _token(f"{r.model}: {r.metric} per {r.per} within {r.budget:g} {r.unit}"),
            "classname": classname, "time": "0.000"})
        if r.status == "fail":
            failure = ET.SubElement(case, "failure", {"message": _text(r.lines()[0]), "type": FAILURE_TYPE})
            failure.text = _text("\n".join(r.explanation.lines if r.explanation is not None else []))
    ET.SubElement(suite, "system-out").text = _text("\n".join(report.lines()))
    ET.SubElement(suite, "system-err").text = _text("\n".join(f"Warning: {w}" for w in report.warnings))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def check_target(path):
    """UsageError, before anything is estimated, when the JUnit file cannot be written where asked."""
    from thor_sdk.store.files import check_output

    return check_output(path, "--junit report")


def write_junit(report, path, timestamp=None, elapsed_s=0.0):
    """Write the report's JUnit XML to ``path`` atomically (``thor_sdk.store.files``: a temporary file in the
    same folder, fsync, ``os.replace``): a reader sees the old file or the whole new one, never a part."""
    from thor_sdk.store.files import write_text

    return write_text(path, junit_xml(report, timestamp=timestamp, elapsed_s=elapsed_s), "--junit report")
