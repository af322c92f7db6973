"""One training step as a TorchScript module: ``train_step(x, y) -> loss`` updates its own parameters.

The saved file (``torch.jit.save``; TorchScript's own format, loadable with ``torch.jit.load`` and
libtorch / PyTorch Mobile, no Python class needed) holds:

- ``model``: the network (scripted, or traced when it cannot be scripted), in training mode;
- ``train_step(x, y)``: forward, loss (cross-entropy over (B, C) or (B, T, C) logits, or MSE),
  ``torch.autograd.grad`` over the parameters (and ``x`` when ``x_requires_grad``: a THOR 3-layer
  probe's input layer), then an in-place SGD or Adam update -- the same arithmetic as
  ``torch.optim.SGD`` / ``torch.optim.Adam`` (single-tensor path), so it matches them to float
  rounding; BatchNorm running statistics update as in eager training;
- ``example_x``, ``example_y``: the batch the step was exported with, so a harness can run
  ``m.train_step(m.example_x, m.example_y)`` with nothing else;
- ``thor_sdk.json`` (an extra file in the archive, also the ``step_json`` attribute): the step
  description (format, optimizer, lr, loss, input/label shapes and dtypes).

Optimizer state (Adam's moments and step count) lives in the module and is saved with it.
"""

import json
import os

from thor_sdk.errors import ExportError, UsageError

from .onnx_train import ADAM_BETAS, ADAM_EPS, LOSSES, OPTIMIZERS

FORMAT = "thor-sdk/torchscript-training-step"
EXTRA_FILE = "thor_sdk.json"


