"""Small nets written the way a user would, none of them in the prior's zoo: the held-out list of
``bench/bench_user_nets.py`` (some use operators without a kind of their own, estimated through stand-ins)."""

import math

import torch
from torch import nn
from torch.nn import functional as F


class UNetTiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.d1 = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.d2 = nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.u1 = nn.Sequential(nn.Conv2d(48, 16, 3, padding=1), nn.ReLU())
        self.head = nn.Conv2d(16, 2, 1)

    def forward(self, x):
        a = self.d1(x)
        b = self.d2(a)
        c = torch.cat([self.up(b), a], dim=1)
        return self.head(self.u1(c)).mean(dim=(2, 3))


class BiLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(1000, 64)
        self.lstm = nn.LSTM(64, 96, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(192, 4)

    def forward(self, x):
        h, _ = self.lstm(self.emb(x))
        return self.fc(h[:, -1])


class GRU2(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(12, 64, num_layers=2, batch_first=True)
        self.fc = nn.Linear(64, 6)

    def forward(self, x):
        h, _ = self.gru(x)
        return self.fc(h[:, -1])


class MHA(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(32, 64)
        self.att = nn.MultiheadAttention(64, 4, batch_first=True)
        self.norm = nn.LayerNorm(64)
        self.ff = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 64))
        self.fc = nn.Linear(64, 3)

    def forward(self, x):
        h = self.proj(x)
        a, _ = self.att(h, h, h)
        h = self.norm(h + a)
        h = h + self.ff(h)
        return self.fc(h.mean(dim=1))


class DilatedTCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(3, 32, 3, padding=2, dilation=2), nn.ReLU(),
                                 nn.Conv1d(32, 32, 3, padding=4, dilation=4), nn.ReLU(),
                                 nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(32, 5))

    def forward(self, x):
        return self.net(x)


class MobileBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.Hardswish(),
            nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.BatchNorm2d(16), nn.SiLU(),
            nn.Conv2d(16, 24, 1), nn.BatchNorm2d(24), nn.ReLU6(),
            nn.AvgPool2d(2), nn.Flatten(), nn.Dropout(0.2), nn.Linear(24 * 16 * 16, 10))

    def forward(self, x):
        return self.net(x)


