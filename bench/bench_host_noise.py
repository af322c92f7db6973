"""How much this host's speed moves between measurements of one model: the floor under any accuracy figure.

    python bench/bench_host_noise.py [--models lenet5,cnn5,mlp5] [--rounds 20] [--batch-size 16]

Each round measures every model once, in turn, through the host device's own whole-model measurement
(``measure_model``: the code path ``thor-sdk evaluate`` scores estimates against; one intra-op thread,
time only, no energy). Printed per model: the spread over rounds of its measured median step (CV and
min-max), and the CV of its median divided by the first model's in the same round -- what normalising
by a reference re-measured beside every measurement would leave.

An estimate is scored against one such measurement (or the median of ``evaluate --passes N`` of them),
so a model whose measurements spread by 20% cannot be scored much better than that, whatever the
estimator. The last column puts a number on it: the APE of a *perfect* estimate (the model's median over all
rounds) against the median of ``--passes`` rounds, averaged over every choice of that many rounds; its mean over
the models is the MAPE no estimator can beat on this host, scored as ``evaluate --passes`` scores. Beside it, what
``evaluate`` says of the same thing from only the passes it has (``thor_sdk.evaluate.unseen.measurement_floor``,
which assumes lognormal passes), averaged over the same choices: how far that estimate can be trusted here.
"""

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cv(xs):
    return statistics.pstdev(xs) / statistics.fmean(xs)


def evaluate_floor(values, passes):
    """``measurement_floor``'s MAPE (%) from ``passes`` of ``values`` (one model's rounds), averaged over every choice."""
    from itertools import combinations

    from thor_sdk.evaluate.unseen import measurement_floor

    if passes < 2:
        return None
    return statistics.fmean(measurement_floor([{"measured_passes": list(c)}])["mape"]
                            for c in combinations(values, passes))


def perfect_ape(values, passes):
    """Mean APE (%) of the median of ``values`` against the median of ``passes`` of them, over every such choice."""
    from itertools import combinations

    truth = statistics.median(values)
    apes = [abs(truth / statistics.median(c) - 1.0) for c in combinations(values, passes)]
    return 100.0 * statistics.fmean(apes)


def main(argv=None):
    from thor_sdk.api import _device

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="lenet5,cnn5,mlp5")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--passes", type=int, default=3, help="passes a score takes the median of (evaluate --passes)")
    args = ap.parse_args(argv)
    if not (2 <= args.rounds <= 40 and 1 <= args.batch_size <= 1024 and 1 <= args.passes <= min(args.rounds, 5)):
        raise SystemExit("--rounds 2..40, --batch-size 1..1024, --passes 1..min(rounds, 5)")
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    dev = _device("host", threads=1)
    load_start = os.getloadavg()[0]
    t0 = time.monotonic()
    med = {n: [] for n in names}
    for _ in range(args.rounds):
        for n in names:
            med[n].append(statistics.median(dev.measure_model(n, args.batch_size, metric="time").values("time")))
    wall = time.monotonic() - t0
    ref = names[0]
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M")
    command = "python bench/bench_host_noise.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(f"# Host speed between measurements of one model ({stamp} UTC)\n")
    print(f"Command: `{command}` ({wall:.0f} s)  ")
    print(f"Machine: {platform.platform()}, {os.cpu_count()} cores, 1 torch thread; load average {load_start:.2f} "
          f"at start, {os.getloadavg()[0]:.2f} at end. Time only.\n")
    print(f"| model | batch | rounds | median step: CV | min-max ms | max/min | over {ref}'s in the same round: CV "
          f"| a perfect estimate's APE, median of {args.passes} | evaluate's floor from {args.passes} passes |")
    print("|---|---|---|---|---|---|---|---|---|")
    floors, estimated = [], []
    for n in names:
        ratio = [a / b for a, b in zip(med[n], med[ref])]
        floors.append(perfect_ape(med[n], args.passes))
        estimated.append(evaluate_floor(med[n], args.passes))
        print(f"| {n} | {args.batch_size} | {args.rounds} | {_cv(med[n]):.1%} | {min(med[n]) * 1e3:.2f}-"
              f"{max(med[n]) * 1e3:.2f} | {max(med[n]) / min(med[n]):.2f} | "
              f"{'-' if n == ref else f'{_cv(ratio):.1%}'} | {floors[-1]:.1f}% | "
              f"{'-' if estimated[-1] is None else f'{estimated[-1]:.1f}%'} |")
    print(f"\nA perfect estimator (each model's median over all {args.rounds} rounds), scored on the median of "
          f"{args.passes} rounds as `evaluate --passes {args.passes}` scores: MAPE {statistics.fmean(floors):.1f}% "
          "over these models (the floor under any estimator's MAPE here)"
          + (f"; `evaluate` would say {statistics.fmean(estimated):.1f}% from its {args.passes} passes."
             if args.passes >= 2 else "."))


if __name__ == "__main__":
    main()
