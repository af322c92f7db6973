"""Eager-PyTorch trainer: one training step of a module on a fixed batch (the host's default runtime), on CPU or GPU."""

import torch

from thor_sdk.errors import UsageError

OPTIMIZERS = ("sgd", "adam")


def make_optimizer(params, name="sgd", lr=0.01):
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    raise UsageError(f"unknown optimizer {name!r} (known: {', '.join(OPTIMIZERS)})")


class TorchTrainer:
    """``step()`` = zero grads, forward, cross-entropy, backward, optimizer update.

    When ``x_requires_grad`` the input's gradient is computed too (a THOR 3-layer probe's identity
    input layer), exactly as a layer inside a network computes the gradient of its input.

    ``device``: where the module and batch live (``"cpu"``, ``"cuda:0"``). On a GPU each step ends in
    ``torch.cuda.synchronize``: kernels run asynchronously, and a step is over when the GPU is done, so a
    window's time and energy are the GPU's work and not the launches'.
    """

    def __init__(self, module, x, y, loss_fn, x_requires_grad=False, optimizer="sgd", lr=0.01, device="cpu"):
        self.device = str(device)
        self.module = module.to(self.device).train()
        self.x = x.detach().to(self.device).clone().requires_grad_(bool(x_requires_grad))
        self.y = y.to(self.device)
        self.loss_fn = loss_fn
        params = [p for p in module.parameters() if p.requires_grad]
        self.opt = make_optimizer(params, optimizer, lr) if params else None
        self.last_loss = None

    def step(self):
        self.enqueue()
        self.wait()

    def wait(self):
        """Until the device has done every step handed to it (a CUDA synchronize; nothing on the CPU)."""
        if self.device.startswith("cuda"):
            torch.cuda.synchronize(self.device)

    def seconds_per_step(self, window_s, warmup=2, min_steps=1, pipelined=False):
        """Seconds per step over one window of at least ``window_s`` seconds and ``min_steps`` steps, after
        ``warmup`` steps. ``pipelined``: the window's steps are queued back to back (``enqueue``) and waited for
        once, at its end, as a GPU training loop that does not read its loss each step runs; otherwise each step
        is waited for (``step``). For benchmarks; a campaign measures through ``thor_sdk.harness.protocol``."""
        import time

        for _ in range(int(warmup)):
            self.step()
        n, t0 = 0, time.perf_counter()
        while True:
            if pipelined:
                self.enqueue()
            else:
                self.step()
            n += 1
            if n >= min_steps and time.perf_counter() - t0 >= window_s:
                break
        if pipelined:
            self.wait()
        return (time.perf_counter() - t0) / n

    def enqueue(self):
        """One step's work handed to the device and not waited for: on a GPU the kernels may still be running
        when this returns (the time it takes is the host's side of the step: Python, dispatch, launches); on
        the CPU the step is done."""
        if self.opt is not None:
            self.opt.zero_grad(set_to_none=True)
        self.x.grad = None
        loss = self.loss_fn(self.module(self.x), self.y)
        loss.backward()
        if self.opt is not None:
            self.opt.step()
        self.last_loss = loss.detach()

    def close(self):
        pass


def trainer_for_probe_model(pm, optimizer="sgd", lr=0.01, device="cpu"):
    return TorchTrainer(pm.module, pm.x, pm.y, pm.loss, pm.x_requires_grad, optimizer, lr, device)


def trainer_for_model(model, batch_size, optimizer="sgd", lr=0.01, seed=0, input_shape=None, input_dtype=None,
                      vocab=None, device="cpu"):
    """A trainer for a whole model on one random batch, the model in any form ``measure`` takes: a
    reference-network name, ``file.py:Class`` or a ``torch.nn.Module`` (with ``input_shape``), a
    layer-list JSON or ONNX file (rebuilt from its kinds), or a resolved ``ModelSource``
    (see ``thor_sdk.harness.whole_model``)."""
    from .whole_model import build_training, resolve_model

    t = build_training(resolve_model(model, input_shape, input_dtype, vocab), batch_size, seed)
    return TorchTrainer(t.module, t.x, t.y, t.loss_fn, False, optimizer, lr, device)
