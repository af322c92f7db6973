"""Definitions of the reference networks (torchvision is not required)."""

from torch import nn

from .blocks import LSTMSequence, TokenPositionalEmbedding, TransformerBlock


def lenet5(spec):
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120), nn.ReLU(),
        nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, spec.num_classes),
    )


def cnn5(spec):
    layers, c = [], 3
    for out in (32, 64, 128, 256):
        layers += [nn.Conv2d(c, out, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
        c = out
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(256 * 2 * 2, spec.num_classes))


def har(spec):
    return nn.Sequential(
        nn.Linear(561, 512), nn.ReLU(), nn.Dropout(0.2),
        nn.Linear(512, 256), nn.ReLU(), nn.Dropout(0.2),
        nn.Linear(256, spec.num_classes),
    )


def lstm(spec):
    return nn.Sequential(
        nn.Embedding(spec.vocab, 64),
        LSTMSequence(64, 256),
        nn.Linear(256, spec.vocab),
    )


def transformer(spec):
    t = spec.input_shape[0]
    return nn.Sequential(
        TokenPositionalEmbedding(spec.vocab, 256, t),
        *[TransformerBlock(256, 6, 64, 1024) for _ in range(6)],
        nn.LayerNorm(256),
        nn.Linear(256, spec.vocab),
    )


class BasicBlock(nn.Module):
    """ResNet basic block; ``norm(channels)`` makes its normalisations (batch norm, or a GroupNorm)."""

    def __init__(self, cin, cout, stride, norm=nn.BatchNorm2d):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = norm(cout)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = norm(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), norm(cout))
        self.relu2 = nn.ReLU()

    def forward(self, x):
        out = self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x)))))
        return self.relu2(out + self.shortcut(x))


class ResNet18(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU())
        blocks, c = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(c, cout, stride), BasicBlock(cout, cout, 1)]
            c = cout
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        return self.fc(self.flatten(self.pool(self.blocks(self.stem(x)))))


def resnet18(spec):
    return ResNet18(spec.num_classes)


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        layers = []
        if expand != 1:
            layers += [nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6()]
        layers += [
            nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(),
            nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    # (expansion, out channels, repeats, stride); strides of the first stages are 1 for 32x32 inputs
    CFG = ((1, 16, 1, 1), (6, 24, 2, 1), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))

    def __init__(self, num_classes):
        super().__init__()
        layers = [nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6()]
        c = 32
        for t, cout, n, s in self.CFG:
            for i in range(n):
                layers.append(InvertedResidual(c, cout, s if i == 0 else 1, t))
                c = cout
        layers += [nn.Conv2d(c, 1280, 1, bias=False), nn.BatchNorm2d(1280), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(1280, num_classes)

    def forward(self, x):
        return self.fc(self.drop(self.flatten(self.pool(self.features(x)))))


def mobilenetv2(spec):
    return MobileNetV2(spec.num_classes)