class Deconv(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.t = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(self.t(torch.relu(self.c(x))).mean(dim=(2, 3)))


class TextGRU(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(500, 32)
        self.gru = nn.GRU(32, 64, batch_first=True)
        self.fc = nn.Linear(64, 3)

    def forward(self, x):
        h, _ = self.gru(self.emb(x))
        return self.fc(h[:, -1])


class ManualAttn(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(32, 32)
        self.k = nn.Linear(32, 32)
        self.v = nn.Linear(32, 32)
        self.fc = nn.Linear(32, 3)

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        a = torch.softmax(q @ k.transpose(1, 2) / 5.66, dim=-1)
        return self.fc((a @ v).mean(dim=1))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 64)
        self.enc = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
        self.fc = nn.Linear(64, 3)

    def forward(self, x):
        return self.fc(self.enc(self.proj(x)).mean(dim=1))


class SdpaBlock(nn.Module):
    """Attention written with F.scaled_dot_product_attention, heads split by hand."""

    def __init__(self, d=64, heads=4):
        super().__init__()
        self.heads = heads
        self.proj = nn.Linear(20, d)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.fc = nn.Linear(d, 4)

    def forward(self, x):
        h = self.proj(x)
        b, t, d = h.shape
        q, k, v = self.qkv(h).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d)
        return self.fc((h + self.out(a)).mean(dim=1))


class EinsumAttn(nn.Module):
    """Attention written with torch.einsum, heads split by hand, bias-free projections."""

    def __init__(self, d=48, heads=4):
        super().__init__()
        self.heads = heads
        self.proj = nn.Linear(16, d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        self.fc = nn.Linear(d, 5)

    def forward(self, x):
        h = self.proj(x)
        b, t, d = h.shape
        q, k, v = self.qkv(h).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = torch.softmax(torch.einsum("bhqd,bhkd->bhqk", q, k) * (d // self.heads) ** -0.5, dim=-1)
        o = torch.einsum("bhqk,bhkd->bhqd", a, v).transpose(1, 2).reshape(b, t, d)
        return self.fc((h + self.out(o)).mean(dim=1))


class CrossAttn(nn.Module):
    """A decoder step: the sequence attends to a short memory summarised from its own first frames."""

    def __init__(self, d=48):
        super().__init__()
        self.proj = nn.Linear(24, d)
        self.mem = nn.Linear(d, d)
        self.att = nn.MultiheadAttention(d, 4, batch_first=True)
        self.norm = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4)

    def forward(self, x):
        h = self.proj(x)
        m = torch.tanh(self.mem(h[:, :6]))
        a, _ = self.att(h, m, m)
        return self.fc(self.norm(h + a).mean(dim=1))


class SeqLSTM(nn.Module):
    """A sequence-first LSTM (PyTorch's default batch_first=False) on inertial windows, the last step classified."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(9, 48)
        self.fc = nn.Linear(48, 6)

    def forward(self, x):
        h, _ = self.lstm(x.transpose(0, 1))
        return self.fc(h[-1])


class StyleBlock(nn.Module):
    """A style-transfer generator's core as fast-style-transfer code writes it: a strided conv, two residual blocks
    of conv + InstanceNorm2d (affine) + ReLU, an upsample back, a conv to 3 channels (image to image; its last conv
    is the head)."""

    def __init__(self, c=32):
        super().__init__()
        self.down = nn.Conv2d(3, c, 3, stride=2, padding=1)
        self.n0 = nn.InstanceNorm2d(c, affine=True)
        self.blocks = nn.ModuleList([nn.ModuleList([nn.Conv2d(c, c, 3, padding=1), nn.InstanceNorm2d(c, affine=True),
                                                    nn.Conv2d(c, c, 3, padding=1), nn.InstanceNorm2d(c, affine=True)])
                                     for _ in range(2)])
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.out = nn.Conv2d(c, 3, 3, padding=1)

    def forward(self, x):
        h = torch.relu(self.n0(self.down(x)))
        for c1, n1, c2, n2 in self.blocks:
            h = h + n2(c2(torch.relu(n1(c1(h)))))
        return self.out(self.up(h))


class CausalMHA(nn.Module):
    """Streaming-style self-attention over sensor frames with ``nn.MultiheadAttention`` under a causal bool mask
    kept as a buffer (each frame sees only the past), called with PyTorch's defaults (the weights returned)."""

    def __init__(self, t=40, d=48):
        super().__init__()
        self.proj = nn.Linear(16, d)
        self.att = nn.MultiheadAttention(d, 4, batch_first=True)
        self.register_buffer("causal", torch.ones(t, t, dtype=torch.bool).triu(1))
        self.norm = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Linear(2 * d, d))
        self.fc = nn.Linear(d, 5)

    def forward(self, x):
        h = self.proj(x)
        a, _ = self.att(h, h, h, attn_mask=self.causal)
        h = self.norm(h + a)
        return self.fc((h + self.ff(h)).mean(dim=1))


class MnistExample(nn.Module):
    """The ``Net`` of PyTorch's ``examples/mnist`` (trained there with ``F.nll_loss``), as written there: functional
    ReLUs and max pooling, ``torch.flatten``, and a ``F.log_softmax`` output."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


class GNConvNet(nn.Module):
    """A federated-learning CNN with GroupNorm of 8 groups (not the zoo's 2) and functional max pooling."""

    def __init__(self):
        super().__init__()
        self.c1, self.n1 = nn.Conv2d(3, 32, 3, padding=1), nn.GroupNorm(8, 32)
        self.c2, self.n2 = nn.Conv2d(32, 64, 3, padding=1), nn.GroupNorm(8, 64)
        self.fc = nn.Linear(64 * 8 * 8, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.n1(self.c1(x))), 2)
        x = F.max_pool2d(F.relu(self.n2(self.c2(x))), 2)
        return self.fc(torch.flatten(x, 1))


class PReLUMLP(nn.Module):
    """A tabular MLP with PyTorch's default nn.PReLU() (one shared slope), batch norm and dropout."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(40, 192), nn.BatchNorm1d(192), nn.PReLU(), nn.Dropout(0.2),
                                 nn.Linear(192, 96), nn.BatchNorm1d(96), nn.PReLU(), nn.Linear(96, 4))

    def forward(self, x):
        return self.net(x)


class ERFBlockNet(nn.Module):
    """ERFNet's non-bottleneck-1D blocks (a 3x3 conv factorised into 3x1 and 1x3, batch norm, a residual) on 3x32x32
    images, 10 classes: rectangular kernels none of the zoo's nets has."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.ReLU())
        self.blocks = nn.ModuleList(nn.Sequential(
            nn.Conv2d(32, 32, (3, 1), padding=(1, 0)), nn.ReLU(), nn.Conv2d(32, 32, (1, 3), padding=(0, 1)),
            nn.BatchNorm2d(32), nn.ReLU(), nn.Conv2d(32, 32, (3, 1), padding=(1, 0)), nn.ReLU(),
            nn.Conv2d(32, 32, (1, 3), padding=(0, 1)), nn.BatchNorm2d(32)) for _ in range(2))
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = F.relu(x + block(x))
        return self.fc(x.mean(dim=(2, 3)))


class CnnOneFstride4(nn.Module):
    """Sainath and Parada's small-footprint keyword spotter "cnn-one-fstride4": one 32x8 conv striding 4 along
    frequency over 98x40 log-mel frames, then dense layers, 12 classes."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 54, (32, 8), stride=(1, 4))
        self.fc = nn.Sequential(nn.Flatten(), nn.Linear(54 * 67 * 9, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                                nn.Linear(128, 12))

    def forward(self, x):
        return self.fc(F.relu(self.conv(x)))


class TradFpool3(nn.Module):
    """Sainath and Parada's "cnn-trad-fpool3" keyword spotter, narrowed to 32 filters over 49x40 log-mel frames: a
    20x8 conv, max pooling (1, 3) over frequency only, a 10x4 conv, then dense layers, 12 classes."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(1, 32, (20, 8)), nn.Conv2d(32, 32, (10, 4))
        self.pool = nn.MaxPool2d((1, 3))
        self.fc = nn.Sequential(nn.Flatten(), nn.Linear(32 * 21 * 8, 32), nn.Linear(32, 128), nn.ReLU(),
                                nn.Linear(128, 12))

    def forward(self, x):
        return self.fc(F.relu(self.c2(self.pool(F.relu(self.c1(x))))))


class SpatialDropCNN(nn.Module):
    """A CIFAR CNN with channel dropout (nn.Dropout2d(0.2)) after each conv block, as small-data and segmentation
    nets regularise, 10 classes."""

    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.Dropout2d(0.2),
                               nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
                               nn.Dropout2d(0.2), nn.MaxPool2d(2))
        self.fc = nn.Linear(64 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.f(x), 1))


