"""The nets buildable by name (shipped as ``thor_sdk.models``): reference, model-zoo and held-out groups.

``build_model(name)`` returns a fresh ``torch.nn.Module``; ``model_spec(name)`` says what it eats:
the per-sample input shape and dtype, the label shape and the number of classes. torch is imported
only when a model is built.

Groups (``list_models(group)``): ``reference``, the 7 nets of the seed papers (``models/nets.py``;
``list_models()`` alone still lists only these); ``zoo``, the reference nets plus common on-device
architectures (``models/zoo.py``), the only source of the profile prior; ``heldout``, nets kept out of
the zoo for the generalization benchmark, which must never feed the prior; ``all``. See
``docs/model-zoo.md``.
"""

from dataclasses import dataclass, field

from thor_sdk.errors import NotFoundError, UsageError

VOCAB = 65  # characters of a small char-level vocabulary (the size of tiny-Shakespeare's); inputs are synthetic token ids
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
    group: str = "reference"  # "reference", "zoo" or "heldout" (see list_models)
    #: "error", or "stand-ins" for a net whose code calls an operator that the extraction takes apart into
    #: layers of known kinds (F.scaled_dot_product_attention: its projections, scores and softmax), marked
    #: approx; ``layers_of(name)`` extracts it so (thor_sdk.layers.extract.STAND_INS)
    unknown_ops: str = "error"

    def to_dict(self):
        return {
            "name": self.name,
            "description": self.description,
            "input_shape": list(self.input_shape),
            "input_dtype": self.input_dtype,
            "num_classes": self.num_classes,
            "label_shape": list(self.label_shape),
            "group": self.group,
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

GROUPS = ("reference", "zoo", "heldout", "all")


def _zoo(name, description, input_shape, num_classes=10, **kw):
    return ModelSpec(name, description, tuple(input_shape), num_classes=num_classes, group=kw.pop("group", "zoo"),
                     **kw)


def _lm(name, description, seq_len, vocab, group):
    return ModelSpec(name, description, (seq_len,), "int64", vocab, (seq_len,), vocab, group=group)


# common on-device architectures (models/zoo.py): with the reference nets, the profile prior's only source
_ZOO = (
    _zoo("vgg11_half", "VGG-11 with batch norm, widths halved, on 3x64x64 images, 100 classes", (3, 64, 64), 100),
    _zoo("resnet18_64", "ResNet-18 (ImageNet stem with max-pool) on 3x64x64 images, 200 classes", (3, 64, 64), 200),
    _zoo("resnet34_half", "ResNet-34 blocks (3,4,6,3), widths halved, on 3x64x64 images, 200 classes",
         (3, 64, 64), 200),
    _zoo("resnet50_half", "ResNet-50 bottlenecks (3,4,6,3), widths halved, on 3x64x64 images, 200 classes",
         (3, 64, 64), 200),
    _zoo("resnet20_gn", "CIFAR ResNet-20 (16/32/64) with GroupNorm of 2 groups in place of batch norm, as federated "
         "learning trains it on non-IID clients, on 3x32x32 images, 10 classes", (3, 32, 32)),
    _zoo("mnist_classic", "PyTorch's MNIST example as it stood until 2020: two 5x5 convs, channel dropout "
         "(nn.Dropout2d) on the second, functional max pooling, F.dropout, a log-softmax output, on 1x28x28 digits, "
         "10 classes", (1, 28, 28)),
    _zoo("mobilefacenet_64", "MobileFaceNet (PReLU, MobileNetV2 bottlenecks, global depthwise conv to a 128-d "
         "embedding) on 3x64x64 faces, 100 identities", (3, 64, 64), 100),
    _zoo("mobilenetv2_96", "MobileNetV2 (ImageNet strides, width 0.5) on 3x96x96 images, 10 classes", (3, 96, 96)),
    _zoo("mobilenetv3_small", "MobileNetV3-Small (hardswish, SE with hardsigmoid) on 3x96x96 images, 10 classes",
         (3, 96, 96)),
    _zoo("efficientnet_b0_small", "EfficientNet-B0 structure (SiLU, SE), width 0.5, reduced depth, on 3x96x96 "
         "images, 10 classes", (3, 96, 96)),
    _zoo("squeezenet11", "SqueezeNet 1.1 (fire modules, channel cat) on 3x64x64 images, 100 classes",
         (3, 64, 64), 100),
    _zoo("shufflenetv2_05", "ShuffleNetV2 0.5x (channel split, cat, channel shuffle) on 3x96x96 images, 10 classes",
         (3, 96, 96)),
    _zoo("regnetx_200mf", "RegNetX-200MF (X blocks of group width 8: grouped 3x3 convs of 3-46 groups) on 3x64x64 "
         "images, 100 classes", (3, 64, 64), 100),
    _zoo("resnext_cifar", "ResNeXt bottlenecks (cardinality 16, grouped 3x3 convs of 4-16 channels per group), one per "
         "stage, on 3x32x32 images, 10 classes", (3, 32, 32)),
    _zoo("densenet_small", "DenseNet-BC (growth 16, blocks 6/12/12/8) on 3x64x64 images, 200 classes",
         (3, 64, 64), 200),
    _zoo("darknet_tiny", "Tiny Darknet-style CNN (batch norm, LeakyReLU) on 3x64x64 images, 200 classes",
         (3, 64, 64), 200),
    _zoo("mixer_small", "MLP-Mixer (8x8 patches, dim 128, 4 blocks, GELU) on 3x64x64 images, 100 classes",
         (3, 64, 64), 100),
    _zoo("vit_tiny", "Vision Transformer (4x4 patches -> 64 tokens, dim 64, 4 blocks of timm-style 4-head "
         "attention: qkv projection, scaled_dot_product_attention; GELU MLP 128) on 3x32x32 images, 10 classes",
         (3, 32, 32)),
    _zoo("kwt_tiny", "Keyword Transformer (KWT-1: 12 pre-norm nn.TransformerEncoderLayer blocks, d=64, 1 head, GELU "
         "MLP 256) on 98x40 log-mel frames, 12 classes", (98, 40), 12),
    _zoo("attention_har", "self-attention HAR net (2 blocks of nn.MultiheadAttention, 4 heads of 16, ReLU "
         "feed-forward 128) on 128x9 UCI HAR windows, 6 classes", (128, 9), 6),
    _zoo("pvt_tiny", "PVT-style vision transformer (4x4 patches -> 256 tokens of 64, 2 blocks of spatial-reduction "
         "attention: nn.MultiheadAttention over 2x2-downsampled keys, GELU MLP 256) on 3x64x64 images, 10 classes",
         (3, 64, 64)),
    _zoo("fpn_lite", "conv backbone + FPN-style top-down neck (nearest upsample, add) on 3x96x96 images, 10 classes",
         (3, 96, 96)),
    _zoo("unet_small", "U-Net (milesial/Pytorch-UNet: transposed-conv ups, F.pad to the skip, cat), widths 16-256, on "
         "3x64x64 images, 2 classes per pixel", (3, 64, 64), 2, label_shape=(64 * 64,)),
    _zoo("lraspp_mbv3_small", "LR-ASPP segmentation head on MobileNetV3-Small (pooled sigmoid gate, bilinear "
         "upsampling) on 3x96x96 images, 2 classes per pixel", (3, 96, 96), 2, label_shape=(96 * 96,)),
    _zoo("resnet20_cifar", "CIFAR ResNet-20 (16/32/64) with option-A shortcuts (strided slice, F.pad of the channels) "
         "as akamaster/pytorch_resnet_cifar10 writes it, on 3x32x32 images, 10 classes", (3, 32, 32)),
    _zoo("erfnet_small", "ERFNet (downsamplers, factorised 3x1/1x3 blocks with channel dropout, the last two dilated 2 "
         "and 4, 3x3 transposed-conv decoder) on 3x64x64 images, 2 classes per pixel", (3, 64, 64), 2,
         label_shape=(64 * 64,)),
    _zoo("pointnet_small", "PointNet classifier (shared 1x1 conv1d MLP, torch.max over the points) on 3x512 point "
         "clouds, 10 classes", (3, 512)),
    ModelSpec("textcnn_kim", "Kim's CNN for sentences (conv1d 3/4/5 x 100, torch.max over time): seq 64, vocab 2000, "
              "2 classes", (64,), "int64", 2, (), 2000, group="zoo"),
    _zoo("cbam_resnet_small", "ResNet with CBAM attention (channel gate over average- and max-pooled features, "
         "spatial gate over the channels' mean and max) in six basic blocks 16-64, on 3x32x32 images, 10 classes",
         (3, 32, 32)),
    _zoo("poolformer_tiny", "PoolFormer (MetaFormer: GroupNorm, pool(x) - x token mixer, GELU 1x1-conv MLP, residuals), "
         "widths 32-256, blocks 1/1/3/1, on 3x64x64 images, 10 classes", (3, 64, 64)),
    _zoo("mnist_example", "PyTorch's MNIST example as it stands since 2020: two 3x3 convs, max pooling, dropout, a "
         "flatten of 9,216 features into a dense 128, on 1x28x28 digits, 10 classes", (1, 28, 28)),
    _zoo("simple_audio_cnn", "TensorFlow's simple audio recognition model: two 3x3 convs, max pooling, a flatten of "
         "12,544 features into a dense 128, on 1x32x32 spectrograms, 8 words", (1, 32, 32), 8),
    _zoo("micro_speech_tiny_conv", "TensorFlow Lite Micro's micro_speech model: one 10x8 conv of stride 2, 8 filters, "
         "the head straight from 4,000 flattened features, on 1x49x40 spectrogram frames, 4 classes", (1, 49, 40), 4),
    _zoo("ecg_cnn1d", "1-D CNN on 1x256 ECG windows (conv1d-BN-ReLU, average pooling, global max pooling over time, "
         "dense 64), 5 classes", (1, 256), 5),
    _zoo("tcn_har", "temporal convolutional network (4 residual blocks of dilated causal conv1d 64, kernel 3, "
         "dilations 1-8) on 9x128 UCI HAR windows, 6 classes", (9, 128), 6),
    _zoo("dscnn_kws", "DS-CNN-S keyword spotting on 1x49x10 MFCCs, 12 classes", (1, 49, 10), 12),
    _zoo("cnn1d_har", "1-D CNN on raw inertial windows, 9x128 (UCI HAR), 6 classes", (9, 128), 6),
    _zoo("deepconvlstm", "DeepConvLSTM (4 conv1d + 2-layer LSTM 128) on 113x24 sensor windows, 18 classes",
         (113, 24), 18),
    _zoo("eegnet1d", "EEGNet-style compact CNN (conv1d, ELU) on 22x256 EEG windows, 4 classes", (22, 256), 4),
    _zoo("gru_kws", "keyword-spotting GRU (2x128) with attention pooling on 98x40 log-mel frames, 12 classes",
         (98, 40), 12),
    _zoo("gru_har", "human-activity GRU (1x96, last step, dropout) on 128x9 UCI HAR windows (128 steps of 9 channels), "
         "6 classes", (128, 9), 6),
    _zoo("lstm_har", "human-activity LSTM (1x64, last step, dropout) on 128x9 UCI HAR windows, 6 classes",
         (128, 9), 6),
    _zoo("lstmcell_seq", "two stacked nn.LSTMCell (51 units, PyTorch's time-sequence-prediction example) stepped in a "
         "Python loop over 64x3 sensor sequences, last step, 5 classes", (64, 3), 5),
    _zoo("grucell_kws", "streaming keyword spotter: nn.GRUCell (128) stepped over 49x40 log-mel frames, 12 classes",
         (49, 40), 12),
    _zoo("mlp_tabular", "tabular MLP (256/256/128, batchnorm1d, dropout) on 54 features, 7 classes", (54,), 7),
    _lm("lstm2_lm", f"char-level LSTM language model: embedding 128, 2-layer LSTM 384, seq 100, vocab {VOCAB}",
        100, VOCAB, "zoo"),
    _lm("transformer_lm_small", f"char-level transformer: 4 layers, d=192, 3 heads of 64, ff 768, seq 128, "
        f"vocab {VOCAB}", 128, VOCAB, "zoo"),
    _lm("gpt_nano", f"character-level GPT as nanoGPT writes it: 4 blocks, d=128, 4 heads of 32, causal "
        f"F.scaled_dot_product_attention, GELU MLP 512, seq 128, vocab {VOCAB}", 128, VOCAB, "zoo"),
    _lm("word_lm_tiny", f"transformer language model of PyTorch's word_language_model example (batch first): "
        f"embedding 64, sinusoidal positions, 2 nn.TransformerEncoder layers of 2 heads under a causal mask, ReLU "
        f"feed-forward 128, seq 35, vocab {VOCAB}", 35, VOCAB, "zoo"),
    ModelSpec("transformer_cls", "transformer text classifier: 4 layers, d=128, 4 heads of 32, ff 512, seq 128, "
              "vocab 2000, 4 classes", (128,), "int64", 4, (), 2000, group="zoo"),
)

# held-out nets (models/zoo.py): for the generalization benchmark only; they never feed the prior
_HELDOUT = (
    _zoo("vgg_small", "3 VGG blocks (32/64/128) + 2 dense layers on 3x32x32 images, 10 classes", (3, 32, 32),
         group="heldout"),
    _zoo("mlp5", "5-layer MLP (512/384/256/128) on 300 features, 20 classes", (300,), 20, group="heldout"),
    _zoo("dscnn_bn", "depthwise-separable CNN (batch norm, ReLU6) on 3x48x48 images, 10 classes", (3, 48, 48),
         group="heldout"),
    _zoo("cnn1d_small", "1-D CNN (3 conv1d, batchnorm1d) on 6x100 sensor windows, 5 classes", (6, 100), 5,
         group="heldout"),
    _zoo("gru_small", "1-layer GRU (64) on 40x24 sensor sequences (40 steps of 24 features), 8 classes", (40, 24), 8,
         group="heldout"),
    _zoo("crnn_kws", "conv-recurrent keyword spotter (conv1d 40->64 + batchnorm1d, GRU 1x48) on 40x98 log-mel "
         "frames, 12 classes", (40, 98), 12, group="heldout"),
    _lm("transformer_tiny", f"char-level transformer: 2 layers, d=96, 3 heads of 32, ff 384, seq 32, vocab {VOCAB}",
        32, VOCAB, "heldout"),
    _zoo("resnet_tiny", "ResNet with 6 basic blocks (16/32/64) on 3x40x40 images, 10 classes", (3, 40, 40),
         group="heldout"),
    _zoo("se_cnn", "small CNN with squeeze-excitation and SiLU (24/48/96) on 3x56x56 images, 10 classes",
         (3, 56, 56), group="heldout"),
)

for _s in _ZOO + _HELDOUT:
    assert _s.name not in SPECS, _s.name
    SPECS[_s.name] = _s


def list_models(group="reference"):
    """Names of one group's nets, in a stable order: ``reference`` (the default: the 7 reference nets),
    ``zoo`` (the reference nets plus the zoo: the prior's source), ``heldout`` (never in the prior), ``all``."""
    if group not in GROUPS:
        raise UsageError(f"unknown model group {group!r}; known: {', '.join(GROUPS)}")
    if group == "all":
        return list(SPECS)
    if group == "zoo":
        return [n for n, s in SPECS.items() if s.group in ("reference", "zoo")]
    return [n for n, s in SPECS.items() if s.group == group]


def expand_models(specs):
    """Model specs with groups expanded, in order, without repeats: ``zoo:GROUP`` (``zoo:heldout``,
    ``zoo:reference``, ``zoo:zoo``, ``zoo:all``) becomes that group's names; anything else (a name,
    ``file.py:Class``, a layer-list JSON or ONNX path) is kept as given."""
    out = []
    for spec in specs:
        spec = str(spec).strip()
        names = list_models(spec[4:]) if spec.startswith("zoo:") else [spec] if spec else []
        out.extend(n for n in names if n not in out)
    return out


def group_of(name):
    """The group of a named net (``reference``, ``zoo``, ``heldout``), ``None`` for any other model form."""
    spec = SPECS.get(name)
    return spec.group if spec is not None else None


def model_spec(name):
    try:
        return SPECS[name]
    except KeyError:
        raise NotFoundError(f"unknown model {name!r}; known: {', '.join(SPECS)}") from None


def example_batch(name, batch_size, seed=0):
    """A random ``(x, y)`` batch for a named network: inputs (or token ids) and class labels."""
    spec = model_spec(name)
    if batch_size < 1:

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
    """A freshly initialised network of any group (deterministic for a given seed)."""
    spec = model_spec(name)
    import torch

    if spec.group == "reference":
        from . import nets as defs
    else:
        from . import zoo as defs

    torch.manual_seed(seed)
    return getattr(defs, name)(spec)
