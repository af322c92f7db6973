"""The canary (thor_sdk.harness.canary) on this machine: how much of a window's spread it explains, and a campaign
without it, to fit side by side.

    python bench/bench_canary.py windows --seconds 120 --report bench/results/canary-host-<stamp>.md
    python bench/bench_canary.py rederive --campaign host-torch.db --out host-torch-nocanary.db --no-canary

``windows``: three small training steps (a conv net, an MLP, a GRU; one intra-op thread), each timed over windows
of 10 steps back to back for ``--seconds``, the canary read right before and right after every window, as
``measure_parts`` reads it. Per net: the ln-std and the robust ln-std (1.4826 x MAD) of the window times as measured
and put at the canary's median (each window times median canary / the geometric mean of its two readings), and the
same with the reading before the window alone. What the canary does not explain stays in the second column.

``settle``: zoo nets (``--models``, batch 8, one intra-op thread, as the host measures) trained window after window
in one process, ``--rounds`` times round the list; after each window the canary's workload is run ``--reads`` times
back to back, each run timed. Per net: the median of each run's time by its place after the window. The first run
after a GRU's window took 1.8x the later ones here, which is why a reading (``Canary()``) times the second of two.

``kinds``: per layer kind of a campaign (``--campaign``, repeatable), the median over its probes of each probe's
canary reading over the median reading of the other kinds' probes among the 16 measured around it: a kind whose own
work slows the canary read beside it shows above 1 (profiles 72-74, version 1: gru 1.19-1.33).

``rederive``: a copy of a campaign with every probe's samples derived again from its stored windows by this
thor-sdk (``campaign.measure.derive_samples``, noisy as a campaign decides it); ``--no-canary``: as if measured
without the canary (its readings left out and dropped). ``thor-sdk fit`` on both, then ``bench/bench_rescore.py`` on
one evaluation's results, compares the two estimators on the same measurements (``--truth canary``: against the
measured values put at the profile's canary level).
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _steps():
    import torch

    nets = {"conv": (torch.nn.Sequential(torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                                         torch.nn.Linear(16 * 16 * 16, 10)), torch.randn(16, 16, 16, 16)),
            "mlp": (torch.nn.Sequential(torch.nn.Linear(300, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)),
                    torch.randn(16, 300)),
            "gru": (torch.nn.GRU(32, 64, batch_first=True), torch.randn(16, 20, 32))}
    out = {}
    for name, (m, x) in nets.items():
        opt = torch.optim.SGD(m.parameters(), lr=0.01)

        def step(m=m, x=x, opt=opt):
            o = m(x)
            o = o[0] if isinstance(o, tuple) else o
            o.sum().backward()
            opt.step()
            opt.zero_grad()

        out[name] = step
    return out


def windows(seconds, steps_per_window=10, clock=time.perf_counter):
    """``{net: [(canary before, window s per step, canary after)]}`` over ``seconds`` of back-to-back windows."""
    import torch

    from thor_sdk.harness.canary import Canary

    torch.manual_seed(0)
    torch.set_num_threads(1)
    steps = _steps()
    canary = Canary()
    for step in steps.values():
        for _ in range(5):
            step()
    got = {k: [] for k in steps}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for name, step in steps.items():
            c0 = canary()
            t0 = clock()
            for _ in range(steps_per_window):
                step()
            t = (clock() - t0) / steps_per_window
            got[name].append((c0, t, canary()))
    return got


def _spread(logs):
    m = statistics.median(logs)
    return statistics.pstdev(logs), 1.4826 * statistics.median(abs(v - m) for v in logs)


def window_table(got):
    """Per net: windows, median ms, (ln-std, robust ln-std) as measured, at the canary (before and after), and at
    the reading before alone."""
    cs = [c for rows in got.values() for a, _, b in rows for c in (a, b)]
    med = statistics.median(cs)
    out = {}
    for name, rows in got.items():
        raw = [math.log(t) for _, t, _ in rows]
        both = [math.log(t * med / math.sqrt(a * b)) for a, t, b in rows]
        before = [math.log(t * med / a) for a, t, _ in rows]
        out[name] = {"windows": len(rows), "median_ms": 1e3 * math.exp(statistics.median(raw)),
                     "raw": _spread(raw), "canary": _spread(both), "canary_before": _spread(before)}
    return {"canary_median_us": 1e6 * med, "nets": out}


def window_report(table, command, load):
    lines = ["# The canary beside training windows", "", f"Command: `{command}`", "",
             f"Load average before: {load}. Canary median {table['canary_median_us']:.0f} us per reading.", "",
             "| net | windows | median ms per step | ln-std as measured | robust | at the canary | robust | "
             "reading before only | robust |", "|---|---|---|---|---|---|---|---|---|"]
    for name, r in table["nets"].items():
        lines.append(f"| {name} | {r['windows']} | {r['median_ms']:.3f} | {r['raw'][0]:.3f} | {r['raw'][1]:.3f} | "
                     f"{r['canary'][0]:.3f} | {r['canary'][1]:.3f} | {r['canary_before'][0]:.3f} | "
                     f"{r['canary_before'][1]:.3f} |")
    return "\n".join(lines) + "\n"


def settle(models, rounds=6, reads=4, window_s=0.1, batch_size=8, clock=time.perf_counter):
    """``{net: [median seconds of the canary workload's k-th run after a window, k = 1..reads]}``."""
    from thor_sdk.devices.host import HostDevice
    from thor_sdk.harness.canary import Canary
    from thor_sdk.harness.torch_trainer import trainer_for_model

    dev = HostDevice(threads=1)
    got = {m: [[] for _ in range(reads)] for m in models}
    with dev.measuring():
        canary = Canary()
        trainers = {m: trainer_for_model(m, batch_size) for m in models}
        try:
            for t in trainers.values():
                for _ in range(3):
                    t.step()
            for _ in range(rounds):
                for m, t in trainers.items():
                    end = clock() + window_s
                    while clock() < end:
                        t.step()
                    for k in range(reads):
                        t0 = clock()
                        canary._work()
                        got[m][k].append(clock() - t0)
        finally:
            for t in trainers.values():
                t.close()
    return {m: [statistics.median(v) for v in runs] for m, runs in got.items()}


def kind_readings(path, neighbours=8, top=8):
    """``{"campaign", "kinds": [(kind, median ratio, probes)]}`` sorted by ratio, highest first (``top`` of each
    end): each probe's canary reading over the median of the readings of the probes of other kinds among the
    ``neighbours`` measured before and after it."""
    from thor_sdk.campaign.measure import canary_version
    from thor_sdk.store import Campaign

    with Campaign.open(path) as c:
        version = canary_version(c.meta)
        s = sorted((x for x in c.samples() if x.get("canary_s")), key=lambda x: x["measured_utc"])
    ratios = {}
    for i, x in enumerate(s):
        nb = [y["canary_s"] for y in s[max(0, i - neighbours):i + neighbours + 1] if y["kind"] != x["kind"]]
        if len(nb) >= 4:
            ratios.setdefault(x["kind"], []).append(x["canary_s"] / statistics.median(nb))
    rows = sorted(((k, statistics.median(v), len(v)) for k, v in ratios.items()), key=lambda r: -r[1])
    return {"campaign": path, "canary_version": version, "kinds": rows[:top] + rows[-top:] if len(rows) > 2 * top
            else rows}


def settle_report(table, command, load):
    reads = len(next(iter(table.values())))
    lines = ["# The canary's workload run back to back after a training window", "", f"Command: `{command}`", "",
             f"Load average before: {load}. Median ms of each run by its place after the window.", "",
             "| net | " + " | ".join(f"run {k + 1}" for k in range(reads)) + " | first / the rest |",
             "|---|" + "---|" * (reads + 1)]
    for name, v in table.items():
        rest = statistics.median(v[1:]) if reads > 1 else v[0]
        lines.append(f"| {name} | " + " | ".join(f"{x * 1e3:.3f}" for x in v) + f" | {v[0] / rest:.2f} |")
    return "\n".join(lines) + "\n"


def kinds_report(results, command):
    """The Markdown of ``kind_readings`` of one or more campaigns."""
    lines = ["# The canary beside each kind's probes, over its neighbours'", "", f"Command: `{command}`", "",
             "Per campaign, the kinds read highest and lowest: the median over a kind's probes of each one's "
             "reading over the median of the other kinds' probes measured around it.", ""]
    for got in results:
        lines.append(f"- {got['campaign']} (canary version {got['canary_version']}): " + ", ".join(
            f"{kind} {ratio:.2f} ({n})" for kind, ratio, n in got["kinds"]))
    return "\n".join(lines) + "\n"


def rederive(src, dst, canary=True):
    """Copy campaign ``src`` to ``dst`` (a new file) with every probe's samples derived again from its stored windows
    by this thor-sdk's ``derive_samples`` (noisy as ``measure_and_store`` decides it: the protocol's CV target from
    the campaign's meta, the machine's load from the windows' states); ``canary=False``: as if measured without the
    canary (the windows' readings left out, and dropped from the copy with the model runs' ``canary_s``). Returns
    how many probes were derived again."""
    import sqlite3

    from thor_sdk.campaign.measure import derive_samples
    from thor_sdk.devices.state import load_summary
    from thor_sdk.errors import UsageError
    from thor_sdk.harness.protocol import PartResult, ProtocolSettings
    from thor_sdk.store import Campaign

    if os.path.exists(dst):
        raise UsageError(f"{dst} exists: rederive writes a new file")
    with Campaign.open(src) as c:
        probes = {p.id: p for p in c.probes("done")}
        meta = c.meta
        windows = {pid: c.windows(pid, detail=True) for pid in probes}
    cv_target = (meta.get("protocol") or {}).get("cv_target", ProtocolSettings().cv_target)
    threads = (meta.get("device") or {}).get("torch_threads") or 1
    con = sqlite3.connect(src)
    out = sqlite3.connect(dst)
    con.backup(out)
    con.close()
    n = 0
    with out:
        for pid, p in probes.items():
            parts = {}
            for w in windows[pid]:
                r = parts.setdefault(w["part"], PartResult(w["part"], 1))
                r.time_s.append(w["time_s"])
                if w["energy_j"] is not None:
                    r.energy_j.append(w["energy_j"])
                if w["state"] is not None:
                    r.states.append(w["state"])
                if canary and w.get("canary_s") is not None:
                    r.canary_s.append(w["canary_s"])
            if not parts or any(len(r.energy_j) not in (0, len(r.time_s)) for r in parts.values()):
                continue
            load = load_summary([st for r in parts.values() for st in r.states], own_threads=int(threads),
                                use_load_average=True)
            for s in derive_samples(p, parts, cv_target=cv_target, load=load):
                out.execute("UPDATE samples SET value = ?, std = ?, n = ?, flagged = ?, flag_reason = ?, parts = ?, "
                            "noisy = ?, noise_reason = ?, canary_s = ? WHERE probe_id = ? AND metric = ?",
                            (s["value"], s["std"], s["n"], int(s["flagged"]), s["flag_reason"], json.dumps(s["parts"]),
                             int(s["noisy"]), s["noise_reason"], s["canary_s"], pid, s["metric"]))
            n += 1
        if not canary:
            out.execute("UPDATE windows SET canary_s = NULL")
            for rid, detail in list(out.execute("SELECT id, detail FROM model_runs")):
                d = json.loads(detail) if detail else {}
                if "canary_s" in d or "canary_value" in d:
                    d.pop("canary_s", None)
                    d.pop("canary_value", None)
                    out.execute("UPDATE model_runs SET detail = ? WHERE id = ?", (json.dumps(d), rid))
    out.close()
    return n


def _load_average():
    """The 1-minute load average before a measurement (None where the platform has none)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def main(argv=None):
    from thor_sdk.errors import ThorError
    from thor_sdk.store.files import write_text

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("windows", help="the canary beside training windows on this machine")
    w.add_argument("--seconds", type=float, default=120.0)
    w.add_argument("--report", default=None)
    t = sub.add_parser("settle", help="the canary's workload run back to back after zoo nets' training windows")
    t.add_argument("--models", default="gru_har,mlp_tabular,cnn5,lstm_har,deepconvlstm")
    t.add_argument("--rounds", type=int, default=6)
    t.add_argument("--reads", type=int, default=4)
    t.add_argument("--report", default=None)
    k = sub.add_parser("kinds", help="the canary beside each kind's probes against its neighbours' (a campaign)")
    k.add_argument("--campaign", action="append", required=True)
    k.add_argument("--report", default=None)
    s = sub.add_parser("rederive", help="a copy of a campaign with its samples derived again (by this thor-sdk)")
    s.add_argument("--campaign", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--no-canary", action="store_true", help="as if measured without the canary")
    args = ap.parse_args(argv)
    command = "python bench/bench_canary.py " + " ".join(argv if argv is not None else sys.argv[1:])
    try:
        if args.cmd == "rederive":
            n = rederive(args.campaign, args.out, canary=not args.no_canary)
            print(f"{args.out}: {n} probes derived again" + (" without the canary" if args.no_canary else ""))
            return
        doc = None  # the JSON written beside --report, where a subcommand has one
        if args.cmd == "kinds":  # reads stored campaigns: the machine's load is not its
            text = kinds_report([kind_readings(path) for path in args.campaign], command)
        elif args.cmd == "settle":
            models = [m for m in args.models.split(",") if m]
            if not models or not 1 <= args.rounds <= 100 or not 2 <= args.reads <= 20:
                raise SystemExit("Error: --models one or more, --rounds 1-100, --reads 2-20")
            load = _load_average()
            text = settle_report(settle(models, args.rounds, args.reads), command, load)
        else:
            if not (math.isfinite(args.seconds) and 1 <= args.seconds <= 3600):
                raise SystemExit("Error: --seconds must be 1-3600")
            load = _load_average()
            table = window_table(windows(args.seconds))
            text, doc = window_report(table, command, load), {"command": command, "table": table}
        print(text)
        if args.report:
            write_text(args.report, text)
            if doc is not None:
                write_text(args.report[:-3] + ".json", json.dumps(doc, indent=1) + "\n")
    except ThorError as err:
        raise SystemExit(f"Error: {err}")


if __name__ == "__main__":
    main()