class _UpBilinear(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.conv = nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                                  nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

    def forward(self, x, skip):
        x = self.up(x)
        dy, dx = skip.size()[2] - x.size()[2], skip.size()[3] - x.size()[3]
        x = F.pad(x, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
        return self.conv(torch.cat([skip, x], dim=1))


class UNetBilinear(nn.Module):
    """milesial/Pytorch-UNet's U-Net with ``bilinear=True`` (bilinear upsampling, F.pad to each skip's size), three
    levels of widths 16-64 on 3x36x36 crops (36 -> 18 -> 9 -> 4: the first up pads 8 to 9), a 1x1-conv mask of 2
    classes averaged to a score."""

    def __init__(self):
        super().__init__()
        def dc(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(),
                                 nn.Conv2d(o, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU())
        self.inc, self.d1, self.d2 = dc(3, 16), nn.Sequential(nn.MaxPool2d(2), dc(16, 32)), nn.Sequential(
            nn.MaxPool2d(2), dc(32, 64))
        self.d3 = nn.Sequential(nn.MaxPool2d(2), dc(64, 64))
        self.u1, self.u2, self.u3 = _UpBilinear(128, 32), _UpBilinear(64, 16), _UpBilinear(32, 16)
        self.outc = nn.Conv2d(16, 2, 1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.d1(x1)
        x3 = self.d2(x2)
        x = self.u1(self.d3(x3), x3)
        x = self.u3(self.u2(x, x2), x1)
        return self.outc(x)


class ConvAE(nn.Module):
    """The convolutional autoencoder of MNIST tutorials (anomaly detection fine-tunes one on a device's normal data):
    two stride-2 convs down, two 3x3 stride-2 transposed convs with output padding up, a sigmoid; trained on its
    reconstruction (the measure's mean-squared loss)."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.ReLU(),
                                 nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU())
        self.dec = nn.Sequential(nn.ConvTranspose2d(32, 16, 3, stride=2, padding=1, output_padding=1), nn.ReLU(),
                                 nn.ConvTranspose2d(16, 1, 3, stride=2, padding=1, output_padding=1), nn.Sigmoid())

    def forward(self, x):
        return self.dec(self.enc(x))


class ResNet8A(nn.Module):
    """A CIFAR ResNet-8 of widths 24/48/96 with option-A shortcuts written by hand (F.pad of x[:, :, ::2, ::2] along
    the channels), functional ReLUs, 10 classes."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 24, 3, padding=1, bias=False), nn.BatchNorm2d(24), nn.ReLU())
        self.convs = nn.ModuleList()
        c = 24
        for w, s in ((24, 1), (48, 2), (96, 2)):
            self.convs.append(nn.ModuleList([nn.Conv2d(c, w, 3, s, 1, bias=False), nn.BatchNorm2d(w),
                                             nn.Conv2d(w, w, 3, 1, 1, bias=False), nn.BatchNorm2d(w)]))
            c = w
        self.fc = nn.Linear(96, 10)

    def forward(self, x):
        x = self.stem(x)
        for conv1, bn1, conv2, bn2 in self.convs:
            out = bn2(conv2(F.relu(bn1(conv1(x)))))
            if conv1.stride[0] != 1:
                p = (conv1.out_channels - conv1.in_channels) // 2
                x = F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, p, p))
            x = F.relu(out + x)
        return self.fc(x.mean(dim=(2, 3)))


class TFSamePadCNN(nn.Module):
    """A small CNN ported from TensorFlow: nn.ZeroPad2d((0, 1, 0, 1)) before each stride-2 conv ("same" padding,
    the odd pixel after), batch norm, ReLU6, 10 classes."""

    def __init__(self):
        super().__init__()
        layers, c = [], 3
        for w in (16, 32, 64):
            layers += [nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(c, w, 3, stride=2, bias=False), nn.BatchNorm2d(w),
                       nn.ReLU6(), nn.Conv2d(w, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU6()]
            c = w
        self.f = nn.Sequential(*layers)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc(self.f(x).mean(dim=(2, 3)))


class AttnPoolLSTM(nn.Module):
    """An LSTM over 9-channel sensor windows whose states are pooled by attention: a score per step, a softmax over
    time, the weighted states summed (x.sum(dim=1)), 6 classes."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(9, 48, batch_first=True)
        self.score = nn.Linear(48, 1)
        self.fc = nn.Linear(48, 6)

    def forward(self, x):
        h, _ = self.lstm(x)
        w = torch.softmax(self.score(h).squeeze(-1), dim=-1).unsqueeze(-1)
        return self.fc((h * w).sum(dim=1))


class PointNetTiny(nn.Module):
    """A small PointNet on 256 points: shared 1x1 conv1d layers (32, 64, 256) without batch norm, the global feature
    by x.max(dim=2).values, two dense layers, 8 classes."""

    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Conv1d(3, 32, 1), nn.ReLU(), nn.Conv1d(32, 64, 1), nn.ReLU(),
                                 nn.Conv1d(64, 256, 1), nn.ReLU())
        self.fc = nn.Sequential(nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, 8))

    def forward(self, x):
        return self.fc(self.mlp(x).max(dim=2).values)


class TextCNNAmax(nn.Module):
    """A text CNN taking its max over time with amax: embeddings of 64, conv1d of widths 2 and 3 (64 filters), 4
    classes over 48 tokens."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(3000, 64)
        self.c2, self.c3 = nn.Conv1d(64, 64, 2), nn.Conv1d(64, 64, 3)
        self.fc = nn.Linear(128, 4)

    def forward(self, x):
        e = self.emb(x).transpose(1, 2)
        return self.fc(torch.cat([F.relu(self.c2(e)).amax(dim=2), F.relu(self.c3(e)).amax(dim=2)], dim=1))


class CBAMLiteCNN(nn.Module):
    """A VGG-style CIFAR CNN (32/64/128) with a CBAM-style gate written functionally after each block: channel
    attention from F.adaptive_avg_pool2d and F.adaptive_max_pool2d through one MLP of Linear layers, spatial
    attention from x.mean(1) and x.amax(1) through a 5x5 conv."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Conv2d(c, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())
                                    for c, o in ((3, 32), (32, 64), (64, 128)))
        self.mlps = nn.ModuleList(nn.Sequential(nn.Linear(o, o // 4), nn.ReLU(), nn.Linear(o // 4, o))
                                  for o in (32, 64, 128))
        self.spatial = nn.ModuleList(nn.Conv2d(2, 1, 5, padding=2) for _ in range(3))
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        for block, mlp, spatial in zip(self.blocks, self.mlps, self.spatial):
            x = block(x)
            gate = mlp(F.adaptive_avg_pool2d(x, 1).flatten(1)) + mlp(F.adaptive_max_pool2d(x, 1).flatten(1))
            x = x * torch.sigmoid(gate)[:, :, None, None]
            x = x * torch.sigmoid(spatial(torch.cat([x.mean(1, keepdim=True), x.amax(1, keepdim=True)], 1)))
            x = F.max_pool2d(x, 2)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class ConcatPool1d(nn.Module):
    """A sensor CNN over 6x200 windows with 1-D average pooling between its blocks and fastai's concat pooling at the
    end (global average and global max over time, concatenated), 7 classes."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv1d(6, 32, 5, padding=2), nn.BatchNorm1d(32), nn.ReLU(), nn.AvgPool1d(2),
                                      nn.Conv1d(32, 64, 5, padding=2), nn.BatchNorm1d(64), nn.ReLU(), nn.AvgPool1d(2),
                                      nn.Conv1d(64, 96, 3, padding=1), nn.BatchNorm1d(96), nn.ReLU())
        self.avg, self.max = nn.AdaptiveAvgPool1d(1), nn.AdaptiveMaxPool1d(1)
        self.fc = nn.Sequential(nn.Dropout(0.3), nn.Linear(192, 7))

    def forward(self, x):
        h = self.features(x)
        return self.fc(torch.cat([self.avg(h), self.max(h)], 1).flatten(1))


class HighPassCNN(nn.Module):
    """A texture CNN (defect inspection, as a factory camera fine-tunes one) whose blocks convolve a high-pass of
    their features, the features minus their 3x3 local average, and add it back; 6 classes on 3x48x48."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 24, 3, padding=1), nn.BatchNorm2d(24), nn.ReLU())
        self.convs = nn.ModuleList(nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU())
                                   for c in (24, 48))
        self.down = nn.ModuleList([nn.Conv2d(24, 48, 3, stride=2, padding=1), nn.Conv2d(48, 96, 3, stride=2,
                                                                                        padding=1)])
        self.fc = nn.Linear(96, 6)

    def forward(self, x):
        h = self.stem(x)
        for conv, down in zip(self.convs, self.down):
            h = down(h + conv(h - F.avg_pool2d(h, 3, 1, 1)))
        return self.fc(h.mean(dim=(2, 3)))


class CenteredMLP(nn.Module):
    """A sensor-feature MLP that centres each sample's features on their mean (x - x.mean(1, keepdim=True)) and
    subtracts a learned running template from its hidden layer's output; 64 features, 5 classes."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(64, 128), nn.Linear(128, 128)
        self.template = nn.Linear(64, 128)
        self.fc = nn.Linear(128, 5)

    def forward(self, x):
        x = x - x.mean(dim=1, keepdim=True)
        h = torch.relu(self.fc1(x))
        return self.fc(torch.relu(self.fc2(h) - self.template(x)))


class WaveNetKWS(nn.Module):
    """A WaveNet-style keyword spotter on 40x98 log-mel frames (channels x time): a 1x1 input conv, four gated
    residual layers of kernel-2 dilated causal convs (tanh(f) * sigmoid(g), dilations 1, 2, 4, 8; left-padded with
    F.pad), 1x1 residual and skip convs, the skips summed, ReLU, mean over time, 12 classes."""

    def __init__(self, c=32):
        super().__init__()
        self.inp = nn.Conv1d(40, c, 1)
        self.dilations = (1, 2, 4, 8)
        self.f = nn.ModuleList([nn.Conv1d(c, c, 2, dilation=d) for d in self.dilations])
        self.g = nn.ModuleList([nn.Conv1d(c, c, 2, dilation=d) for d in self.dilations])
        self.res = nn.ModuleList([nn.Conv1d(c, c, 1) for _ in self.dilations])
        self.skip = nn.ModuleList([nn.Conv1d(c, c, 1) for _ in self.dilations])
        self.fc = nn.Linear(c, 12)

    def forward(self, x):
        h, skips = self.inp(x), 0
        for d, f, g, res, skip in zip(self.dilations, self.f, self.g, self.res, self.skip):
            p = F.pad(h, (d, 0))
            z = torch.tanh(f(p)) * torch.sigmoid(g(p))
            skips = skips + skip(z)
            h = h + res(z)
        return self.fc(F.relu(skips).mean(dim=2))


class AtrousCNN(nn.Module):
    """A DeepLab-style CNN on 3x64x64 images: a strided conv stem to 16x16, then an ASPP-like head of a 1x1 conv
    and 3x3 convs dilated 2, 4 and 6 in parallel (each BN-ReLU), concatenated, a 1x1 projection, global average
    pooling, 10 classes."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                                  nn.Conv2d(32, 64, 3, 2, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU())
        self.branches = nn.ModuleList(
            [nn.Sequential(nn.Conv2d(64, 32, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU())]
            + [nn.Sequential(nn.Conv2d(64, 32, 3, padding=d, dilation=d, bias=False), nn.BatchNorm2d(32), nn.ReLU())
               for d in (2, 4, 6)])
        self.project = nn.Sequential(nn.Conv2d(128, 64, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU())
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        h = self.stem(x)
        h = self.project(torch.cat([b(h) for b in self.branches], dim=1))
        return self.fc(h.mean(dim=(2, 3)))


class SNNTabular(nn.Module):
    """A self-normalising MLP (Klambauer et al.) on 64 tabular features: three Linear + SELU layers of 256, 10
    classes."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 256), nn.SELU(), nn.Linear(256, 256), nn.SELU(),
                                 nn.Linear(256, 256), nn.SELU(), nn.Linear(256, 10))

    def forward(self, x):
        return self.net(x)


class ClampMobile(nn.Module):
    """A MobileNet-style CNN ported from TensorFlow, its ReLU6 written as ``x.clamp(0, 6)``: a 3x3 stem of stride 2,
    three depthwise-separable blocks (depthwise 3x3, BN, clamp, pointwise 1x1, BN, clamp), global average pooling, a
    Linear; 3x32x32 images, 10 classes."""

    def __init__(self):
        super().__init__()
        self.stem, self.stem_bn = nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16)
        blocks, c = [], 16
        for cout, stride in ((32, 1), (64, 2), (64, 1)):
            blocks.append(nn.ModuleList([nn.Conv2d(c, c, 3, stride, 1, groups=c, bias=False), nn.BatchNorm2d(c),
                                         nn.Conv2d(c, cout, 1, bias=False), nn.BatchNorm2d(cout)]))
            c = cout
        self.blocks = nn.ModuleList(blocks)
        self.fc = nn.Linear(c, 10)

    def forward(self, x):
        x = self.stem_bn(self.stem(x)).clamp(0, 6)
        for dw, bn1, pw, bn2 in self.blocks:
            x = bn1(dw(x)).clamp(0, 6)
            x = bn2(pw(x)).clamp(0, 6)
        return self.fc(x.mean(dim=(2, 3)))


