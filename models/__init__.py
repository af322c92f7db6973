"""The reference networks of the seed papers, buildable by name (shipped as ``thor_sdk.models``).

``build_model(name)`` returns a fresh ``torch.nn.Module``; ``model_spec(name)`` says what it eats:
the per-sample input shape and dtype, the label shape and the number of classes. torch is imported
only when a model is built.
"""

from dataclasses import dataclass, field

from thor_sdk.errors import NotFoundError

VOCAB = 65  # characters of the bundled public-domain text (see thor_sdk.models.text)
SEQ_LEN = 64


@dataclass(frozen=True)
class ModelSpec:
    name: str
    description: str
    input_shape: tuple  # per sample
    input_dtype: str = "float32"  # or "int64" (token ids in [0, vocab))
    num_classes: int = 10
    label_shape: tuple = ()  # per sample; (T,) for next-token prediction
    vocab: int = 0
    paper: str = ""
    extra: dict = field(default_factory=dict)

    def to_dict(self):
        return {
            "name": self.name,
            "description": self.description,
            "input_shape": list(self.input_shape),
            "input_dtype": self.input_dtype,
            "num_classes": self.num_classes,
            "label_shape": list(self.label_shape),
        }


SPECS = {
    "lenet5": ModelSpec("lenet5", "LeNet-5 on 1x28x28 images (MNIST-sized), 10 classes", (1, 28, 28)),
    "cnn5": ModelSpec("cnn5", "5-layer CNN (4 conv + 1 linear) on 3x32x32 images, 10 classes", (3, 32, 32)),
    "har": ModelSpec(
        "har", "human-activity-recognition MLP on 561-feature sensor windows (UCI HAR), 6 classes",
        (561,), num_classes=6,
    ),
    "lstm": ModelSpec(
        "lstm", f"char-level LSTM language model: embedding 64, LSTM 256, seq {SEQ_LEN}, vocab {VOCAB}",
        (SEQ_LEN,), "int64", VOCAB, (SEQ_LEN,), VOCAB,
    ),
    "transformer": ModelSpec(
        "transformer",
        f"char-level transformer: 6 layers, 6 heads (head dim 64), d=256, ff 1024, seq {SEQ_LEN}, vocab {VOCAB}",
        (SEQ_LEN,), "int64", VOCAB, (SEQ_LEN,), VOCAB,
    ),
    "resnet18": ModelSpec("resnet18", "ResNet-18 (CIFAR variant) on 3x32x32 images, 10 classes", (3, 32, 32)),
    "mobilenetv2": ModelSpec(
        "mobilenetv2", "MobileNetV2 (CIFAR variant, width 1.0) on 3x32x32 images, 10 classes", (3, 32, 32)
    ),
}


def list_models():
    """Names of the reference networks, in a stable order."""
    return list(SPECS)


def model_spec(name):
    try:
        return SPECS[name]
    except KeyError:
        raise NotFoundError(f"unknown model {name!r}; known: {', '.join(SPECS)}") from None


def example_batch(name, batch_size, seed=0):
    """A random ``(x, y)`` batch for a reference network: inputs (or token ids) and class labels."""
    spec = model_spec(name)
    if batch_size < 1:
        from thor_sdk.errors import UsageError

        raise UsageError(f"batch size must be >= 1, got {batch_size}")
    import torch

    g = torch.Generator().manual_seed(seed)
    shape = (batch_size, *spec.input_shape)
    if spec.input_dtype == "int64":
        x = torch.randint(0, spec.vocab, shape, generator=g)
    else:
        x = torch.randn(shape, generator=g)
    y = torch.randint(0, spec.num_classes, (batch_size, *spec.label_shape), generator=g)
    return x, y


def build_model(name, seed=0):
    """A freshly initialised reference network (deterministic for a given seed)."""
    spec = model_spec(name)
    import torch

    from . import nets

    torch.manual_seed(seed)
    return getattr(nets, name)(spec)
