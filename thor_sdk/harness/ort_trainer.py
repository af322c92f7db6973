"""Run an exported ONNX training step in stock onnxruntime, chained step after step.

``OrtTrainer(path)`` has the harness's trainer interface (``step()``, ``close()``): every ``step()``
runs the graph once and feeds each updated state output (``<name>.new``) back as its input for the
next step, exactly as a phone or Jetson harness does with the same file. The starting values come
from the model's initializers (see ``thor_sdk.exporters.onnx_train``). Outputs stay in
onnxruntime's own buffers between steps (``OrtValue``), so a step costs what the runtime costs, not
a copy to numpy and back.
"""

import os

from thor_sdk.errors import ExportError, MeasurementError

from thor_sdk.exporters.onnx_train import cached_export, describe, example_batch

from .denormals import denormals_flushed, set_denormals_flushed


def _session_options(threads=None):
    import onnxruntime as ort

    so = ort.SessionOptions()
    if threads:
        so.intra_op_num_threads = int(threads)
    so.log_severity_level = 3  # errors only: inputs with initializers are intended (they are defaults)
    # denormal floats flushed to zero on the session's own threads, as on the measuring thread
    # (thor_sdk.harness.denormals: a probe's fixed batch can drift into denormals, 30-100x slower on x86)
    so.add_session_config_entry("session.set_denormal_as_zero", "1")
    return so


class OrtTrainer:
    """Chained training steps of one exported ONNX step file. Its session's own threads flush denormals;
    the calling thread's float state is the caller's (``thor_sdk.harness.denormals``): onnxruntime sets
    flushing on the thread that makes the process's first session and leaves it so, which is undone here."""

    def __init__(self, path, threads=None):
        import onnx
        import onnxruntime as ort
        from onnx import numpy_helper

        path = os.fspath(path)
        try:
            with open(path, "rb") as f:
                data = f.read()
            model = onnx.load_from_string(data)
        except (OSError, ValueError) as e:
            raise ExportError(f"cannot read ONNX training step {path}: {e}") from e
        except Exception as e:  # protobuf DecodeError and friends: not an ONNX file
            raise ExportError(f"{path} is not an ONNX model: {type(e).__name__}") from e
        self.path = path
        self.description = describe(model)
        inits = {t.name: t for t in model.graph.initializer}
        names = [s["name"] for s in self.description["inputs"]]
        missing = [n for n in names if n not in inits]
        if missing:
            raise ExportError(f"{path}: inputs without a starting value: {', '.join(missing[:5])}")
        flushed = denormals_flushed()
        try:
            self.session = ort.InferenceSession(data, _session_options(threads), providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own exception types (Fail, InvalidGraph, ...)
            raise ExportError(f"onnxruntime cannot load {path}: {str(e).splitlines()[0] if str(e) else e}") from e
        finally:  # onnxruntime's first session of the process flushes this thread for good: give it back
            if denormals_flushed() != flushed:
                set_denormals_flushed(flushed)
        self.feeds = {n: ort.OrtValue.ortvalue_from_numpy(numpy_helper.to_array(inits[n]).copy()) for n in names}
        self.output_names = [s["name"] for s in self.description["outputs"]]
        index = {n: i for i, n in enumerate(self.output_names)}
        self._pairs = [(index[out], inp) for out, inp in self.description["state_pairs"]]
        self.last_outputs = None
        self.steps = 0

    def step(self):
        try:
            outs = self.session.run_with_ort_values(self.output_names, self.feeds)
        except Exception as e:  # onnxruntime.capi.onnxruntime_pybind11_state.* errors
            raise MeasurementError(f"onnxruntime failed running {self.path}: {str(e).splitlines()[0]}") from e
        for i, name in self._pairs:
            self.feeds[name] = outs[i]
        self.last_outputs = outs
        self.steps += 1

    @property
    def last_loss(self):
        return None if self.last_outputs is None else float(self.last_outputs[0].numpy())

    def output(self, name):
        """The last step's output ``name`` as numpy (e.g. ``x_grad``)."""
        if self.last_outputs is None:
            raise MeasurementError("no step has run yet")
        return self.last_outputs[self.output_names.index(name)].numpy()

    def state(self):
        """Current value of every input (parameters, buffers, optimizer state, data) as numpy arrays."""
        return {n: v.numpy() for n, v in self.feeds.items()}

    def close(self):
        self.session = None
        self.feeds = {}
        self.last_outputs = None


def _default_threads(threads):
    """onnxruntime's intra-op threads: as many as torch uses here (the host's --threads sets both)."""
    if threads:
        return int(threads)
    import torch

    return torch.get_num_threads()


def trainer_for_probe_model(pm, optimizer="sgd", lr=0.01, threads=None, cache=None, exporter=None):
    """An ``OrtTrainer`` for a THOR ``ProbeModel`` (exported once per content hash, then cached)."""
    path = cached_export(pm.module, pm.x, pm.y, loss="ce", optimizer=optimizer, x_requires_grad=pm.x_requires_grad,
                         lr=lr, cache=cache, exporter=exporter)
    return OrtTrainer(path, _default_threads(threads))


def trainer_for_model(model, batch_size, optimizer="sgd", lr=0.01, loss="ce", seed=0, threads=None, cache=None):
    """An ``OrtTrainer`` for a whole model on one random batch. A reference network by name: the same
    batch and weights as ``thor_sdk.harness.torch_trainer.trainer_for_model`` (``loss`` ce or mse); any
    other form (a ``ModelSource``, a layer-list JSON or ONNX file): the network, batch and loss
    ``thor_sdk.harness.whole_model.build_training`` gives, exported once and cached."""
    from thor_sdk.harness.whole_model import build_training, resolve_model
    from thor_sdk.models import build_model

    source = resolve_model(model)
    if source.name is not None:
        x, y = example_batch(source.name, batch_size, loss, seed)
        path = cached_export(build_model(source.name, seed), x, y, loss=loss, optimizer=optimizer, lr=lr, cache=cache)
    else:
        t = build_training(source, batch_size, seed)
        path = cached_export(t.module, t.x, t.y, loss=t.loss, optimizer=optimizer, lr=lr, cache=cache)
    return OrtTrainer(path, _default_threads(threads))