class _CausalSelfAttention(nn.Module):
    """nanoGPT's ``CausalSelfAttention`` as written for PyTorch without flash attention: one packed q/k/v projection,
    the causal mask a ``tril`` buffer sliced to the sequence, ``1 / math.sqrt(k.size(-1))``, attention dropout."""

    def __init__(self, n_embd, n_head, block_size, dropout):
        super().__init__()
        self.c_attn, self.c_proj = nn.Linear(n_embd, 3 * n_embd), nn.Linear(n_embd, n_embd)
        self.attn_dropout, self.resid_dropout = nn.Dropout(dropout), nn.Dropout(dropout)
        self.n_head, self.n_embd = n_head, n_embd
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class _GPTBlock(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.attn = _CausalSelfAttention(n_embd, n_head, block_size, dropout)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd),
                                 nn.Dropout(dropout))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class MiniGPT(nn.Module):
    """nanoGPT's model as its repository writes it, at a character-level size (65 tokens, 64 positions, 2 layers of
    4 heads over 128): position ids from ``torch.arange(0, t)`` with ``b, t = idx.size()``, its language-model head
    tied to the token embedding, next-token logits at every position. fx's symbolic trace refuses it (the mask
    sliced by ``T``); it is traced with its input's sizes."""

    def __init__(self, vocab_size=65, block_size=64, n_layer=2, n_head=4, n_embd=128, dropout=0.1):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab_size, n_embd), nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList(_GPTBlock(n_embd, n_head, block_size, dropout) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight

    def forward(self, idx):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def _drop_path(x, drop_prob, training):
    """timm's ``drop_path`` (stochastic depth): each sample's residual branch kept with probability 1 - p."""
    if drop_prob == 0.0 or not training:
        return x
    keep = 1 - drop_prob
    mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
    mask.div_(keep)
    return x * mask


class _LayerNorm2d(nn.LayerNorm):
    """timm's channels-first LayerNorm: permute, ``F.layer_norm``, permute back."""

    def forward(self, x):
        x = F.layer_norm(x.permute(0, 2, 3, 1), self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class _ConvNeXtBlock(nn.Module):
    def __init__(self, dim, drop_path):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1, self.act, self.pwconv2 = nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(1e-6 * torch.ones(dim))
        self.drop_path = drop_path

    def forward(self, x):
        y = self.norm(self.dwconv(x).permute(0, 2, 3, 1))
        y = (self.gamma * self.pwconv2(self.act(self.pwconv1(y)))).permute(0, 3, 1, 2)
        return x + _drop_path(y, self.drop_path, self.training)


class ConvNeXtMini(nn.Module):
    """ConvNeXt as its repository and timm write it, two stages at CIFAR size: a 4x4 patchify stem and timm's
    channels-first LayerNorm (``F.layer_norm`` between permutes), blocks of a 7x7 depthwise conv, a LayerNorm over
    the channels last, an inverted MLP, layer scale (``gamma * x``) and stochastic depth (a per-sample Bernoulli
    mask made with ``x.new_empty(...).bernoulli_``)."""

    def __init__(self, dims=(32, 64), depths=(2, 2), drop_path=0.1):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, dims[0], 4, 4), _LayerNorm2d(dims[0], eps=1e-6))
        self.stage1 = nn.Sequential(*[_ConvNeXtBlock(dims[0], drop_path) for _ in range(depths[0])])
        self.down = nn.Sequential(_LayerNorm2d(dims[0], eps=1e-6), nn.Conv2d(dims[0], dims[1], 2, 2))
        self.stage2 = nn.Sequential(*[_ConvNeXtBlock(dims[1], drop_path) for _ in range(depths[1])])
        self.norm, self.head = nn.LayerNorm(dims[1], eps=1e-6), nn.Linear(dims[1], 10)

    def forward(self, x):
        x = self.stage2(self.down(self.stage1(self.stem(x))))
        return self.head(self.norm(x.mean([-2, -1])))