def _make_step_class():
    """The scriptable wrapper (defined in a function: torch is imported only when needed)."""
    from typing import List

    import torch
    from torch import nn
    from torch.nn import functional as F

    class TrainStep(nn.Module):
        params: List[torch.Tensor]
        exp_avg: List[torch.Tensor]
        exp_avg_sq: List[torch.Tensor]

        def __init__(self, model, x, y, loss: str, optimizer: str, lr: float, x_requires_grad: bool, step_json: str):
            super().__init__()
            self.model = model
            self.params = [p for p in model.parameters() if p.requires_grad]  # a frozen one is read, never trained
            self.exp_avg = [torch.zeros_like(p) for p in self.params] if optimizer == "adam" else []
            self.exp_avg_sq = [torch.zeros_like(p) for p in self.params] if optimizer == "adam" else []
            self.register_buffer("step_count", torch.zeros((), dtype=torch.float64))
            self.register_buffer("example_x", x.detach().clone())
            self.register_buffer("example_y", y.detach().clone())
            self.lr = float(lr)
            self.use_adam = optimizer == "adam"
            self.use_ce = loss == "ce"
            self.x_requires_grad = bool(x_requires_grad)
            self.beta1 = float(ADAM_BETAS[0])
            self.beta2 = float(ADAM_BETAS[1])
            self.eps = float(ADAM_EPS)
            self.step_json = step_json

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.model(x)

        def _loss(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            if self.use_ce:
                return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
            return F.mse_loss(out, y)

        @torch.jit.export
        def train_step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            wrt: List[torch.Tensor] = []
            for p in self.params:
                wrt.append(p)
            xin = x
            if self.x_requires_grad:
                xin = x.detach().requires_grad_(True)
                wrt.append(xin)
            loss = self._loss(self.model(xin), y)
            grads = torch.autograd.grad([loss], wrt, allow_unused=True)
            with torch.no_grad():
                self.step_count += 1.0
                step = float(self.step_count.item())
                bias_correction1 = 1.0 - self.beta1 ** step
                bias_correction2_sqrt = (1.0 - self.beta2 ** step) ** 0.5
                for i in range(len(self.params)):
                    g = grads[i]
                    if g is not None:
                        p = self.params[i]
                        if self.use_adam:
                            m = self.exp_avg[i]
                            v = self.exp_avg_sq[i]
                            m.lerp_(g, 1.0 - self.beta1)
                            v.mul_(self.beta2).addcmul_(g, g, value=1.0 - self.beta2)
                            denom = (v.sqrt() / bias_correction2_sqrt).add_(self.eps)
                            p.addcdiv_(m, denom, value=-self.lr / bias_correction1)
                        else:
                            p.add_(g, alpha=-self.lr)
            return loss.detach()

    return TrainStep


def _script_model(module, x):
    import torch

    try:
        return torch.jit.script(module), "scripted"
    except Exception as script_error:  # TorchScript raises many types for unsupported Python
        try:
            return torch.jit.trace(module, (x,), check_trace=False), "traced"
        except Exception as e:  # tracing failed too: nothing more to try
            raise ExportError(f"TorchScript cannot compile the model ({type(script_error).__name__}: "
                              f"{str(script_error).strip().splitlines()[0]}) nor trace it "
                              f"({type(e).__name__})") from e


def export_torchscript(module, x, y, path, *, loss="ce", optimizer="sgd", x_requires_grad=False, lr=0.01):
    """Write the TorchScript training step of ``module`` on ``(x, y)`` to ``path``; returns its description."""
    import torch

    if optimizer not in OPTIMIZERS:
        raise UsageError(f"unknown optimizer {optimizer!r} (known: {', '.join(OPTIMIZERS)})")
    if loss not in LOSSES:
        raise UsageError(f"unknown loss {loss!r} (known: {', '.join(LOSSES)})")
    import copy

    model = copy.deepcopy(module).train()
    scripted_model, how = _script_model(model, x)
    desc = {"format": FORMAT, "version": 1, "loss": loss, "optimizer": optimizer, "lr": float(lr),
            "x_requires_grad": bool(x_requires_grad), "compiled": how,
            "x": {"shape": [int(s) for s in x.shape], "dtype": str(x.dtype).replace("torch.", "")},
            "y": {"shape": [int(s) for s in y.shape], "dtype": str(y.dtype).replace("torch.", "")},
            "num_params": int(sum(p.numel() for p in module.parameters()))}
    text = json.dumps(desc, sort_keys=True)
    try:
        step = torch.jit.script(_make_step_class()(scripted_model, x, y, loss, optimizer, lr, x_requires_grad, text))
    except Exception as e:  # TorchScript compilation errors have many types
        raise ExportError(f"TorchScript cannot compile the training step: {type(e).__name__}: "
                          f"{str(e).strip().splitlines()[0]}") from e
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    import io

    from thor_sdk.store.files import write_bytes

    # saved to memory, then written by Python: torch's own file writer aborts the process (C++ abort, no
    # exception) when a write fails, e.g. on a full disk
    buf = io.BytesIO()
    torch.jit.save(step, buf, _extra_files={EXTRA_FILE: text})
    write_bytes(path, buf.getvalue(), "TorchScript file")
    return desc


def load_torchscript(path):
    """``(module, description)`` of a saved TorchScript training step."""
    import torch

    extra = {EXTRA_FILE: ""}
    try:
        m = torch.jit.load(os.fspath(path), map_location="cpu", _extra_files=extra)
    except (RuntimeError, OSError, ValueError) as e:
        raise ExportError(f"cannot load TorchScript file {path}: {str(e).strip().splitlines()[0]}") from e
    try:
        desc = json.loads(extra[EXTRA_FILE])
    except json.JSONDecodeError:
        raise ExportError(f"{path} is not a thor-sdk TorchScript training step (no {EXTRA_FILE})") from None
    if desc.get("format") != FORMAT:
        raise ExportError(f"{path} is not a thor-sdk TorchScript training step")
    return m, desc


class TorchScriptTrainer:
    """Harness trainer for a saved TorchScript step: ``step()`` = ``train_step(example_x, example_y)``."""

    def __init__(self, path):
        self.module, self.description = load_torchscript(path)
        self.module.train()
        self.last_loss = None

    def step(self):
        self.last_loss = self.module.train_step(self.module.example_x, self.module.example_y)

    def close(self):
        self.module = None
