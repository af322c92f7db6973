"""Batch-size efficiency on an offline proxy: samples to a target accuracy, as a ratio to the largest batch.

For each batch size b and seed s the network is trained from scratch with SGD (momentum 0.9) at
``lr(b) = base_lr * sqrt(b / b_max)`` (square-root scaling from the largest batch) until the
validation accuracy first reaches the target; validation runs every ``eval_every_samples`` samples
(default: the largest batch size, so every batch size is judged at the same sample resolution).
``ratio(b) = mean_s samples(b, s) / mean_s samples(b_max, s)``. A batch size that misses the target
within ``max_epochs`` in any seed gets no ratio (``ratio: null``, with how many seeds reached it).
The document (format ``thor-sdk/batch-ratios``) is checked against ``$defs/ratios`` of
``thor_sdk/schemas/table.schema.json``.
"""

import math
import statistics

from thor_sdk.errors import MeasurementError, UsageError

RATIOS_FORMAT = "thor-sdk/batch-ratios"
RATIOS_VERSION = 1


def parse_batch_sizes(text):
    try:
        out = sorted({int(s) for s in str(text).split(",") if s.strip()})
    except ValueError:
        raise UsageError(f"batch sizes must be comma-separated integers, got {text!r}") from None
    if not out or out[0] < 1:
        raise UsageError(f"batch sizes must be positive integers, got {text!r}")
    return out


def estimate_ratios(model="mlp", proxy="digits", batch_sizes=(16, 32, 64, 128), target_accuracy=0.9,
                    seeds=(0, 1, 2), base_lr=0.1, max_epochs=30, eval_every_samples=None, progress=None):
    """Train on the proxy per batch size and seed; return the ratios document (a dict)."""
    import torch

    from .data import Trainer, adapt, build_net, load_proxy, split

    batch_sizes = sorted(set(int(b) for b in batch_sizes))
    if not batch_sizes or batch_sizes[0] < 1:
        raise UsageError("give at least one positive batch size")
    if not 0 < target_accuracy <= 1:
        raise UsageError(f"target accuracy must be in (0, 1], got {target_accuracy}")
    if not seeds:
        raise UsageError("give at least one seed")
    X, y, info = load_proxy(proxy)
    Xtr, Xv, ytr, yv = split(X, y)
    n_classes = int(y.max()) + 1
    xt, xv = adapt(Xtr, model, info), adapt(Xv, model, info)
    yt, yvt = torch.as_tensor(ytr), torch.as_tensor(yv)
    b_max = batch_sizes[-1]
    if b_max > len(xt):
        raise UsageError(f"largest batch {b_max} exceeds the proxy's {len(xt)} training samples")
    every = int(eval_every_samples or b_max)
    max_samples = max_epochs * len(xt)
    n_features = xt[0].numel() if model == "mlp" else None
    total, done = len(batch_sizes) * len(seeds), 0
    entries = []
    for b in batch_sizes:
        lr = base_lr * math.sqrt(b / b_max)
        per_seed = []
        for s in seeds:
            if progress:
                progress(done, total, f"batch {b} seed {s}")
            net = build_net(model, n_features or 64, n_classes, seed=s)
            tr = Trainer(net, xt, yt, xv, yvt, b, lr, seed=s)
            per_seed.append(tr.samples_to_target(target_accuracy, max_samples, every))
            done += 1
        reached = [v for v in per_seed if math.isfinite(v)]
        entries.append({"batch_size": b, "lr": lr, "samples_to_target": [v if math.isfinite(v) else None
                                                                          for v in per_seed],
                        "reached": len(reached), "mean_samples": statistics.fmean(reached) if
                        len(reached) == len(per_seed) else None})
    if progress:
        progress(total, total, "done")
    ref = entries[-1]
    if ref["mean_samples"] is None:
        raise MeasurementError(
            f"the largest batch ({b_max}) did not reach {target_accuracy} in every seed within {max_epochs} "
            "epochs: lower --target-accuracy, raise --max-epochs or --base-lr")
    for e in entries:
        e["ratio"] = e["mean_samples"] / ref["mean_samples"] if e["mean_samples"] is not None else None
    return {"format": RATIOS_FORMAT, "version": RATIOS_VERSION, "model": model, "proxy": info["name"],
            "proxy_source": info["source"], "target_accuracy": target_accuracy, "seeds": list(seeds),
            "lr_rule": "sqrt", "base_lr": base_lr, "optimizer": "sgd momentum 0.9",
            "reference_batch_size": b_max, "reference_samples_to_target": ref["mean_samples"],
            "eval_every_samples": every, "max_epochs": max_epochs, "train_samples": len(xt),
            "val_samples": len(xv), "ratios": entries}
