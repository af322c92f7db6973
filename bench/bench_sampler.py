"""How regularly the meters' background sampler (``ThreadSampler``) samples on this machine.

A sampling meter integrates power between samples, so late or missing samples widen the trapezoids.
This runs the real ``Ina3221Meter`` on a fake Jetson Nano tree (files under a temporary folder, power
constant at 5 W) with the real background thread, optionally with CPU load from busy threads, and
prints the achieved sampling intervals and the energy error:

    python bench/bench_sampler.py --period-ms 10 --window-s 2 --busy-threads 0
    python bench/bench_sampler.py --period-ms 10 --window-s 2 --busy-threads 2

The energy error is against 5 W x the window's measured duration (exact for a constant signal), so it
shows only what the sampler adds (nothing, for a constant signal: the interval spread matters for
signals that change faster than the samples).
"""

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))


def main(argv=None):
    from fixtures.sysfs import plant, write

    from thor_sdk.meters.ina3221 import Ina3221Meter

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--period-ms", type=float, default=10.0)
    ap.add_argument("--window-s", type=float, default=2.0)
    ap.add_argument("--busy-threads", type=int, default=0, help="Python threads spinning meanwhile (GIL load)")
    a = ap.parse_args(argv)
    stop = threading.Event()

    def spin():
        x = 0
        while not stop.is_set():
            x += 1

    with tempfile.TemporaryDirectory() as root:
        plant(root, "nano")
        write(root, "sys/bus/i2c/drivers/ina3221x/6-0040/iio:device0/in_power0_input", 5000)
        busy = [threading.Thread(target=spin, daemon=True) for _ in range(a.busy_threads)]
        for t in busy:
            t.start()
        m = Ina3221Meter(root, sample_period_s=a.period_ms / 1000)
        m.start()
        time.sleep(a.window_s)
        w = m.stop()
        stop.set()
    ts = [t for t, _ in w.samples]
    dts = [(b - c) * 1000 for c, b in zip(ts, ts[1:])]
    rows = [("requested period (ms)", f"{a.period_ms:.2f}"), ("busy threads", a.busy_threads),
            ("samples", len(ts)), ("median interval (ms)", f"{statistics.median(dts):.2f}"),
            ("p95 interval (ms)", f"{sorted(dts)[int(0.95 * (len(dts) - 1))]:.2f}"),
            ("max interval (ms)", f"{max(dts):.2f}"),
            ("energy error vs 5 W x duration", f"{(w.energy_j / (5.0 * w.duration_s) - 1) * 100:+.4f} %")]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k.ljust(width)}  {v}")
    print(f"\ncommand: python bench/bench_sampler.py --period-ms {a.period_ms:g} --window-s {a.window_s:g} "
          f"--busy-threads {a.busy_threads}")


if __name__ == "__main__":
    main()
