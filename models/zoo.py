"""Definitions of the model-zoo nets (the profile prior's source) and of the held-out nets (never in it).

Common on-device architectures written with plain ``torch.nn`` (no torchvision), scaled to phone-ish
inputs small enough that one training step at batch 16 takes well under 2 s on one CPU thread. Each
function takes the net's ``ModelSpec`` (see ``models/__init__.py``) and ends in an ``nn.Linear`` that
produces the class logits (THOR's output head), per pixel for a segmentation net as per token for a language
model (LR-ASPP and ERFNet end, as their papers' do, in their logits' bilinear upsampling or transposed conv). Only
operators with a THOR layer kind are used
(``thor-sdk kinds``); no in-place ops and no data-dependent Python control flow, so ``torch.fx`` traces
every net. Where a net departs from its paper (a square kernel, a Linear head instead of a 1x1-conv
classifier, fewer repeats) the function's docstring says so.
"""

import torch
from torch import nn
from torch.nn import functional as F

from .blocks import GRUSequence, LSTMSequence, TokenPositionalEmbedding, TransformerBlock
from .nets import BasicBlock, InvertedResidual


def _div8(v, divisor=8):
    """torchvision's ``_make_divisible``: round channels to a multiple of 8, never below 90%."""
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new


def _conv_bn(cin, cout, k, stride=1, groups=1, act=nn.ReLU):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, act()) if act is not None else nn.Sequential(*layers)


class _Head(nn.Module):
    """Global average pool, flatten, optional dropout, Linear: the classifier of most CNNs here."""

    def __init__(self, cin, num_classes, dropout=0.0):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.drop = nn.Dropout(dropout) if dropout else nn.Identity()
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        return self.fc(self.drop(self.flatten(self.pool(x))))


# -- zoo: image CNNs ---------------------------------------------------------------------------------------

def vgg11_half(spec):
    """VGG-11 with batch norm, every width halved, on 64x64 images (5 max-pools -> 2x2), 512-wide classifier."""
    cfg = (32, "M", 64, "M", 128, 128, "M", 256, 256, "M", 256, 256, "M")
    layers, c = [], spec.input_shape[0]
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(2))
        else:
            layers += [nn.Conv2d(c, v, 3, padding=1, bias=False), nn.BatchNorm2d(v), nn.ReLU()]
            c = v
    side = spec.input_shape[1] // 32
    return nn.Sequential(
        *layers, nn.Flatten(),
        nn.Linear(c * side * side, 512), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(512, 512), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(512, spec.num_classes),
    )


class _ResNet(nn.Module):
    """ImageNet-style ResNet: 7x7 stride-2 stem + 3x3 stride-2 max-pool, four stages, GAP, Linear."""

    def __init__(self, block, depths, widths, stem, num_classes):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, stem, 7, 2, 3, bias=False), nn.BatchNorm2d(stem), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        blocks, c = [], stem
        for i, (n, w) in enumerate(zip(depths, widths)):
            for j in range(n):
                blocks.append(block(c, w, 2 if (j == 0 and i > 0) else 1))
                c = blocks[-1].out_channels
        self.blocks = nn.Sequential(*blocks)
        self.head = _Head(c, num_classes)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


class _Basic(BasicBlock):
    def __init__(self, cin, cout, stride):
        super().__init__(cin, cout, stride)
        self.out_channels = cout


class _Bottleneck(nn.Module):
    """ResNet-50 bottleneck (v1.5: stride on the 3x3), expansion 4, projection shortcut when shapes change."""

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = self.out_channels = width * 4
        self.conv1, self.bn1, self.relu1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2, self.relu2 = nn.BatchNorm2d(width), nn.ReLU()
        self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
        self.relu3 = nn.ReLU()

    def forward(self, x):
        h = self.relu1(self.bn1(self.conv1(x)))
        h = self.relu2(self.bn2(self.conv2(h)))
        return self.relu3(self.bn3(self.conv3(h)) + self.shortcut(x))


def resnet18_64(spec):
    """ResNet-18 (ImageNet stem with max-pool, full widths 64-512) on 64x64 images."""
    return _ResNet(_Basic, (2, 2, 2, 2), (64, 128, 256, 512), 64, spec.num_classes)


def resnet34_half(spec):
    """ResNet-34 block structure (3, 4, 6, 3 basic blocks), widths halved (32-256), on 64x64 images."""
    return _ResNet(_Basic, (3, 4, 6, 3), (32, 64, 128, 256), 32, spec.num_classes)


def resnet50_half(spec):
    """ResNet-50 block structure (3, 4, 6, 3 bottlenecks, expansion 4), widths halved (out 128-1024), 64x64."""
    return _ResNet(_Bottleneck, (3, 4, 6, 3), (32, 64, 128, 256), 32, spec.num_classes)


def resnet20_gn(spec):
    """CIFAR ResNet-20 (3x3 stem of 16, three stages of three basic blocks, 16/32/64) with GroupNorm of 2 groups
    in place of batch norm, as federated learning on non-IID clients trains it (Hsieh et al., ICML 2020: batch
    statistics differ across devices); projection shortcuts where the shape changes (the paper's option A pads)."""
    layers, c = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.GroupNorm(2, 16), nn.ReLU()], 16
    for cout, stride in ((16, 1), (32, 2), (64, 2)):
        for j in range(3):
            layers.append(BasicBlock(c, cout, stride if j == 0 else 1, norm=lambda ch: nn.GroupNorm(2, ch)))
            c = cout
    return nn.Sequential(*layers, _Head(c, spec.num_classes))


class _MnistClassic(nn.Module):
    """The ``Net`` of PyTorch's examples/mnist until 2020, as written there (``conv2_drop`` an ``nn.Dropout2d``)."""

    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, num_classes)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        return F.log_softmax(self.fc2(x), dim=1)


def mnist_classic(spec):
    """PyTorch's MNIST example net before 2020: the channel dropout of most tutorial CNNs of that time."""
    return _MnistClassic(spec.num_classes)


def _cbp(cin, cout, k, stride=1, groups=1, prelu=True):
    """``_conv_bn`` with, unless ``prelu`` is False (a linear layer), a PReLU per channel."""
    conv_bn = _conv_bn(cin, cout, k, stride, groups, act=None)
    return nn.Sequential(*conv_bn, nn.PReLU(cout)) if prelu else conv_bn


class _FaceBottleneck(nn.Module):
    """MobileFaceNet's bottleneck: MobileNetV2's inverted residual with PReLU in place of ReLU6."""

    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.conv = nn.Sequential(_cbp(cin, hidden, 1), _cbp(hidden, hidden, 3, stride, hidden),
                                  _cbp(hidden, cout, 1, prelu=False))

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


class _MobileFaceNet(nn.Module):
    #: (expansion, out channels, repeats, stride), Chen et al. 2018, Table 1
    CFG = ((2, 64, 5, 2), (4, 128, 1, 2), (2, 128, 6, 1), (4, 128, 1, 2), (2, 128, 2, 1))

    def __init__(self, num_classes, side):
        super().__init__()
        layers, c = [_cbp(3, 64, 3, 2), _cbp(64, 64, 3, 1, 64)], 64
        for t, cout, n, s in self.CFG:
            for i in range(n):
                layers.append(_FaceBottleneck(c, cout, s if i == 0 else 1, t))
                c = cout
        gd = side // 16
        layers += [_cbp(c, 512, 1),  # the global depthwise conv (GDConv) over the last map, then a linear 1x1
                   nn.Sequential(nn.Conv2d(512, 512, gd, groups=512, bias=False), nn.BatchNorm2d(512)),
                   _cbp(512, 128, 1, prelu=False), nn.Flatten()]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(128, num_classes)

    def forward(self, x):
        return self.fc(self.features(x))


def mobilefacenet_64(spec):
    """MobileFaceNet (Chen et al. 2018: PReLU per channel, MobileNetV2 bottlenecks, a global depthwise conv to a
    128-d embedding) at full widths on 3x64x64 faces (the paper's 112x112 scaled down, so its GDConv is 4x4 not
    7x7), with a Linear classifier over identities on the embedding (softmax training, not ArcFace's margin)."""
    return _MobileFaceNet(spec.num_classes, spec.input_shape[1])


