"""Offline proxy datasets, the networks trained on them, and one small SGD training loop.

Proxies (nothing is downloaded):

- ``digits``: scikit-learn's bundled handwritten digits (1797 8x8 images, 10 classes);
- ``synthetic``: ``sklearn.datasets.make_classification`` (2000 samples, 64 features, 10 classes);
- a folder: ``X.npy`` (samples x features, or samples x H x W / C x H x W) and ``y.npy`` (integer
  labels), read with ``allow_pickle=False``; or ``data.csv`` (numbers, label in the last column).

The validation split (20%, stratified) is fixed (seed 0) whatever the training seed, so every
batch size and seed is judged on the same held-out samples.

Networks: ``mlp`` (features -> 64 -> classes, the CI-sized default) or the reference networks of
``thor_sdk.models`` that take images or feature vectors: 8x8 digits are upsampled (bilinear) to the
model's input size and repeated over its channels (``lenet5``: 1x28x28; ``cnn5``, ``resnet18``,
``mobilenetv2``: 3x32x32); ``har`` (561 features) gets the features zero-padded.
"""

import math

from thor_sdk.errors import FormatError, NotFoundError, UsageError

PROXIES = ("digits", "synthetic")


def load_proxy(name):
    """``(X, y, info)`` as numpy arrays: X float32 (n, ...), y int64 (n,)."""
    import os

    import numpy as np

    if name == "digits":
        from sklearn.datasets import load_digits

        d = load_digits()
        X = (d.data / 16.0).astype(np.float32)
        return X, d.target.astype(np.int64), {"name": "digits", "source": "sklearn.datasets.load_digits (bundled)",
                                               "image_side": 8}
    if name == "synthetic":
        from sklearn.datasets import make_classification

        X, y = make_classification(n_samples=2000, n_features=64, n_informative=24, n_redundant=8,
                                   n_classes=10, n_clusters_per_class=1, class_sep=1.5, random_state=0)
        return X.astype(np.float32), y.astype(np.int64), {"name": "synthetic",
                                                           "source": "sklearn make_classification, random_state=0"}
    if not os.path.isdir(name):
        raise NotFoundError(f"unknown proxy {name!r}: digits, synthetic, or a folder with X.npy+y.npy or data.csv")
    xp, yp, cp = (os.path.join(name, f) for f in ("X.npy", "y.npy", "data.csv"))
    try:
        if os.path.isfile(xp) and os.path.isfile(yp):
            X, y = np.load(xp, allow_pickle=False), np.load(yp, allow_pickle=False)
        elif os.path.isfile(cp):
            a = np.loadtxt(cp, delimiter=",", dtype=np.float64, ndmin=2)
            X, y = a[:, :-1], a[:, -1]
        else:
            raise NotFoundError(f"{name} has neither X.npy + y.npy nor data.csv")
    except (ValueError, OSError) as e:
        raise FormatError(f"cannot read the dataset in {name}: {e}") from e
    if len(X) != len(y) or len(X) < 10:
        raise FormatError(f"{name}: X and y must have the same number of samples (>= 10), got {len(X)} and {len(y)}")
    if np.any(y != np.round(y)) or np.min(y) < 0:
        raise FormatError(f"{name}: labels must be non-negative integers")
    X = X.astype(np.float32)
    side = int(round(math.sqrt(X[0].size)))
    return X, y.astype(np.int64), {"name": os.path.basename(os.path.normpath(name)), "source": name,
                                   "image_side": side if side * side == X[0].size else None}


def split(X, y, val_fraction=0.2):
    """Fixed stratified train/validation split (seed 0)."""
    from sklearn.model_selection import train_test_split

    return train_test_split(X, y, test_size=val_fraction, random_state=0, stratify=y)


def input_shape_for(model_name, n_features):
    """Per-sample input shape the network eats."""
    if model_name == "mlp":
        return (n_features,)
    from thor_sdk.models import model_spec

    spec = model_spec(model_name)
    if spec.input_dtype != "float32":
        raise UsageError(f"{model_name} takes token ids; the power proxies are images/feature vectors "
                         "(use mlp, lenet5, cnn5, har, resnet18 or mobilenetv2)")
    return tuple(spec.input_shape)


def build_net(model_name, n_features, n_classes, seed=0):
    """A fresh network for ``n_features`` inputs and ``n_classes`` classes (deterministic per seed)."""
    import torch

    if model_name == "mlp":
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(n_features, 64), torch.nn.ReLU(), torch.nn.Linear(64, n_classes))
    from thor_sdk.models import build_model, model_spec

    spec = model_spec(model_name)
    input_shape_for(model_name, n_features)
    if n_classes > spec.num_classes:
        raise UsageError(f"{model_name} has {spec.num_classes} classes; the data has {n_classes}")
    return build_model(model_name, seed=seed)