class TutorialLSTM(nn.Module):
    """The LSTM classifier of the common PyTorch tutorials (rows of a 28x28 image as 28 steps): zero initial states
    sized by the batch, ``torch.zeros(num_layers, x.size(0), hidden).to(x.device)``, passed to a 2-layer nn.LSTM."""

    def __init__(self, input_size=28, hidden_size=64, num_layers=2, num_classes=10):
        super().__init__()
        self.hidden_size, self.num_layers = hidden_size, num_layers
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True)
        self.fc = nn.Linear(hidden_size, num_classes)

    def forward(self, x):
        h0 = torch.zeros(self.num_layers, x.size(0), self.hidden_size).to(x.device)
        c0 = torch.zeros(self.num_layers, x.size(0), self.hidden_size).to(x.device)
        out, _ = self.lstm(x, (h0, c0))
        return self.fc(out[:, -1, :])


#: nets whose architecture joined the zoo after they had shown it missing (docs/model-zoo.md): no longer clean
#: unseen cases, reported apart: SeqLSTM read 1.95x before lstm_har joined the zoo; SdpaBlock calls
#: F.scaled_dot_product_attention, as vit_tiny (in the zoo since 2026-11-27) does; MHA, Encoder and CrossAttn
#: read 0.42-1.10x through stand-ins before nn.MultiheadAttention became kind mha and kwt_tiny, attention_har and
#: pvt_tiny joined the zoo (2026-11-27); Deconv's 2x2 stride-2 ConvTranspose2d stood in as a stride-1 conv until
#: kind conv_transpose2d and unet_small, whose ups are such convs, came (2026-11-28); ERFBlockNet's factorised
#: blocks are erfnet_small's (2026-11-28), and ConvAE's 3x3 transposed convs its decoder's; DilatedTCN's dilated
#: conv1d stood in as the undilated conv until dilation became a feature of the convs and tcn_har joined the zoo
#: (2026-11-28); CnnOneFstride4 read 0.39-0.42x its measured step on the EPYC VM (its one-channel 32x8 conv and
#: its 32,562-input dense layer were far from every profile sample) before mnist_example, simple_audio_cnn and
#: micro_speech_tiny_conv brought one-channel input convs and flatten-then-dense heads (9k-13k inputs) into the
#: zoo (2026-11-29), and TradFpool3 is the same paper's net of the same parts; MnistExample is mnist_example itself
#: (PyTorch's examples/mnist, in the zoo since 2026-11-29)
COVERED_SINCE = {"SeqLSTM", "SdpaBlock", "MHA", "Encoder", "CrossAttn", "Deconv", "ERFBlockNet", "ConvAE",
                 "DilatedTCN", "CnnOneFstride4", "TradFpool3", "MnistExample"}