class _MobileNetV2(nn.Module):
    CFG = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))

    def __init__(self, num_classes, width):
        super().__init__()
        c = _div8(32 * width)
        layers = [nn.Conv2d(3, c, 3, 2, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU6()]
        for t, cout, n, s in self.CFG:
            cout = _div8(cout * width)
            for i in range(n):
                layers.append(InvertedResidual(c, cout, s if i == 0 else 1, t))
                c = cout
        layers += [nn.Conv2d(c, 1280, 1, bias=False), nn.BatchNorm2d(1280), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.head = _Head(1280, num_classes, dropout=0.2)

    def forward(self, x):
        return self.head(self.features(x))


def mobilenetv2_96(spec):
    """MobileNetV2 with ImageNet strides, width 0.5 (channels rounded to 8, last conv kept at 1280), 96x96."""
    return _MobileNetV2(spec.num_classes, 0.5)


class _SE(nn.Module):
    """Squeeze-and-excitation: GAP, 1x1 conv down, act, 1x1 conv up, gate, per-channel mul."""

    def __init__(self, c, squeeze, act=nn.ReLU, gate=nn.Hardsigmoid):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1, self.act, self.fc2, self.gate = nn.Conv2d(c, squeeze, 1), act(), nn.Conv2d(squeeze, c, 1), gate()

    def forward(self, x):
        return x * self.gate(self.fc2(self.act(self.fc1(self.pool(x)))))


class _MBv3Block(nn.Module):
    def __init__(self, cin, k, exp, cout, se, act, stride):
        super().__init__()
        layers = []
        if exp != cin:
            layers.append(_conv_bn(cin, exp, 1, act=act))
        layers.append(_conv_bn(exp, exp, k, stride, groups=exp, act=act))
        if se:
            layers.append(_SE(exp, _div8(exp // 4)))
        layers.append(_conv_bn(exp, cout, 1, act=None))
        self.block = nn.Sequential(*layers)
        self.use_res = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.block(x) if self.use_res else self.block(x)


class _MobileNetV3Small(nn.Module):
    RE, HS = nn.ReLU, nn.Hardswish
    # kernel, expanded, out, squeeze-excite, activation, stride (torchvision's mobilenet_v3_small)
    CFG = ((3, 16, 16, True, RE, 2), (3, 72, 24, False, RE, 2), (3, 88, 24, False, RE, 1),
           (5, 96, 40, True, HS, 2), (5, 240, 40, True, HS, 1), (5, 240, 40, True, HS, 1),
           (5, 120, 48, True, HS, 1), (5, 144, 48, True, HS, 1), (5, 288, 96, True, HS, 2),
           (5, 576, 96, True, HS, 1), (5, 576, 96, True, HS, 1))

    def __init__(self, num_classes):
        super().__init__()
        layers, c = [_conv_bn(3, 16, 3, 2, act=nn.Hardswish)], 16
        for k, exp, cout, se, act, s in self.CFG:
            layers.append(_MBv3Block(c, k, exp, cout, se, act, s))
            c = cout
        layers.append(_conv_bn(c, 576, 1, act=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.pool, self.flatten = nn.AdaptiveAvgPool2d(1), nn.Flatten()
        self.classifier = nn.Sequential(nn.Linear(576, 1024), nn.Hardswish(), nn.Dropout(0.2),
                                        nn.Linear(1024, num_classes))

    def forward(self, x):
        return self.classifier(self.flatten(self.pool(self.features(x))))


def mobilenetv3_small(spec):
    """MobileNetV3-Small (width 1.0; hardswish, SE with hardsigmoid gate and per-channel mul) on 96x96."""
    return _MobileNetV3Small(spec.num_classes)


class _MBConv(nn.Module):
    """EfficientNet MBConv: 1x1 expand, depthwise kxk, SE (SiLU, sigmoid; squeeze = block input / 4), 1x1."""

    def __init__(self, cin, cout, k, stride, expand):
        super().__init__()
        exp = cin * expand
        layers = [] if expand == 1 else [_conv_bn(cin, exp, 1, act=nn.SiLU)]
        layers += [_conv_bn(exp, exp, k, stride, groups=exp, act=nn.SiLU),
                   _SE(exp, max(1, cin // 4), act=nn.SiLU, gate=nn.Sigmoid),
                   _conv_bn(exp, cout, 1, act=None)]
        self.block = nn.Sequential(*layers)
        self.use_res = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.block(x) if self.use_res else self.block(x)


def efficientnet_b0_small(spec):
    """EfficientNet-B0 structure (MBConv1/6, kernels 3/5, SiLU, SE) at width 0.5 and reduced depth
    (repeats 1,1,2,2,2,2,1 instead of 1,2,2,3,3,4,1), head conv 640, on 96x96 images."""
    width = 0.5
    # expand, kernel, stride, out, repeats
    cfg = ((1, 3, 1, 16, 1), (6, 3, 2, 24, 1), (6, 5, 2, 40, 2), (6, 3, 2, 80, 2), (6, 5, 1, 112, 2),
           (6, 5, 2, 192, 2), (6, 3, 1, 320, 1))
    c = _div8(32 * width)
    layers = [_conv_bn(3, c, 3, 2, act=nn.SiLU)]
    for e, k, s, cout, n in cfg:
        cout = _div8(cout * width)
        for i in range(n):
            layers.append(_MBConv(c, cout, k, s if i == 0 else 1, e))
            c = cout
    head = _div8(1280 * width)
    layers.append(_conv_bn(c, head, 1, act=nn.SiLU))
    return nn.Sequential(*layers, _Head(head, spec.num_classes, dropout=0.2))


class _Fire(nn.Module):
    def __init__(self, cin, squeeze, e1, e3):
        super().__init__()
        self.squeeze, self.sq_act = nn.Conv2d(cin, squeeze, 1), nn.ReLU()
        self.e1, self.e1_act = nn.Conv2d(squeeze, e1, 1), nn.ReLU()
        self.e3, self.e3_act = nn.Conv2d(squeeze, e3, 3, padding=1), nn.ReLU()

    def forward(self, x):
        s = self.sq_act(self.squeeze(x))
        return torch.cat([self.e1_act(self.e1(s)), self.e3_act(self.e3(s))], 1)


def squeezenet11(spec):
    """SqueezeNet 1.1 (fire modules with channel cat) on 64x64; max-pools without ceil_mode, and a Linear
    head after global pooling instead of the 1x1-conv classifier (THOR's output head is a Linear)."""
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
        _Fire(64, 16, 64, 64), _Fire(128, 16, 64, 64), nn.MaxPool2d(3, 2),
        _Fire(128, 32, 128, 128), _Fire(256, 32, 128, 128), nn.MaxPool2d(3, 2),
        _Fire(256, 48, 192, 192), _Fire(384, 48, 192, 192), _Fire(384, 64, 256, 256), _Fire(512, 64, 256, 256),
        nn.Dropout(0.5), _Head(512, spec.num_classes),
    )


class _ShuffleBlock(nn.Module):
    """ShuffleNetV2 unit: stride 1 splits the channels (chunk) and keeps one half; stride 2 has two branches;
    both concatenate and then shuffle the channels (view, transpose, view)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.stride, self.cout = stride, cout
        half = cout // 2
        if stride > 1:
            self.branch1 = nn.Sequential(_conv_bn(cin, cin, 3, stride, groups=cin, act=None),
                                         _conv_bn(cin, half, 1))
        b2_in = cin if stride > 1 else half
        self.branch2 = nn.Sequential(_conv_bn(b2_in, half, 1), _conv_bn(half, half, 3, stride, groups=half, act=None),
                                     _conv_bn(half, half, 1))

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat([x1, self.branch2(x2)], 1)
        else:
            out = torch.cat([self.branch1(x), self.branch2(x)], 1)
        b, h, w = out.size(0), out.size(2), out.size(3)
        out = out.view(b, 2, self.cout // 2, h, w).transpose(1, 2).contiguous()
        return out.view(b, self.cout, h, w)


def shufflenetv2_05(spec):
    """ShuffleNetV2 0.5x (stages 48/96/192 with 4/8/4 units, conv5 1024, mean-pool) on 96x96 images."""
    layers, c = [_conv_bn(3, 24, 3, 2), nn.MaxPool2d(3, 2, 1)], 24
    for cout, n in ((48, 4), (96, 8), (192, 4)):
        for i in range(n):
            layers.append(_ShuffleBlock(c, cout, 2 if i == 0 else 1))
            c = cout
    layers.append(_conv_bn(c, 1024, 1))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(*layers)
            self.fc = nn.Linear(1024, spec.num_classes)

        def forward(self, x):
            return self.fc(self.features(x).mean((2, 3)))

    return Net()


class _GroupBottleneck(nn.Module):
    """A bottleneck whose 3x3 conv is grouped (stride on it): 1x1 conv-BN-ReLU, 3x3 conv of ``groups`` groups-BN-ReLU,
    1x1 conv-BN, a projection shortcut where the shape changes, ReLU after the add. RegNetX's X block (bottleneck
    ratio 1, groups = width / group width) and ResNeXt's (cardinality ``groups``, out = 2 x the grouped width)."""

    def __init__(self, cin, width, cout, stride, groups):
        super().__init__()
        self.a = _conv_bn(cin, width, 1)
        self.b = _conv_bn(width, width, 3, stride, groups=groups)
        self.c = _conv_bn(width, cout, 1, act=None)
        self.shortcut = _conv_bn(cin, cout, 1, stride, act=None) if stride != 1 or cin != cout else nn.Identity()
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.c(self.b(self.a(x))) + self.shortcut(x))


def regnetx_200mf(spec):
    """RegNetX-200MF (Radosavovic et al. 2020: 3x3 stride-2 stem of 32, stages of 1/1/4/7 X blocks, widths
    24/56/152/368, group width 8: grouped 3x3 convs of 3, 7, 19 and 46 groups) on 64x64 images."""
    layers, c = [_conv_bn(spec.input_shape[0], 32, 3, 2)], 32
    for depth, width in ((1, 24), (1, 56), (4, 152), (7, 368)):
        for i in range(depth):
            layers.append(_GroupBottleneck(c, width, width, 2 if i == 0 else 1, width // 8))
            c = width
    return nn.Sequential(*layers, _Head(c, spec.num_classes))


def resnext_cifar(spec):
    """ResNeXt on CIFAR-sized images (Xie et al. 2017), cardinality 16 of width 4, 8 and 16 (grouped 3x3 convs
    of 64, 128 and 256 channels, out 128/256/512), one block per stage after a 3x3 stem of 32; ResNeXt-29 has
    three blocks per stage and cardinality 8 of width 64."""
    layers, c = [_conv_bn(spec.input_shape[0], 32, 3)], 32
    for width, stride in ((64, 1), (128, 2), (256, 2)):
        layers.append(_GroupBottleneck(c, width, 2 * width, stride, 16))
        c = 2 * width
    return nn.Sequential(*layers, _Head(c, spec.num_classes))


class _DenseLayer(nn.Module):
    """DenseNet-BC layer: BN-ReLU-1x1 (4k) - BN-ReLU-3x3 (k), concatenated to its input."""

    def __init__(self, cin, growth):
        super().__init__()
        mid = 4 * growth
        self.f = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, mid, 1, bias=False),
                               nn.BatchNorm2d(mid), nn.ReLU(), nn.Conv2d(mid, growth, 3, 1, 1, bias=False))

    def forward(self, x):
        return torch.cat([x, self.f(x)], 1)


def densenet_small(spec):
    """DenseNet-BC (growth 16, dense blocks of 6/12/12/8 layers, compression 0.5, 2x2 avg-pool transitions),
    ImageNet stem (7x7 stride 2 + max-pool) on 64x64 images."""
    growth, c = 16, 32
    layers = [nn.Conv2d(3, c, 7, 2, 3, bias=False), nn.BatchNorm2d(c), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    blocks = (6, 12, 12, 8)
    for i, n in enumerate(blocks):
        for _ in range(n):
            layers.append(_DenseLayer(c, growth))
            c += growth
        if i < len(blocks) - 1:
            layers += [nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 1, bias=False), nn.AvgPool2d(2)]
            c //= 2
    layers += [nn.BatchNorm2d(c), nn.ReLU()]
    return nn.Sequential(*layers, _Head(c, spec.num_classes))


def darknet_tiny(spec):
    """Tiny Darknet-style classifier (3x3 convs with 1x1 bottlenecks, batch norm, LeakyReLU 0.1, five 2x2
    max-pools) on 64x64 images; GAP and a Linear head instead of the 1x1-conv classifier."""
    cfg = ((3, 16), "M", (3, 32), "M", (1, 16), (3, 128), (1, 16), (3, 128), "M", (1, 32), (3, 256), (1, 32),
           (3, 256), "M", (1, 64), (3, 512), (1, 64), (3, 512), (1, 128))
    layers, c = [], 3
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(2))
            continue
        k, cout = v
        layers += [nn.Conv2d(c, cout, k, 1, k // 2, bias=False), nn.BatchNorm2d(cout), nn.LeakyReLU(0.1)]
        c = cout
    return nn.Sequential(*layers, _Head(c, spec.num_classes))


class _MixerBlock(nn.Module):
    def __init__(self, tokens, dim, token_hidden, channel_hidden):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.tok = nn.Sequential(nn.Linear(tokens, token_hidden), nn.GELU(), nn.Linear(token_hidden, tokens))
        self.ch = nn.Sequential(nn.Linear(dim, channel_hidden), nn.GELU(), nn.Linear(channel_hidden, dim))

    def forward(self, x):  # (B, tokens, dim)
        x = x + self.tok(self.ln1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.ch(self.ln2(x))


class _PatchTokens(nn.Module):
    """The skeleton MLP-Mixer and PVT share here: patches to tokens (``self.patch``, a strided conv), ``self.blocks``
    over them, a final layer norm, the mean over the tokens into a linear classifier."""

    def _head(self, dim, num_classes):
        self.ln = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, num_classes)

    def forward(self, x):
        h = self.patch(x).flatten(2).transpose(1, 2)  # (B, tokens, dim)
        return self.fc(self.ln(self.blocks(h)).mean(dim=1))


class _Mixer(_PatchTokens):
    def __init__(self, num_classes, patch=8, side=64, dim=128, depth=4):
        super().__init__()
        tokens = (side // patch) ** 2
        self.patch = nn.Conv2d(3, dim, patch, patch)
        self.blocks = nn.Sequential(*[_MixerBlock(tokens, dim, 64, 4 * dim) for _ in range(depth)])
        self._head(dim, num_classes)


def mixer_small(spec):
    """MLP-Mixer (8x8 patches -> 64 tokens, dim 128, 4 blocks, token MLP 64, channel MLP 512, GELU) on 64x64."""
    return _Mixer(spec.num_classes, side=spec.input_shape[1])


class _Attention(nn.Module):
    """Multi-head self-attention as ViT code writes it (timm's ``Attention``): one qkv projection, heads split
    by reshape and permute, ``F.scaled_dot_product_attention``, the heads merged and projected."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        return self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, d))


class _ViTBlock(nn.Module):
    def __init__(self, dim, heads, mlp):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(dim), _Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class _ViT(nn.Module):
    def __init__(self, num_classes, side, patch=4, dim=64, depth=4, heads=4, mlp=128):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, stride=patch)
        self.pos = nn.Parameter(torch.zeros(1, (side // patch) ** 2, dim))
        self.blocks = nn.Sequential(*[_ViTBlock(dim, heads, mlp) for _ in range(depth)])
        self.ln = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, num_classes)

    def forward(self, x):
        h = self.patch(x).flatten(2).transpose(1, 2) + self.pos  # (B, tokens, dim)
        return self.fc(self.ln(self.blocks(h)).mean(dim=1))


def vit_tiny(spec):
    """A small Vision Transformer as on-device CIFAR code writes it: 4x4 patches of a 32x32 image (64 tokens),
    learned position embedding, 4 pre-norm blocks of multi-head attention written as timm writes it (dim 64,
    4 heads of 16: one qkv projection, ``F.scaled_dot_product_attention`` over the tokens) and a GELU MLP
    (128), mean-pooled."""
    return _ViT(spec.num_classes, side=spec.input_shape[1])


class _CausalSelfAttention(nn.Module):
    """nanoGPT's attention: one projection to queries, keys and values, split, heads by view and transpose,
    ``F.scaled_dot_product_attention(is_causal=True)`` (dropout when training), the heads merged and projected."""

    def __init__(self, dim, heads, dropout):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, d))


class _GPTBlock(nn.Module):
    def __init__(self, dim, heads, dropout):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(dim), _CausalSelfAttention(dim, heads, dropout)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim), nn.Dropout(dropout))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


def gpt_nano(spec):
    """A character-level GPT as nanoGPT writes it (its shakespeare_char configuration, scaled down): token and
    position embeddings, 4 pre-norm blocks of causal self-attention through ``F.scaled_dot_product_attention``
    (d=128, 4 heads of 32, dropout 0.1) and a GELU MLP (512), a final layer norm and the language-model head."""
    from .blocks import TokenPositionalEmbedding

    class _GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = TokenPositionalEmbedding(spec.vocab, 128, spec.input_shape[0])
            self.blocks = nn.Sequential(*[_GPTBlock(128, 4, 0.1) for _ in range(4)])
            self.ln_f = nn.LayerNorm(128)
            self.lm_head = nn.Linear(128, spec.num_classes)

        def forward(self, idx):
            return self.lm_head(self.ln_f(self.blocks(self.wte(idx))))

    return _GPT()


class _PositionalEncoding(nn.Module):
    """The sinusoidal positional encoding of PyTorch's word_language_model example: a fixed buffer added to the
    embeddings, then dropout."""

    def __init__(self, dim, max_len, dropout):
        super().__init__()
        import math

        pos = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
        div = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
        pe = torch.zeros(max_len, dim)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
        self.register_buffer("pe", pe)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(x + self.pe)  # the example slices pe to the batch's length; fx cannot, so max_len = it


def word_lm_tiny(spec):
    """The transformer language model of PyTorch's word_language_model example (``TransformerModel``), batch first
    and scaled to a phone: embedding 64 (scaled by its square root), sinusoidal positions, 2 ``nn.TransformerEncoder``
    layers of 2 heads with a ReLU feed-forward of 128 and dropout 0.2, under the causal mask
    ``nn.Transformer.generate_square_subsequent_mask`` makes in forward (the stack recognises it and runs its
    attention causally), and the decoder over the vocabulary; 35 tokens (the example's bptt)."""
    import math

    t, dim = spec.input_shape[0], 64
    layer = nn.TransformerEncoderLayer(dim, 2, 128, dropout=0.2, batch_first=True)

    class _WordLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(spec.vocab, dim)
            self.pos_encoder = _PositionalEncoding(dim, t, 0.2)
            self.transformer_encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.decoder = nn.Linear(dim, spec.num_classes)

        def forward(self, src):
            mask = nn.Transformer.generate_square_subsequent_mask(src.size(1))
            h = self.pos_encoder(self.encoder(src) * math.sqrt(dim))
            return self.decoder(self.transformer_encoder(h, mask=mask))

    return _WordLM()


def kwt_tiny(spec):
    """Keyword Transformer (KWT-1, Berg et al. 2021) on 98x40 log-mel frames: each frame projected to 64, 12
    pre-norm ``nn.TransformerEncoderLayer`` blocks (one head of 64, GELU MLP 256, dropout 0.1, as
    ``nn.TransformerEncoder`` stacks them), mean-pooled (KWT classifies a class token; a mean keeps the layer
    list free of a token concatenation)."""
    frames, mels = spec.input_shape
    layer = nn.TransformerEncoderLayer(64, 1, 256, dropout=0.1, activation="gelu", batch_first=True, norm_first=True)

    class _KWT(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(mels, 64)
            self.encoder = nn.TransformerEncoder(layer, 12, norm=nn.LayerNorm(64), enable_nested_tensor=False)
            self.fc = nn.Linear(64, spec.num_classes)

        def forward(self, x):
            return self.fc(self.encoder(self.embed(x)).mean(dim=1))

    return _KWT()


class _AttentionHAR(nn.Module):
    """Self-attention over sensor time steps as HAR code writes it with ``nn.MultiheadAttention`` (called with
    its defaults: the head-averaged weights returned), a residual, layer norm and a ReLU feed-forward."""

    def __init__(self, channels, num_classes, dim=64, heads=4, blocks=2):
        super().__init__()
        self.embed = nn.Linear(channels, dim)
        self.att = nn.ModuleList(nn.MultiheadAttention(dim, heads, batch_first=True) for _ in range(blocks))
        self.ln1 = nn.ModuleList(nn.LayerNorm(dim) for _ in range(blocks))
        self.ff = nn.ModuleList(nn.Sequential(nn.Linear(dim, 2 * dim), nn.ReLU(), nn.Linear(2 * dim, dim))
                                for _ in range(blocks))
        self.ln2 = nn.ModuleList(nn.LayerNorm(dim) for _ in range(blocks))
        self.fc = nn.Linear(dim, num_classes)

    def forward(self, x):
        h = self.embed(x)
        for att, ln1, ff, ln2 in zip(self.att, self.ln1, self.ff, self.ln2):
            a, _ = att(h, h, h)
            h = ln1(h + a)
            h = ln2(h + ff(h))
        return self.fc(h.mean(dim=1))


def attention_har(spec):
    """Self-attention HAR net on 128x9 inertial windows (UCI HAR): steps projected to 64, two blocks of
    ``nn.MultiheadAttention`` (4 heads) with a residual, layer norm and a ReLU feed-forward (128), mean-pooled."""
    steps, channels = spec.input_shape
    return _AttentionHAR(channels, spec.num_classes)


class _SRABlock(nn.Module):
    """A PVT block: spatial-reduction attention (keys and values from the tokens downsampled by a strided conv,
    ``nn.MultiheadAttention`` as cross-attention, weights not returned) and a GELU MLP, pre-norm."""

    def __init__(self, dim, heads, side, reduction, mlp):
        super().__init__()
        self.side = side
        self.ln1, self.ln_kv, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.sr = nn.Conv2d(dim, dim, reduction, stride=reduction)
        self.att = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

    def forward(self, x):
        b, n, d = x.shape
        h = self.ln1(x)
        kv = self.ln_kv(self.sr(h.transpose(1, 2).reshape(b, d, self.side, self.side)).flatten(2).transpose(1, 2))
        x = x + self.att(h, kv, kv, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class _PVT(_PatchTokens):
    def __init__(self, num_classes, side, patch=4, dim=64, depth=2, heads=2, reduction=2, mlp=256):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, stride=patch)
        self.blocks = nn.Sequential(*[_SRABlock(dim, heads, side // patch, reduction, mlp) for _ in range(depth)])
        self._head(dim, num_classes)


def pvt_tiny(spec):
    """A Pyramid Vision Transformer stage (PVT-v1's spatial-reduction attention) on 3x64x64 images: 4x4 patches
    (256 tokens of 64), two pre-norm blocks whose ``nn.MultiheadAttention`` (2 heads) attends from every token
    to the tokens downsampled 2x2 by a strided conv (64 keys), and a GELU MLP (256), mean-pooled."""
    return _PVT(spec.num_classes, side=spec.input_shape[1])


class _FPNLite(nn.Module):
    def __init__(self, num_classes, neck=64):
        super().__init__()
        self.c1 = _conv_bn(3, 32, 3, 2)
        self.c2 = nn.Sequential(_conv_bn(32, 64, 3, 2), _conv_bn(64, 64, 3))
        self.c3 = nn.Sequential(_conv_bn(64, 128, 3, 2), _conv_bn(128, 128, 3))
        self.c4 = nn.Sequential(_conv_bn(128, 256, 3, 2), _conv_bn(256, 256, 3))
        self.l2, self.l3, self.l4 = nn.Conv2d(64, neck, 1), nn.Conv2d(128, neck, 1), nn.Conv2d(256, neck, 1)
        self.up3, self.up2 = nn.Upsample(scale_factor=2, mode="nearest"), nn.Upsample(scale_factor=2, mode="nearest")
        self.smooth = _conv_bn(neck, neck, 3)
        self.head = _Head(neck, num_classes)

    def forward(self, x):
        c2 = self.c2(self.c1(x))
        c3 = self.c3(c2)
        p4 = self.l4(self.c4(c3))
        p3 = self.l3(c3) + self.up3(p4)
        p2 = self.l2(c2) + self.up2(p3)
        return self.head(self.smooth(p2))


def fpn_lite(spec):
    """Small conv backbone with an FPN-style top-down neck (1x1 laterals, nearest 2x upsampling, add),
    classified from the finest level (stride 4) on 96x96 images."""
    return _FPNLite(spec.num_classes)


class _DoubleConv(nn.Sequential):
    """U-Net's (3x3 conv, batch norm, ReLU) twice, the convs without bias."""

    def __init__(self, cin, cout):
        super().__init__(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                         nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


class _Up(nn.Module):
    """U-Net's up step as milesial/Pytorch-UNet writes it: a 2x2 stride-2 transposed conv halving the channels,
    ``F.pad`` to the skip's size (computed from both sizes), ``torch.cat`` with the skip, a double conv."""

    def __init__(self, cin, cout):
        super().__init__()
        self.up = nn.ConvTranspose2d(cin, cin // 2, 2, stride=2)
        self.conv = _DoubleConv(cin, cout)

    def forward(self, x, skip):
        x = self.up(x)
        dy, dx = skip.size()[2] - x.size()[2], skip.size()[3] - x.size()[3]
        x = F.pad(x, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
        return self.conv(torch.cat([skip, x], dim=1))


class _UNet(nn.Module):
    def __init__(self, cin, width, num_classes):
        super().__init__()
        w = [width * 2 ** i for i in range(5)]
        self.inc = _DoubleConv(cin, w[0])
        self.downs = nn.ModuleList(nn.Sequential(nn.MaxPool2d(2), _DoubleConv(w[i], w[i + 1])) for i in range(4))
        self.ups = nn.ModuleList(_Up(w[i + 1], w[i]) for i in reversed(range(4)))
        self.fc = nn.Linear(w[0], num_classes)

    def forward(self, x):
        skips = [self.inc(x)]
        for down in self.downs:
            skips.append(down(skips[-1]))
        x = skips.pop()
        for up in self.ups:
            x = up(x, skips.pop())
        return self.fc(x.permute(0, 2, 3, 1).flatten(1, 2))  # per pixel: (B, H x W, classes)


def unet_small(spec):
    """U-Net as milesial/Pytorch-UNet writes it (its default transposed-conv ups, F.pad to each skip's size, cat),
    widths quartered (16-256), four levels, on 64x64 images, two classes per pixel (a person mask). The 1x1-conv
    classifier is a Linear over each pixel's channels (the same product), so its logits are (B, H x W, classes)
    and its loss the per-pixel cross-entropy THOR's output head costs (as a language model's per token)."""
    return _UNet(spec.input_shape[0], 16, spec.num_classes)


class _LRASPP(nn.Module):
    """MobileNetV3-Small features and the LR-ASPP head (Howard et al. 2019; torchvision's LRASPPHead): the high
    branch's 1x1 conv, gated by a pooled sigmoid, bilinearly upsampled to the stride-8 features, classified and
    added to their own classifier's logits; the sum upsampled bilinearly to the input."""

    def __init__(self, num_classes, inter=128):
        super().__init__()
        net = _MobileNetV3Small(num_classes)
        blocks = list(net.features)
        self.low = nn.Sequential(*blocks[:3])  # stem and the blocks down to stride 8 (24 channels)
        self.high = nn.Sequential(*blocks[3:])  # on to stride 32 and the 576-channel 1x1 conv
        self.cbr = _conv_bn(576, inter, 1)
        self.scale = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(576, inter, 1, bias=False), nn.Sigmoid())
        self.low_classifier, self.high_classifier = nn.Conv2d(24, num_classes, 1), nn.Conv2d(inter, num_classes, 1)

    def forward(self, x):
        low = self.low(x)
        high = self.high(low)
        h = self.cbr(high) * self.scale(high)
        h = F.interpolate(h, size=low.shape[-2:], mode="bilinear", align_corners=False)
        out = self.low_classifier(low) + self.high_classifier(h)
        out = F.interpolate(out, size=x.shape[-2:], mode="bilinear", align_corners=False)
        return out.permute(0, 2, 3, 1).flatten(1, 2)  # per pixel: (B, H x W, classes)


def lraspp_mbv3_small(spec):
    """LR-ASPP on MobileNetV3-Small (torchvision's lraspp_mobilenet_v3 head, the on-device segmentation net) on
    96x96 images, two classes per pixel. Departs from torchvision: the last stage is not dilated (output stride 32,
    not 16: dilated convs have no kind), so the high branch is upsampled x4; the logits are returned per pixel,
    (B, H x W, classes), for the per-pixel cross-entropy (a loss outside THOR's sum: no Linear head)."""
    return _LRASPP(spec.num_classes)


class _BasicA(nn.Module):
    """The CIFAR ResNet basic block with the paper's option-A shortcut as akamaster/pytorch_resnet_cifar10 writes
    it: where the shape changes, the input subsampled by a strided slice and zero-padded to the new channels."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.pad = (cout - cin) // 2 if stride != 1 or cin != cout else None

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        short = x if self.pad is None else F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, self.pad, self.pad), "constant", 0)
        return F.relu(out + short)


def resnet20_cifar(spec):
    """CIFAR ResNet-20 (He et al. 2016, 16/32/64, three blocks a stage) with the option-A shortcuts of
    akamaster/pytorch_resnet_cifar10 (the implementation federated and on-device papers train): functional ReLUs,
    F.pad of a strided slice, global average pooling, Linear."""
    layers, c = [_conv_bn(3, 16, 3)], 16
    for cout, stride in ((16, 1), (32, 2), (64, 2)):
        for j in range(3):
            layers.append(_BasicA(c, cout, stride if j == 0 else 1))
            c = cout
    return nn.Sequential(*layers, _Head(c, spec.num_classes))

class _PointNet(nn.Module):
    def __init__(self, num_classes, width=512):
        super().__init__()
        self.width = width
        self.feat = nn.Sequential(nn.Conv1d(3, 64, 1), nn.BatchNorm1d(64), nn.ReLU(),
                                  nn.Conv1d(64, 128, 1), nn.BatchNorm1d(128), nn.ReLU(),
                                  nn.Conv1d(128, width, 1), nn.BatchNorm1d(width), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(width, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Dropout(0.3),
                                  nn.Linear(256, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Linear(128, num_classes))

    def forward(self, x):  # (B, 3, points)
        x = torch.max(self.feat(x), 2, keepdim=True)[0]  # the symmetric function: a max over the points
        return self.head(x.view(-1, self.width))


def pointnet_small(spec):
    """PointNet's classifier (Qi et al. 2017) as its PyTorch ports write it: a shared MLP of 1x1 conv1d with batch
    norm over the points, ``torch.max`` over them, an MLP head with dropout, on 512 points of a depth sensor's
    cloud (ModelNet10's 10 classes). Departs from the paper: no input or feature transform nets (their 3x3 and 64x64
    matrix products are products of activations, with no kind), the global feature 512 wide, not 1024."""
    return _PointNet(spec.num_classes)


class _TextCNN(nn.Module):
    def __init__(self, vocab, num_classes, emb=128, filters=100, sizes=(3, 4, 5)):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.convs = nn.ModuleList(nn.Conv1d(emb, filters, k) for k in sizes)
        self.drop, self.fc = nn.Dropout(0.5), nn.Linear(filters * len(sizes), num_classes)

    def forward(self, x):  # (B, T) token ids
        e = self.emb(x).transpose(1, 2)
        pooled = [torch.max(F.relu(conv(e)), dim=2)[0] for conv in self.convs]  # max over time
        return self.fc(self.drop(torch.cat(pooled, 1)))


def textcnn_kim(spec):
    """Kim's CNN for sentence classification (2014) as PyTorch ports write it: embeddings, conv1d of widths 3, 4
    and 5 (100 filters each), ReLU, ``torch.max`` over time, cat, dropout 0.5, Linear; 64 tokens of a 2,000-word
    vocabulary, 2 classes."""
    return _TextCNN(spec.vocab, spec.num_classes)


class _Downsampler(nn.Module):
    """ERFNet's (and ENet's) downsampler: a 3x3 stride-2 conv of out - in channels beside a 2x2 max pool of the
    input, concatenated, batch norm, ReLU."""

    def __init__(self, cin, cout):
        super().__init__()
        self.conv, self.pool = nn.Conv2d(cin, cout - cin, 3, stride=2, padding=1), nn.MaxPool2d(2)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return F.relu(self.bn(torch.cat([self.conv(x), self.pool(x)], 1)))


class _NonBottleneck1d(nn.Module):
    """ERFNet's non-bottleneck-1D block: 3x1 and 1x3 convs twice (ReLU between, batch norm after each pair), the
    second pair dilated ``d`` along its kernel as the paper's (``dilation=(d, 1)`` and ``(1, d)``), channel
    dropout, a residual."""

    def __init__(self, c, p, d=1):
        super().__init__()
        self.c31a, self.c13a = nn.Conv2d(c, c, (3, 1), padding=(1, 0)), nn.Conv2d(c, c, (1, 3), padding=(0, 1))
        self.c31b = nn.Conv2d(c, c, (3, 1), padding=(d, 0), dilation=(d, 1))
        self.c13b = nn.Conv2d(c, c, (1, 3), padding=(0, d), dilation=(1, d))
        self.bn1, self.bn2 = nn.BatchNorm2d(c), nn.BatchNorm2d(c)
        self.drop = nn.Dropout2d(p)

    def forward(self, x):
        h = F.relu(self.bn1(self.c13a(F.relu(self.c31a(x)))))
        h = self.drop(self.bn2(self.c13b(F.relu(self.c31b(h)))))
        return F.relu(h + x)


class _ERFNet(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.encoder = nn.Sequential(_Downsampler(3, 16), _Downsampler(16, 64),
                                     *[_NonBottleneck1d(64, 0.03) for _ in range(3)], _Downsampler(64, 128),
                                     *[_NonBottleneck1d(128, 0.3, d) for d in (2, 4)])
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(128, 64, 3, stride=2, padding=1, output_padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            *[_NonBottleneck1d(64, 0.0) for _ in range(2)],
            nn.ConvTranspose2d(64, 16, 3, stride=2, padding=1, output_padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            *[_NonBottleneck1d(16, 0.0) for _ in range(2)],
            nn.ConvTranspose2d(16, num_classes, 2, stride=2))

    def forward(self, x):
        out = self.decoder(self.encoder(x))
        return out.permute(0, 2, 3, 1).flatten(1, 2)  # per pixel: (B, H x W, classes)


def erfnet_small(spec):
    """ERFNet (Romera et al. 2017), the real-time segmentation net of cars and phones: downsamplers (a strided conv
    beside a max pool, cat), non-bottleneck-1D blocks of factorised 3x1/1x3 convs with channel dropout, and a
    decoder of 3x3 stride-2 transposed convs with output padding, ending in a 2x2 transposed conv to the classes;
    64x64 images, 2 classes per pixel. Departs from the paper: 3 and 2 encoder blocks instead of 5 and 8 (the two
    at 128 channels dilated 2 and 4 of the paper's 2, 4, 8, 16: on an 8x8 map); the logits returned per pixel,
    (B, H x W, classes), for the per-pixel cross-entropy (a loss outside THOR's sum: no Linear head)."""
    return _ERFNet(spec.num_classes)



def dscnn_kws(spec):
    """DS-CNN-S keyword spotting (64 channels, 4 depthwise-separable blocks) on 1x49x10 MFCCs, as Hello Edge and
    MLPerf Tiny build it: a 10x4 first conv of stride 2 (padded 5 and 1: 25x5 out, TF's "same"), then 3x3
    depthwise and pointwise convs."""
    layers = [nn.Sequential(nn.Conv2d(1, 64, (10, 4), 2, (5, 1), bias=False), nn.BatchNorm2d(64), nn.ReLU())]
    for _ in range(4):
        layers += [_conv_bn(64, 64, 3, groups=64), _conv_bn(64, 64, 1)]
    return nn.Sequential(*layers, _Head(64, spec.num_classes, dropout=0.4))


def _two_convs_dense(spec):
    """The tutorial CNN of PyTorch's and Keras' MNIST examples: two 3x3 convs (32, 64; unpadded) with ReLU, 2x2 max
    pooling, dropout 0.25, a flatten into a dense 128 with ReLU, dropout 0.5, the head."""
    c, h, w = spec.input_shape
    return nn.Sequential(
        nn.Conv2d(c, 32, 3, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Dropout(0.25), nn.Flatten(), nn.Linear(64 * ((h - 4) // 2) * ((w - 4) // 2), 128), nn.ReLU(),
        nn.Dropout(0.5), nn.Linear(128, spec.num_classes),
    )


def mnist_example(spec):
    """PyTorch's MNIST example net of today (examples/mnist/main.py) on 1x28x28: ``_two_convs_dense``, the flatten of
    9,216 features into the dense 128 being the flatten-then-dense head of most tutorial CNNs, which the zoo's pooled
    heads lack. The example's closing ``F.log_softmax`` (it trains with ``F.nll_loss``) is the cross-entropy's own."""
    return _two_convs_dense(spec)


def simple_audio_cnn(spec):
    """TensorFlow's "Simple audio recognition" tutorial model on its spectrograms resized to 1x32x32 (Speech Commands
    mini, 8 words): ``_two_convs_dense`` (Keras' "valid" convs), a flatten of 12,544 features. The tutorial's input
    ``Normalization`` layer (a fixed per-feature affine) is left out, as is its ``Resizing``: the spectrogram comes
    resized."""
    return _two_convs_dense(spec)


def micro_speech_tiny_conv(spec):
    """TensorFlow Lite Micro's micro_speech model ("tiny_conv" of tensorflow/examples/speech_commands) on 1x49x40
    spectrogram frames, 4 classes (silence, unknown, "yes", "no"): one 10x8 conv of 8 filters, stride 2 (TF's "same",
    padded 5 and 3 here: 25x20 out), ReLU, dropout, then the head straight from the 4,000 flattened features."""
    return nn.Sequential(
        nn.Conv2d(spec.input_shape[0], 8, (10, 8), 2, (5, 3)), nn.ReLU(), nn.Dropout(0.5), nn.Flatten(),
        nn.Linear(8 * 25 * 20, spec.num_classes),
    )


# -- zoo: sensor, audio, text and tabular nets -------------------------------------------------------------

def cnn1d_har(spec):
    """1-D CNN on raw accelerometer/gyroscope windows (9 channels x 128 samples, UCI HAR): five conv1d +
    batchnorm1d + ReLU, two max-pools, global average pooling over time, dropout, Linear."""
    c = spec.input_shape[0]
    layers = []
    for cout, k, pool in ((64, 5, False), (64, 5, True), (128, 3, False), (128, 3, True), (128, 3, False)):
        layers += [nn.Conv1d(c, cout, k, padding=k // 2, bias=False), nn.BatchNorm1d(cout), nn.ReLU()]
        if pool:
            layers.append(nn.MaxPool1d(2))
        c = cout
    return nn.Sequential(*layers, nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Dropout(0.5),
                         nn.Linear(c, spec.num_classes))


class _AttnRNN(nn.Module):
    """A recurrent encoder with additive attention pooling over time, then a 2-layer classifier."""

    def __init__(self, rnn, hidden, num_classes, att=64):
        super().__init__()
        self.rnn = rnn
        self.att1, self.att_act, self.att2 = nn.Linear(hidden, att), nn.Tanh(), nn.Linear(att, 1)
        self.fc1, self.act, self.fc2 = nn.Linear(hidden, 64), nn.ReLU(), nn.Linear(64, num_classes)

    def forward(self, x):  # (B, T, features)
        h = self.rnn(x)  # (B, T, hidden)
        s = self.att2(self.att_act(self.att1(h))).flatten(1)  # (B, T)
        a = torch.softmax(s, dim=-1).view(x.size(0), -1, 1)
        pooled = (h * a).sum(dim=1)  # the attention-weighted sum over time
        return self.fc2(self.act(self.fc1(pooled)))


class _CBAM(nn.Module):
    """CBAM (Woo et al., 2018) as its common PyTorch ports write it: a channel gate (one shared 1x1-conv MLP over the
    average- and the max-pooled features, summed, sigmoid) then a spatial gate (the mean and the max over the
    channels, concatenated, a 7x7 conv with batch norm, sigmoid), each multiplied into the features."""

    def __init__(self, c, reduction=8):
        super().__init__()
        self.avg, self.max = nn.AdaptiveAvgPool2d(1), nn.AdaptiveMaxPool2d(1)
        self.fc1, self.act, self.fc2 = nn.Conv2d(c, c // reduction, 1), nn.ReLU(), nn.Conv2d(c // reduction, c, 1)
        self.spatial = nn.Sequential(nn.Conv2d(2, 1, 7, padding=3, bias=False), nn.BatchNorm2d(1))

    def forward(self, x):
        x = x * torch.sigmoid(self.fc2(self.act(self.fc1(self.avg(x)))) + self.fc2(self.act(self.fc1(self.max(x)))))
        pooled = torch.cat([torch.mean(x, dim=1, keepdim=True), torch.max(x, dim=1, keepdim=True)[0]], dim=1)
        return x * torch.sigmoid(self.spatial(pooled))


class _CBAMBlock(BasicBlock):
    """A ResNet basic block with CBAM on its residual branch, before the add (the paper's placement)."""

    def __init__(self, cin, cout, stride):
        super().__init__(cin, cout, stride)
        self.cbam = _CBAM(cout)

    def forward(self, x):
        out = self.cbam(self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x))))))
        return self.relu2(out + self.shortcut(x))


def _six_block_resnet(block, num_classes):
    """A 3x3 stem (16) and six residual blocks ``block(cin, cout, stride)`` (16, 16, 32/2, 32, 64/2, 64), GAP,
    Linear."""
    layers, c = [_conv_bn(3, 16, 3)], 16
    for cout, s in ((16, 1), (16, 1), (32, 2), (32, 1), (64, 2), (64, 1)):
        layers.append(block(c, cout, s))
        c = cout
    return nn.Sequential(*layers, _Head(c, num_classes))


def cbam_resnet_small(spec):
    """ResNet with CBAM attention on 3x32x32: 3x3 stem (16) and six CBAM basic blocks (16, 16, 32/2, 32, 64/2,
    64), GAP, Linear; channel-gate reduction 8 (the paper's 16, on these narrow widths)."""
    return _six_block_resnet(_CBAMBlock, spec.num_classes)


def ecg_cnn1d(spec):
    """1-D CNN for heartbeat classification on 1x256 ECG windows (5 classes, as MIT-BIH's AAMI groups), written as
    Keras ports write it: conv1d-BN-ReLU blocks with average pooling, global max pooling over time
    (``nn.AdaptiveMaxPool1d(1)``, Keras' GlobalMaxPooling1D), dropout, a dense layer and the head."""
    layers, c = [], spec.input_shape[0]
    for cout, k in ((16, 7), (32, 5), (64, 5), (64, 3)):
        layers += [nn.Conv1d(c, cout, k, padding=k // 2, bias=False), nn.BatchNorm1d(cout), nn.ReLU()]
        layers += [nn.AvgPool1d(2)] if cout != 64 or k != 3 else []
        c = cout
    return nn.Sequential(*layers, nn.AdaptiveMaxPool1d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(c, 64),
                         nn.ReLU(), nn.Linear(64, spec.num_classes))


class _Chomp(nn.Module):
    """The right ``n`` steps of a sequence cut off (the TCN's ``Chomp1d``): a conv padded on both sides made causal."""

    def __init__(self, n):
        super().__init__()
        self.n = n

    def forward(self, x):
        return x[:, :, :-self.n]


class _TemporalBlock(nn.Module):
    """A TCN residual block (Bai et al. 2018, locuslab/TCN's TemporalBlock): two dilated causal convs (padded
    ``dilation x (kernel - 1)``, the right end chomped), each ReLU and dropout; a 1x1 conv on the residual where the
    widths differ. Without weight normalisation (a parametrisation of the weights, not a layer)."""

    def __init__(self, cin, cout, k, d, p=0.2):
        super().__init__()
        pad = d * (k - 1)
        self.net = nn.Sequential(nn.Conv1d(cin, cout, k, padding=pad, dilation=d), _Chomp(pad), nn.ReLU(),
                                 nn.Dropout(p), nn.Conv1d(cout, cout, k, padding=pad, dilation=d), _Chomp(pad),
                                 nn.ReLU(), nn.Dropout(p))
        self.down = nn.Conv1d(cin, cout, 1) if cin != cout else None
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.net(x) + (x if self.down is None else self.down(x)))


class _TCN(nn.Module):
    def __init__(self, cin, widths, k, num_classes):
        super().__init__()
        blocks = []
        for i, c in enumerate(widths):
            blocks.append(_TemporalBlock(cin, c, k, 2 ** i))
            cin = c
        self.tcn = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        return self.fc(self.tcn(x)[:, :, -1])  # the last step, as the TCN's sequence classifier reads it


def tcn_har(spec):
    """Temporal convolutional network (Bai, Kolter, Koltun 2018; locuslab/TCN) on 9x128 UCI HAR windows: four
    residual blocks of dilated causal conv1d (64 channels, kernel 3, dilations 1, 2, 4, 8: a receptive field of 61
    steps), the last step's features to a Linear; 6 classes."""
    return _TCN(spec.input_shape[0], (64, 64, 64, 64), 3, spec.num_classes)


class _PoolMixer(nn.Module):
    """PoolFormer's token mixer: average pooling minus its input (``pool(x) - x``; the block adds x back)."""

    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)

    def forward(self, x):
        return self.pool(x) - x


class _PoolFormerBlock(nn.Module):
    def __init__(self, c, mlp_ratio=4):
        super().__init__()
        self.norm1, self.mixer = nn.GroupNorm(1, c), _PoolMixer()
        self.norm2 = nn.GroupNorm(1, c)
        self.mlp = nn.Sequential(nn.Conv2d(c, c * mlp_ratio, 1), nn.GELU(), nn.Conv2d(c * mlp_ratio, c, 1))

    def forward(self, x):
        x = x + self.mixer(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def poolformer_tiny(spec):
    """PoolFormer (MetaFormer, Yu et al. 2022) at S12's structure scaled down: a 7x7 stride-4 patch embedding, four
    stages (32, 64, 128, 256 wide; 1, 1, 3, 1 blocks) joined by 3x3 stride-2 convs, each block a GroupNorm(1) and
    ``pool(x) - x`` token mixer then a GroupNorm(1) and a GELU MLP of 1x1 convs (ratio 4), each residual; the head's
    GroupNorm, global average pooling and Linear; on 3x64x64. No layer scale (PoolFormer's option off)."""
    widths, depths = (32, 64, 128, 256), (1, 1, 3, 1)
    layers, c = [nn.Conv2d(spec.input_shape[0], widths[0], 7, 4, 2)], widths[0]
    for i, (w, d) in enumerate(zip(widths, depths)):
        if i:
            layers.append(nn.Conv2d(c, w, 3, 2, 1))
        layers += [_PoolFormerBlock(w) for _ in range(d)]
        c = w
    return nn.Sequential(*layers, nn.GroupNorm(1, c), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(c, spec.num_classes))


def gru_kws(spec):
    """Keyword spotting GRU (2 layers, 128 units) over 98 frames of 40 log-mel features, with additive
    attention pooling (tanh, softmax over time, per-frame mul), 12 classes (Speech Commands)."""
    return _AttnRNN(GRUSequence(spec.input_shape[1], 128, num_layers=2), 128, spec.num_classes)


class _LastStepHead(nn.Module):
    """A recurrent layer's last step, dropout, then a linear classifier."""

    def __init__(self, rnn, hidden, num_classes, p=0.5):
        super().__init__()
        self.rnn, self.drop, self.fc = rnn, nn.Dropout(p), nn.Linear(hidden, num_classes)

    def forward(self, x):
        return self.fc(self.drop(self.rnn(x)[:, -1]))


def gru_har(spec):
    """Human-activity GRU: one layer of 96 units over UCI HAR windows (128 steps of 9 inertial channels),
    classified from the last step after dropout, 6 classes (the common single-layer recurrent HAR baseline)."""
    return _LastStepHead(GRUSequence(spec.input_shape[1], 96), 96, spec.num_classes)


def lstm_har(spec):
    """Human-activity LSTM: one layer of 64 units over UCI HAR windows (128 steps of 9 inertial channels),
    classified from the last step after dropout, 6 classes (the single-layer recurrent HAR baseline, as an
    LSTM: the zoo's other LSTMs read 64-128 features into 128-384 units)."""
    return _LastStepHead(LSTMSequence(spec.input_shape[1], 64), 64, spec.num_classes)


class _CellLoop(nn.Module):
    """Recurrent cells stepped over time in a Python loop, the way seq2seq decoders, char-RNNs and PyTorch's
    time-sequence-prediction example write them: zero initial states sized by the batch, each cell reading the
    one below, classified from the top cell's last hidden state."""

    def __init__(self, cells, num_classes):
        super().__init__()
        self.cells = nn.ModuleList(cells)
        self.fc = nn.Linear(cells[-1].hidden_size, num_classes)

    def forward(self, x):  # (B, T, features)
        states = []
        for cell in self.cells:
            h = x.new_zeros(x.size(0), cell.hidden_size)
            states.append((h, x.new_zeros(x.size(0), cell.hidden_size)) if isinstance(cell, nn.LSTMCell) else h)
        for t in range(x.size(1)):
            inp = x[:, t]
            for i, cell in enumerate(self.cells):
                states[i] = cell(inp, states[i])
                inp = states[i][0] if isinstance(cell, nn.LSTMCell) else states[i]
        return self.fc(inp)


def lstmcell_seq(spec):
    """Two stacked nn.LSTMCell of 51 units, as PyTorch's time-sequence-prediction example stacks them, stepped over
    64 steps of 3 sensor features, classified from the last step."""
    return _CellLoop([nn.LSTMCell(spec.input_shape[1], 51), nn.LSTMCell(51, 51)], spec.num_classes)


def grucell_kws(spec):
    """A keyword spotter whose nn.GRUCell of 128 units is stepped over 49 frames of 40 log-mel features (a
    streaming recognizer updates its state one frame at a time), 12 classes."""
    return _CellLoop([nn.GRUCell(spec.input_shape[1], 128)], spec.num_classes)


class _DeepConvLSTM(nn.Module):
    def __init__(self, channels, num_classes, filters=64, hidden=128):
        super().__init__()
        convs, c = [], channels
        for _ in range(4):
            convs += [nn.Conv1d(c, filters, 5), nn.ReLU()]
            c = filters
        self.convs = nn.Sequential(*convs)
        self.lstm = LSTMSequence(filters, hidden, num_layers=2)
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(hidden, num_classes)

    def forward(self, x):  # (B, channels, T)
        h = self.lstm(self.convs(x).transpose(1, 2))  # (B, T - 16, hidden)
        return self.fc(self.drop(h[:, -1]))


def deepconvlstm(spec):
    """DeepConvLSTM (4 temporal convs of 64 filters, kernel 5, then a 2-layer LSTM of 128, last step) on
    113 sensor channels x 24 samples (Opportunity), 18 classes; convs written as conv1d over time."""
    return _DeepConvLSTM(spec.input_shape[0], spec.num_classes)


def eegnet1d(spec):
    """EEGNet-style compact EEG classifier on 22 electrodes x 256 samples: depthwise temporal conv1d (2 per
    electrode), pointwise spatial mix, batchnorm1d, ELU, average pools (EEGNet's; max-pools until 2026-11-28, when
    1-D average pooling had no kind), separable conv."""
    ch = spec.input_shape[0]
    t = spec.input_shape[1]
    return nn.Sequential(
        nn.Conv1d(ch, 2 * ch, 33, padding=16, groups=ch, bias=False), nn.BatchNorm1d(2 * ch),
        nn.Conv1d(2 * ch, 16, 1, bias=False), nn.BatchNorm1d(16), nn.ELU(), nn.AvgPool1d(4), nn.Dropout(0.25),
        nn.Conv1d(16, 16, 15, padding=7, groups=16, bias=False), nn.Conv1d(16, 16, 1, bias=False),
        nn.BatchNorm1d(16), nn.ELU(), nn.AvgPool1d(8), nn.Dropout(0.25),
        nn.Flatten(), nn.Linear(16 * (t // 32), spec.num_classes),
    )


def lstm2_lm(spec):
    """Character LSTM language model: embedding 128, 2-layer LSTM of 384, dropout, per-token Linear."""
    return nn.Sequential(nn.Embedding(spec.vocab, 128), LSTMSequence(128, 384, num_layers=2), nn.Dropout(0.2),
                         nn.Linear(384, spec.vocab))


class _TextClassifier(nn.Module):
    def __init__(self, vocab, seq_len, d, heads, head_dim, ff, depth, num_classes):
        super().__init__()
        self.embed = TokenPositionalEmbedding(vocab, d, seq_len)
        self.blocks = nn.Sequential(*[TransformerBlock(d, heads, head_dim, ff) for _ in range(depth)])
        self.ln = nn.LayerNorm(d)
        self.drop = nn.Dropout(0.1)
        self.fc = nn.Linear(d, num_classes)

    def forward(self, idx):
        return self.fc(self.drop(self.ln(self.blocks(self.embed(idx))).mean(dim=1)))


def transformer_cls(spec):
    """Transformer encoder text classifier: 4 blocks, d 128, 4 heads of 32, ff 512, seq 128, vocab 2000,
    mean-pooled over tokens, 4 classes."""
    return _TextClassifier(spec.vocab, spec.input_shape[0], 128, 4, 32, 512, 4, spec.num_classes)


def transformer_lm_small(spec):
    """Character transformer language model: 4 blocks, d 192, 3 heads of 64, ff 768, seq 128, vocab 65."""
    t = spec.input_shape[0]
    return nn.Sequential(TokenPositionalEmbedding(spec.vocab, 192, t),
                         *[TransformerBlock(192, 3, 64, 768) for _ in range(4)],
                         nn.LayerNorm(192), nn.Linear(192, spec.vocab))


def mlp_tabular(spec):
    """Tabular MLP (54 features, Covertype-like): 3 hidden Linear layers 256/256/128 with batchnorm1d,
    ReLU and dropout, then a Linear to 7 classes."""
    f = spec.input_shape[0]
    return nn.Sequential(
        nn.Linear(f, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Dropout(0.1),
        nn.Linear(256, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Dropout(0.1),
        nn.Linear(256, 128), nn.ReLU(), nn.Dropout(0.1),
        nn.Linear(128, spec.num_classes),
    )


# -- held-out nets: for the generalization benchmark only, never in the prior ------------------------------

def vgg_small(spec):
    """Three VGG blocks (two 3x3 conv + ReLU, max-pool; 32/64/128) and two dense layers on 3x32x32."""
    layers, c = [], 3
    for cout in (32, 64, 128):
        layers += [nn.Conv2d(c, cout, 3, padding=1), nn.ReLU(), nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU(),
                   nn.MaxPool2d(2)]
        c = cout
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(128 * 4 * 4, 256), nn.ReLU(), nn.Dropout(0.3),
                         nn.Linear(256, spec.num_classes))


def mlp5(spec):
    """Five Linear layers (300 -> 512 -> 384 -> 256 -> 128 -> 20) with ReLU and dropout."""
    dims = (spec.input_shape[0], 512, 384, 256, 128)
    layers = []
    for a, b in zip(dims, dims[1:]):
        layers += [nn.Linear(a, b), nn.ReLU(), nn.Dropout(0.2)]
    return nn.Sequential(*layers, nn.Linear(dims[-1], spec.num_classes))


def dscnn_bn(spec):
    """Depthwise-separable CNN with batch norm and ReLU6 (32 -> 64 -> 128 -> 128 -> 256 -> 256) on 3x48x48."""
    layers, c = [_conv_bn(3, 32, 3, 2, act=nn.ReLU6)], 32
    for cout, s in ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1)):
        layers += [_conv_bn(c, c, 3, s, groups=c, act=nn.ReLU6), _conv_bn(c, cout, 1, act=nn.ReLU6)]
        c = cout
    return nn.Sequential(*layers, _Head(c, spec.num_classes))


def cnn1d_small(spec):
    """Three conv1d layers (32/64/64, kernels 7/5/3) with batchnorm1d, ReLU and max-pools on 6x100, GAP,
    two Linear layers."""
    return nn.Sequential(
        nn.Conv1d(spec.input_shape[0], 32, 7, padding=3), nn.BatchNorm1d(32), nn.ReLU(), nn.MaxPool1d(2),
        nn.Conv1d(32, 64, 5, padding=2), nn.BatchNorm1d(64), nn.ReLU(), nn.MaxPool1d(2),
        nn.Conv1d(64, 64, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, spec.num_classes),
    )


class _LastStep(nn.Module):
    def __init__(self, rnn, hidden, num_classes):
        super().__init__()
        self.rnn, self.fc = rnn, nn.Linear(hidden, num_classes)

    def forward(self, x):
        return self.fc(self.rnn(x)[:, -1])


def gru_small(spec):
    """One GRU layer of 64 units over 40 steps of 24 sensor features, classified from the last step."""
    return _LastStep(GRUSequence(spec.input_shape[1], 64), 64, spec.num_classes)


class _CRNN(nn.Module):
    def __init__(self, mels, num_classes, filters=64, hidden=48):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(mels, filters, 3, padding=1), nn.BatchNorm1d(filters), nn.ReLU())
        self.rnn = GRUSequence(filters, hidden)
        self.fc = nn.Linear(hidden, num_classes)

    def forward(self, x):  # (B, mels, T)
        return self.fc(self.rnn(self.conv(x).transpose(1, 2))[:, -1])


def crnn_kws(spec):
    """Convolutional-recurrent keyword spotter: a conv1d over time (40 log-mel bands -> 64, batch norm,
    ReLU), then one GRU layer of 48 units over the 98 frames, classified from the last step, 12 classes."""
    return _CRNN(spec.input_shape[0], spec.num_classes)


def transformer_tiny(spec):
    """Character transformer language model: 2 blocks, d 96, 3 heads of 32, ff 384, seq 32, vocab 65."""
    t = spec.input_shape[0]
    return nn.Sequential(TokenPositionalEmbedding(spec.vocab, 96, t),
                         *[TransformerBlock(96, 3, 32, 384) for _ in range(2)],
                         nn.LayerNorm(96), nn.Linear(96, spec.vocab))


def resnet_tiny(spec):
    """3x3 stem (16) and six basic residual blocks (16, 16, 32/2, 32, 64/2, 64) on 3x40x40, GAP, Linear."""
    return _six_block_resnet(BasicBlock, spec.num_classes)


def se_cnn(spec):
    """Small CNN with squeeze-excitation (SiLU, sigmoid gate): three conv-BN-SiLU stages (24/48/96, stride 2)
    each followed by SE, on 3x56x56."""
    layers, c = [], 3
    for cout in (24, 48, 96):
        layers += [_conv_bn(c, cout, 3, 2, act=nn.SiLU), _conv_bn(cout, cout, 3, act=nn.SiLU),
                   _SE(cout, cout // 8, act=nn.SiLU, gate=nn.Sigmoid)]
        c = cout
    return nn.Sequential(*layers, _Head(c, spec.num_classes, dropout=0.1))