def flops_per_sample(model_name, n_features=None, n_classes=10):
    """Training FLOPs (forward + backward) per sample, counted by ``torch.utils.flop_counter`` (the
    SIMULATED Jetson's time model needs them)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    net = build_net(model_name, n_features or 64, n_classes, seed=0)
    x = torch.zeros((2, *input_shape_for(model_name, n_features or 64)))
    with FlopCounterMode(display=False) as fc:
        out = net(x)
        torch.nn.functional.cross_entropy(out, torch.zeros(2, dtype=torch.long)).backward()
    return max(fc.get_total_flops() / 2.0, 1.0)


def adapt(X, model_name, info):
    """numpy X (n, features...) -> float32 torch tensor shaped for ``model_name``."""
    import torch

    x = torch.as_tensor(X, dtype=torch.float32)
    n = x.shape[0]
    flat = x.reshape(n, -1)
    shape = input_shape_for(model_name, flat.shape[1])
    if model_name == "mlp":
        return flat
    if len(shape) == 1:  # feature-vector model (har): zero-pad or truncate
        out = torch.zeros((n, shape[0]))
        k = min(shape[0], flat.shape[1])
        out[:, :k] = flat[:, :k]
        return out
    c, h, w = shape
    if x.dim() == 4 and tuple(x.shape[1:]) == (c, h, w):
        return x
    side = info.get("image_side")
    if x.dim() == 3:
        img = x.unsqueeze(1)
    elif side:
        img = flat.reshape(n, 1, side, side)
    else:
        raise UsageError(f"{model_name} needs images ({c}x{h}x{w}); this data has {flat.shape[1]} features "
                         "that are not a square image (use --model mlp)")
    if img.shape[1] not in (1, c):
        raise UsageError(f"{model_name} needs {c} channels; the images have {img.shape[1]}")
    img = torch.nn.functional.interpolate(img, size=(h, w), mode="bilinear", align_corners=False)
    return img.expand(-1, c, -1, -1).contiguous() if img.shape[1] == 1 else img


def accuracy(net, x, y, batch=512):
    import torch

    net.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            correct += (net(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum().item()
    net.train()
    return correct / len(x)


class Trainer:
    """SGD (momentum 0.9) on a fixed tensor dataset; ``run`` until a target or a sample budget.

    ``on_eval(samples_seen, val_accuracy)`` is called at every evaluation; evaluations happen every
    ``eval_every_samples`` samples (and at each epoch end when ``eval_at_epoch_end``).
    """

    def __init__(self, net, x_train, y_train, x_val, y_val, batch_size, lr, seed=0, device="cpu"):
        import torch

        if batch_size < 1:
            raise UsageError(f"batch size must be >= 1, got {batch_size}")
        self.torch = torch
        self.device = device
        self.net = net.to(device)
        self.x, self.y = x_train.to(device), y_train.to(device)
        self.xv, self.yv = x_val.to(device), y_val.to(device)
        self.batch_size = int(batch_size)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=lr, momentum=0.9)
        self.gen = torch.Generator().manual_seed(seed)
        self.seen = 0

    def step(self, xb, yb):
        self.opt.zero_grad(set_to_none=True)
        loss = self.torch.nn.functional.cross_entropy(self.net(xb), yb)
        loss.backward()
        self.opt.step()
        return loss

    def epoch_batches(self):
        perm = self.torch.randperm(len(self.x), generator=self.gen).to(self.device)
        n = len(perm) - len(perm) % self.batch_size if len(perm) >= self.batch_size else len(perm)
        for i in range(0, n, self.batch_size):
            idx = perm[i:i + self.batch_size]
            yield self.x[idx], self.y[idx]

    def val_accuracy(self):
        return accuracy(self.net, self.xv, self.yv)

    def samples_to_target(self, target, max_samples, eval_every_samples):
        """Samples seen when validation accuracy first reaches ``target`` (``inf`` if never)."""
        next_eval = eval_every_samples
        while self.seen < max_samples:
            for xb, yb in self.epoch_batches():
                self.step(xb, yb)
                self.seen += len(xb)
                if self.seen >= next_eval:
                    next_eval += eval_every_samples
                    if self.val_accuracy() >= target:
                        return self.seen
                if self.seen >= max_samples:
                    break
        return math.inf