class BiGRUKWS(nn.Module):
    """A keyword spotter as CRNN recipes write it: a conv over 40 log-mel bands x 98 frames (channels x time), BN,
    ReLU, then a bidirectional GRU of 64 per direction (batch first) over the frames, its outputs averaged over
    time, 12 classes."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv1d(40, 64, 5, padding=2), nn.BatchNorm1d(64)
        self.gru = nn.GRU(64, 64, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(128, 12)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv(x))).transpose(1, 2)
        out, _ = self.gru(h)
        return self.fc(out.mean(dim=1))


class CheckpointedGPT(MiniGPT):
    """MiniGPT fine-tuned with activation checkpointing, as nanoGPT forks and on-device recipes add it to fit in
    memory: each block through ``torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)``, so its forward
    runs again in backward."""

    def forward(self, idx):
        from torch.utils.checkpoint import checkpoint

        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = checkpoint(block, x, use_reentrant=False)
        return self.lm_head(self.ln_f(x))


class CheckpointedResMLP(nn.Module):
    """A residual MLP on 128 tabular features whose blocks are checkpointed (``use_reentrant=True``, the older
    default): the recompute of small matrix products, where the checkpoint's own bookkeeping weighs most."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(128, 384)
        self.blocks = nn.ModuleList(nn.Sequential(nn.LayerNorm(384), nn.Linear(384, 384), nn.GELU(),
                                                  nn.Linear(384, 384)) for _ in range(3))
        self.head = nn.Linear(384, 8)

    def forward(self, x):
        from torch.utils import checkpoint

        x = self.inp(x)
        for block in self.blocks:
            x = x + checkpoint.checkpoint(block, x, use_reentrant=True)
        return self.head(x)


class CheckpointedCNN(nn.Module):
    """A VGG-style CNN run through ``checkpoint_sequential`` in 3 segments (torch checkpoints the first two and
    runs the last as it is)."""

    def __init__(self):
        super().__init__()
        def block(cin, cout):
            return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]
        self.features = nn.Sequential(*block(3, 24), *block(24, 24), nn.MaxPool2d(2), *block(24, 48),
                                      *block(48, 48), nn.MaxPool2d(2), *block(48, 64), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint_sequential

        x = checkpoint_sequential(self.features, 3, x, use_reentrant=False)
        return self.head(x.flatten(1))


class TimeSequenceCells(nn.Module):
    """PyTorch's time_sequence_prediction example as its repository writes it: two nn.LSTMCell of 51 units stepped
    over ``input.split(1, dim=1)`` (one value per step), a linear read-out per step, the outputs ``torch.cat``-ed
    into the predicted sequence (here 100 steps; the example's sine waves are 999)."""

    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, 51)
        self.lstm2 = nn.LSTMCell(51, 51)
        self.linear = nn.Linear(51, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), 51, dtype=torch.float32)
        c_t = torch.zeros(input.size(0), 51, dtype=torch.float32)
        h_t2 = torch.zeros(input.size(0), 51, dtype=torch.float32)
        c_t2 = torch.zeros(input.size(0), 51, dtype=torch.float32)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.cat(outputs, dim=1)


class CharGRUCell(nn.Module):
    """A character-level RNN as tutorials write one with nn.GRUCell: an embedding of 65 characters into 48, a GRUCell
    of 160 units stepped over 40 characters, the next character predicted from the last state."""

    def __init__(self, vocab=65, embed=48, hidden=160):
        super().__init__()
        self.hidden = hidden
        self.emb = nn.Embedding(vocab, embed)
        self.cell = nn.GRUCell(embed, hidden)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, idx):
        x = self.emb(idx)
        h = torch.zeros(idx.size(0), self.hidden, device=idx.device)
        for t in range(idx.size(1)):
            h = self.cell(x[:, t, :], h)
        return self.out(h)


def _dw_separable(cin, cout, stride):
    return [nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False), nn.BatchNorm2d(cin), nn.ReLU(inplace=True),
            nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]


class FrozenMobileNetFT(nn.Module):
    """Transfer learning as on-device personalisation runs it (TensorFlow Lite's model personalization, Core ML's
    updatable classifier): a MobileNetV1-style backbone of depthwise-separable blocks (widths 32-256) on 3x64x64
    images, pretrained and frozen with ``requires_grad_(False)`` (left in training mode, as ``model.train()`` leaves
    it: its batch norms use the batch's statistics), and a new classifier of the user's 5 classes trained."""

    def __init__(self, classes=5):
        super().__init__()
        layers = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True)]
        for cin, cout, stride in ((32, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2), (256, 256, 1)):
            layers += _dw_separable(cin, cout, stride)
        self.backbone = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.backbone.requires_grad_(False)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(256, classes))

    def forward(self, x):
        return self.classifier(self.backbone(x))


class _BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.short = (nn.Sequential() if stride == 1 and cin == cout else
                      nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.short(x))


class ResNetLastStageFT(nn.Module):
    """Partial fine-tuning (TinyTL's and on-device learning papers' setting): a CIFAR ResNet of basic blocks
    (16/32/64, two per stage) whose stem and first two stages are frozen, its last stage and classifier trained."""

    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True))
        self.stage1 = nn.Sequential(_BasicBlock(16, 16, 1), _BasicBlock(16, 16, 1))
        self.stage2 = nn.Sequential(_BasicBlock(16, 32, 2), _BasicBlock(32, 32, 1))
        self.stage3 = nn.Sequential(_BasicBlock(32, 64, 2), _BasicBlock(64, 64, 1))
        self.fc = nn.Linear(64, classes)
        for part in (self.stem, self.stage1, self.stage2):
            part.requires_grad_(False)

    def forward(self, x):
        x = self.stage3(self.stage2(self.stage1(self.stem(x))))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class _LoRALinear(nn.Module):
    """LoRA as loralib and peft write it: the pretrained ``nn.Linear`` frozen, a trained low-rank update ``B(A(x))``
    (rank r, B zero at the start) scaled by alpha / r added to its output."""

    def __init__(self, base, r=8, alpha=16):
        super().__init__()
        self.base = base.requires_grad_(False)
        self.lora_A = nn.Linear(base.in_features, r, bias=False)
        self.lora_B = nn.Linear(r, base.out_features, bias=False)
        nn.init.zeros_(self.lora_B.weight)
        self.scaling = alpha / r

    def forward(self, x):
        return self.base(x) + self.lora_B(self.lora_A(x)) * self.scaling


class LoRAGPT(MiniGPT):
    """MiniGPT fine-tuned with LoRA, the way a phone adapts a small language model to its user: every pretrained
    weight frozen (the tied embedding and head too), rank-8 adapters on each block's q/k/v and output projections
    trained."""

    def __init__(self):
        super().__init__()
        self.requires_grad_(False)
        for block in self.h:
            block.attn.c_attn = _LoRALinear(block.attn.c_attn)
            block.attn.c_proj = _LoRALinear(block.attn.c_proj)


class FrozenMobileNetFTWhole(FrozenMobileNetFT):
    """FrozenMobileNetFT trained whole (nothing frozen): its twin in ``bench/bench_composition.py``, not in NETS."""

    def __init__(self):
        super().__init__()
        self.requires_grad_(True)


class ResNetLastStageFTWhole(ResNetLastStageFT):
    """ResNetLastStageFT trained whole: its twin in ``bench/bench_composition.py``, not in NETS."""

    def __init__(self):
        super().__init__()
        self.requires_grad_(True)


class GroupConvNet(nn.Module):
    """A small CNN whose second conv is split in two groups (``groups=2``, 8 channels per group), as a user halves a
    conv's cost; SiLU, global pooling, a Linear head, on 3x64x64 images."""

    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                               nn.Conv2d(16, 32, 3, padding=1, groups=2), nn.SiLU(), nn.AdaptiveAvgPool2d(1),
                               nn.Flatten())
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.f(x))


class ShuffleV1Net(nn.Module):
    """ShuffleNetV1 units (Zhang et al. 2018) as a user writes them: grouped 1x1 convs of 4 groups around a
    depthwise 3x3, a channel shuffle (view, transpose, view) between them, a residual add, on 3x32x32 images."""

    def __init__(self, c=64, groups=4):
        super().__init__()
        self.groups = groups
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU())
        self.units = nn.ModuleList(nn.ModuleDict({
            "g1": nn.Sequential(nn.Conv2d(c, c // 4, 1, groups=groups, bias=False), nn.BatchNorm2d(c // 4), nn.ReLU()),
            "dw": nn.Sequential(nn.Conv2d(c // 4, c // 4, 3, padding=1, groups=c // 4, bias=False),
                                nn.BatchNorm2d(c // 4)),
            "g2": nn.Sequential(nn.Conv2d(c // 4, c, 1, groups=groups, bias=False), nn.BatchNorm2d(c))})
            for _ in range(3))
        self.fc = nn.Linear(c, 10)

    def forward(self, x):
        x = self.stem(x)
        for u in self.units:
            h = u["g1"](x)
            b, ch, hh, ww = h.shape
            h = h.view(b, self.groups, ch // self.groups, hh, ww).transpose(1, 2).reshape(b, ch, hh, ww)
            x = torch.relu(x + u["g2"](u["dw"](h)))
        return self.fc(x.mean(dim=(2, 3)))


#: (class name, per-sample input shape): the held-out user nets, in the order they are measured
NETS = (("UNetTiny", (3, 32, 32)), ("BiLSTM", (32,)), ("GRU2", (50, 12)), ("MHA", (24, 32)),
        ("DilatedTCN", (3, 128)), ("MobileBlock", (3, 64, 64)), ("Deconv", (3, 32, 32)), ("TextGRU", (40,)),
        ("ManualAttn", (16, 32)), ("Encoder", (32, 16)), ("SdpaBlock", (24, 20)), ("EinsumAttn", (20, 16)),
        ("CrossAttn", (30, 24)), ("SeqLSTM", (64, 9)), ("StyleBlock", (3, 32, 32)), ("CausalMHA", (40, 16)),
        ("MnistExample", (1, 28, 28)), ("GNConvNet", (3, 32, 32)), ("PReLUMLP", (40,)), ("ERFBlockNet", (3, 32, 32)),
        ("CnnOneFstride4", (1, 98, 40)), ("TradFpool3", (1, 49, 40)), ("SpatialDropCNN", (3, 32, 32)),
        ("UNetBilinear", (3, 36, 36)), ("ConvAE", (1, 28, 28)), ("ResNet8A", (3, 32, 32)),
        ("TFSamePadCNN", (3, 32, 32)), ("AttnPoolLSTM", (64, 9)), ("PointNetTiny", (3, 256)), ("TextCNNAmax", (48,)),
        ("CBAMLiteCNN", (3, 32, 32)), ("ConcatPool1d", (6, 200)), ("HighPassCNN", (3, 48, 48)),
        ("CenteredMLP", (64,)), ("WaveNetKWS", (40, 98)), ("AtrousCNN", (3, 64, 64)), ("SNNTabular", (64,)),
        ("ClampMobile", (3, 32, 32)), ("BiGRUKWS", (40, 98)), ("MiniGPT", (64,)),
        ("ConvNeXtMini", (3, 32, 32)), ("TutorialLSTM", (28, 28)), ("CheckpointedGPT", (64,)),
        ("CheckpointedResMLP", (128,)), ("CheckpointedCNN", (3, 32, 32)), ("TimeSequenceCells", (100,)),
        ("CharGRUCell", (40,)), ("FrozenMobileNetFT", (3, 64, 64)), ("ResNetLastStageFT", (3, 32, 32)),
        ("LoRAGPT", (64,)), ("GroupConvNet", (3, 64, 64)), ("ShuffleV1Net", (3, 32, 32)))
