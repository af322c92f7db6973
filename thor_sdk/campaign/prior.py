"""The config-space prior of a device profile: where realistic layers live, per kind, from the model zoo.

The prior is plain, versioned data (``prior.json`` beside this file, format ``thor-sdk/prior``),
built from the layer lists of the zoo (``thor_sdk.models.list_models("zoo")``: the 7 reference nets
plus the zoo's common on-device architectures; the held-out nets never feed it) by
``python -m thor_sdk.campaign.prior --write``. Per kind it lists each distinct (config, role) with
its count in the zoo and a proxy cost share (training FLOPs and bytes at batch 16, one roofline-like
number: ``2e-5 s + flops / 2e10 + bytes / 5e9``), so a profile spends its probes where the zoo's cost is.
Shares are *relative*: every zoo net counts alike, its layers sharing its weight by proxy cost
(``rel_share``; ``rel_weight`` = sum over nets of count / net cost^2 weighs a layer's variance in the
nets' summed relative variance). A whole-model estimate is judged by its relative error, and absolute
shares gave the big nets' convs and transformer blocks 80% of the weight and the layers of small nets
(dense layers of an MLP, pointwise activations) almost none.
Each zoo net is read twice: trained whole, and as its fine-tuned twin (``<net>:finetune``: everything but its last
module with weights frozen, as on-device personalisation trains, its forward-only activations in place as pretrained
backbones build them) weighing ``FINETUNE_WEIGHT`` of a net, so the forward-only layers of a frozen backbone carry
weight in a profile too.
The generic ``elementwise`` kind (what ``--unknown-ops approx`` estimates operators without a kind as)
takes the configs of the zoo's pointwise activations at a tenth of their weight.

``candidates(kind, ...)`` turns a kind's prior into probe candidates: a scrambled Sobol sequence over
(which zoo config, a log-uniform size factor in [1/2, 2] per size feature and [1/4, 4] per sequence
length, a log-uniform batch size in [1, 128], and whether to take a structural neighbour), snapped to
valid integer configs. Structural features (kernel, stride, padding, groups pattern, heads, layers) stay
those of a real zoo layer, but for a quarter of the candidates: the next odd kernel size of a conv (for a
conv2d a third of them its square kernel's factorised k x 1 or 1 x k half instead; a 2-D pooling's a third of the
share its k x 1 or 1 x k), or
the other role of a recurrent layer whose zoo layers all have one, or the other ``bias`` of a kind whose
zoo layers all have one, or the other path of an attention layer (``need_weights``) and, independently, its
other masking (none, a mask tensor, or causal) and, independently, its other dropout (none or 0.1), or twice or
half a group norm's groups, or the other ``shared`` of a PReLU, or the other ``indices`` of a max reduction
(``torch.max`` or ``amax``), or another of the three ways a transposed conv
upsamples by 2 (``DECONV_SHAPES``), or other axes padded by a ``pad``, or another upsampling factor
(``NEIGHBOUR_SHARE``); and, independently, a quarter of the input convs read the other input channels (one for
three or more, three for one: ``CHANNELS_NEIGHBOUR_SHARE``).
A self-attention layer's key length stays its sequence length (``TIED``).
The alignment of widths is kept (a channel count divisible by 8 scales to multiples of 8:
``ALIGNED_FEATURES``), and a spatial side of 1 stays 1 (1-D data run as a 2-D kind, the 1x1 maps of a gate), so
every candidate is a layer someone builds.
"""

import copy
import json
import math
import os

from thor_sdk.errors import FormatError, NotOurFileError, ThorError

PRIOR_FORMAT = "thor-sdk/prior"
PRIOR_VERSION = 1
PRIOR_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prior.json")
PROXY_BATCH = 16
BATCH_RANGE = (1, 128)
SIZE_FACTOR = 2.0
#: features scaled by the size factor (others are structural and kept as in the zoo layer)
SIZE_FEATURES = {"in_channels", "out_channels", "channels", "height", "width", "length", "in_features",
                 "out_features", "tokens", "numel", "seq_len", "hidden_size", "input_size", "d_model", "d_ff",
                 "normalized", "embedding_dim", "embed_dim", "kv_len", "spatial", "rows", "reduced", "inner", "steps"}
#: widths whose alignment the scaling keeps: a zoo layer's value divisible by 8 scales to multiples of 8.
#: oneDNN convolutions run 1.4-1.8x slower on unaligned channel counts (host, one thread, 3x3 at 16x16:
#: 32->32 61 GFLOP/s, 31->33 44; 16->88 76, 17->87 42); real nets use multiples of 8, and candidates of
#: arbitrary widths made a profile's conv2d samples 50% slower than the aligned layers of unseen nets
ALIGNED_FEATURES = {"in_channels", "out_channels", "channels", "in_features", "out_features", "hidden_size",
                    "input_size", "d_model", "d_ff", "embedding_dim", "embed_dim"}
ALIGN = 8
#: the pointwise kinds whose configs place the kinds no zoo net has but any net may (``GENERIC_KINDS``: the generic
#: ``elementwise`` kind, softplus, and ``clamp``) in the prior, and their weight
GENERIC_FROM = ("relu", "relu6", "gelu", "tanh", "sigmoid", "hardswish", "hardsigmoid", "silu", "leaky_relu", "elu")
GENERIC_WEIGHT = 0.1
GENERIC_KINDS = ("elementwise", "clamp")
#: features that scale together (one factor): spatial sides stay square
TIED = (("height", "width"), ("seq_len", "kv_len"))
#: sequence lengths and 1-D windows scale by a wider factor: an app picks its window (1 s or 4 s of sensor
#: data, 32 or 128 tokens) more freely than a net's widths, and the zoo's sequences are long (64-128 steps)
SEQUENCE_FEATURES = {"seq_len", "tokens", "length", "kv_len", "spatial", "steps"}  # spatial (H x W): a side's factor
# squared; steps: a recurrent cell's calls, a loop's length
SEQUENCE_FACTOR = 4.0
#: this share of a kind's candidates takes a structural neighbour of its zoo layer, so that a profile also
#: measures what an unseen net builds from the same kind: the next odd kernel size up or down
#: (``KERNEL_NEIGHBOUR_KINDS``), and the role the zoo never gave a recurrent layer
#: (``ROLE_NEIGHBOUR_KINDS``: a GRU after a conv front-end computes its input's gradient, the zoo's GRUs
#: read the data directly). Without them an unseen CRNN's GRU and a 7-tap conv1d were extrapolations.
NEIGHBOUR_SHARE = 0.25
KERNEL_NEIGHBOUR_KINDS = ("conv1d", "conv2d")
#: kinds whose dilation a neighbour share (DILATION_NEIGHBOUR_SHARE of the candidates) changes, from a Sobol
#: dimension of its own (``_dilation_neighbour``): the zoo's dilated convs (a TCN, ERFNet) are few, and a dilated
#: conv costs what no FLOPs or bytes say (0.56-1.13x the undilated conv of the same output on the host)
DILATION_NEIGHBOUR_KINDS = ("conv1d", "conv2d")
DILATION_NEIGHBOUR_SHARE = 0.15
#: share of the input-role conv2d candidates whose input channels change: one (grayscale, a spectrogram) for any
#: other count, three (RGB) for one (``_channels_neighbour``), from the top of the dilation's Sobol dimension (a
#: band of its own, apart from the dilation's at the bottom). An app's first conv reads what its sensor gives, the
#: zoo's input convs are mostly RGB, and a one-channel input conv costs what neither its FLOPs nor its bytes say: on
#: the EPYC VM (one thread, batch 16, training step) 1.4-1.8x the time of the three-channel conv of the same output,
#: a third of its FLOPs (3x3 over 32x32 to 32 channels 4.1 ms against 2.9; 3x3 stride 2 over 64x64 to 16, 3.2
#: against 1.8)
CHANNELS_NEIGHBOUR_SHARE = 0.25
#: share of the candidates of each kind with weights but the head (``FREEZABLE``) that are frozen, from a Sobol
#: dimension of its own: the zoo's nets are trained whole, and a net fine-tuned on the device with its backbone
#: frozen runs layers whose step has no weight gradient or update (0.31-0.37x a whole ResNet-18's or MobileNetV2's
#: step on the host with all but the classifier frozen), which a profile must have measured
FROZEN_NEIGHBOUR_SHARE = 0.2
#: share of the candidates of each parameter-free kind that can take either role run forward only (role ``input``:
#: as behind a frozen backbone's layers), half of them in place where the kind can run so (``IN_PLACE``), from the
#: dimension that freezes kinds with weights (half of whose frozen candidates run forward only too): the zoo's nets
#: train whole, so its activations, norms and poolings all sit behind a trained layer (``hidden``), where a frozen
#: backbone's run forward only (an in-place ReLU there costs a third of the out-of-place probe's ReLU,
#: ``bench/bench_forward_only.py``)
FORWARD_ONLY_SHARE = 0.2
#: weight of each zoo net's fine-tuned twin (``finetune_head``: its backbone frozen, its last module with weights
#: trained, as on-device personalisation runs it) against the whole net's 1. Without the twins no forward-only
#: config carried weight in a profile's active selection, only the Sobol start's frozen share placed them, and a
#: frozen MobileNet's depthwise convs (whose slow backward a training one pays) read 1.7-5.8x their forward on all
#: of profiles 64-77 (one to three forward-only depthwise samples per profile)
FINETUNE_WEIGHT = 0.25
#: kinds a third of whose neighbour share is a square kernel's one-sided half (``_rect_neighbour``)
RECT_NEIGHBOUR_KINDS = ("conv2d", "maxpool2d", "avgpool2d")
ROLE_NEIGHBOUR_KINDS = ("gru", "lstm", "gru_cell", "lstm_cell")
#: kinds whose attention dropout ``p`` a neighbour share flips (a dropout to none, none to 0.1), drawn from a
#: Sobol dimension of its own: ``nn.MultiheadAttention`` defaults to none and ``nn.TransformerEncoderLayer`` to
#: 0.1, and dropout on the attention probabilities costs much (profile 25's mha GP, its self-attention samples
#: with dropout but two, read user nets' dropout-free MHA layers at 1.40-1.66x their own probes)
DROPOUT_NEIGHBOUR_KINDS = ("mha",)
DROPOUT_NEIGHBOUR_P = 0.1


def proxy_cost_s(kind, config, role, batch_size=PROXY_BATCH):
    """A device-free roofline proxy of one layer's step cost, only used to weight the prior."""
    from thor_sdk.runtime.terms import at_batch, cost_terms

    flops, nbytes = at_batch(cost_terms(kind, config, role), batch_size)[:2]
    return 2e-5 + flops / 2e10 + nbytes / 5e9


#: what a fine-tuned twin's name adds to its net's, in a config's ``models``
FINETUNE_SUFFIX = ":finetune"


def finetune_head(name):
    """The ``--trainable`` pattern of zoo net ``name``'s fine-tune: the module owning its last parameter (its
    classifier or LM head), or None for a net without parameters."""
    from thor_sdk.models import build_model

    last = None
    for pname, _ in build_model(name).named_parameters():
        last = pname
    return None if last is None else last.rsplit(".", 1)[0] if "." in last else last


def _variants(names):
    """``(key, zoo name, trainable patterns, weight)`` of each net the prior reads: every zoo net whole (weight 1)
    and its fine-tuned twin (``FINETUNE_WEIGHT``; key ``name:finetune``)."""
    out = [(n, n, None, 1.0) for n in names]
    for n in names:
        head = finetune_head(n)
        if head is not None:
            out.append((n + FINETUNE_SUFFIX, n, [head], FINETUNE_WEIGHT))
    return out


def _twin_layer(layer):
    """A fine-tuned twin's ``layer``: an activation that runs forward only there (role ``input``) and can run in place
    (``IN_PLACE``) does so, as the pretrained backbones fine-tunes start from build theirs (torchvision's and timm's
    ``inplace=True``); the zoo's own nets, trained whole, build theirs out of place."""
    from thor_sdk.layers.kinds import IN_PLACE

    if layer["kind"] in IN_PLACE and layer["role"] == "input" and not layer["config"].get("inplace"):
        return dict(layer, config=dict(layer["config"], inplace=1))
    return layer


def build_prior(model_names=None):
    """The prior document from the zoo's layer lists, each net whole and fine-tuned (imports torch to trace the
    nets)."""
    from thor_sdk.layers import layers_of
    from thor_sdk.models import list_models

    names = list(model_names or list_models("zoo"))
    kinds = {}
    model_cost = {}
    model_weight = {}
    for name, zoo_name, trainable, net_weight in _variants(names):
        layers = layers_of(zoo_name, trainable=trainable).layers
        if trainable is not None:
            layers = [_twin_layer(l) for l in layers]
        model_cost[name] = sum(proxy_cost_s(l["kind"], l["config"], l["role"]) for l in layers)
        model_weight[name] = net_weight
        for layer in layers:
            key = json.dumps({"config": layer["config"], "role": layer["role"]}, sort_keys=True)
            entry = kinds.setdefault(layer["kind"], {}).setdefault(
                key, {"config": layer["config"], "role": layer["role"], "count": 0, "models": [], "per_model": {}})
            entry["count"] += 1
            entry["per_model"][name] = entry["per_model"].get(name, 0) + 1
            if name not in entry["models"]:
                entry["models"].append(name)
    # the generic elementwise kind (softplus, and operators without a kind of their own under --unknown-ops approx)
    # and clamp live where the zoo's pointwise activations live, at a tenth of their weight
    generic = {}
    for kind in GENERIC_FROM:
        for key, e in kinds.get(kind, {}).items():
            g = generic.setdefault(json.dumps({"numel": e["config"]["numel"], "role": e["role"]}, sort_keys=True),
                                   {"config": {"numel": e["config"]["numel"]}, "role": e["role"], "count": 0,
                                    "models": [], "weight": GENERIC_WEIGHT})
            g["count"] += e["count"]
            g["models"] += [m for m in e["models"] if m not in g["models"]]
            for m, n in e["per_model"].items():
                g.setdefault("per_model", {})[m] = g.get("per_model", {}).get(m, 0) + n
    for kind in GENERIC_KINDS:
        if generic:
            kinds[kind] = copy.deepcopy(generic)  # each its own entries: the weights are popped below
    total = 0.0
    out = {}
    for kind, entries in kinds.items():
        rows = []
        for e in entries.values():
            weight = e.pop("weight", 1.0)
            unit = proxy_cost_s(kind, e["config"], e["role"]) * weight
            e["proxy_cost_s"] = unit * e["count"]
            # relative: every zoo net counts as much as any other, whatever its size (what a whole-model
            # relative error weighs); rel_weight = sum over nets of count / net cost^2 (1/s^2) weighs a
            # layer's variance in the nets' summed relative variance
            e["rel_share"] = (sum(model_weight[m] * n * unit / model_cost[m] for m, n in e["per_model"].items())
                              / sum(model_weight.values()))
            e["rel_weight"] = sum(model_weight[m] * n * weight / model_cost[m] ** 2 for m, n in e["per_model"].items())
            total += e["proxy_cost_s"]
            rows.append(e)
        rows.sort(key=lambda e: -e["rel_share"])
        out[kind] = rows
    doc = {"format": PRIOR_FORMAT, "version": PRIOR_VERSION, "models": names, "net_weight": sum(model_weight.values()),
           "proxy_batch_size": PROXY_BATCH,
           "batch_range": list(BATCH_RANGE), "size_factor": SIZE_FACTOR, "sequence_factor": SEQUENCE_FACTOR,
           "neighbour_share": NEIGHBOUR_SHARE, "dilation_share": DILATION_NEIGHBOUR_SHARE,
           "input_channels_share": CHANNELS_NEIGHBOUR_SHARE,
           "frozen_share": FROZEN_NEIGHBOUR_SHARE, "forward_only_share": FORWARD_ONLY_SHARE,
           "finetune_weight": FINETUNE_WEIGHT,
           "kinds": {k: {"share": sum(e["proxy_cost_s"] for e in rows) / total,
                         "rel_share": sum(e["rel_share"] for e in rows),
                         "configs": [{"config": e["config"], "role": e["role"], "count": e["count"],
                                      "share": e["proxy_cost_s"] / total, "rel_share": e["rel_share"],
                                      "rel_weight": e["rel_weight"], "models": e["models"]} for e in rows]}
                     for k, rows in sorted(out.items())}}
    return doc


def kind_share(entry):
    """A kind's weight in a profile: its share of the zoo's relative cost (every net counting alike),
    or of its absolute cost in priors written before relative shares existed."""
    return entry.get("rel_share", entry["share"])


def load_prior(path=None):
    """The shipped prior (or one at ``path``), checked."""
    from thor_sdk.store.files import read_json

    path = path or PRIOR_FILE
    if not os.path.isfile(path):
        raise FormatError(f"no prior at {path}: build it with `python -m thor_sdk.campaign.prior --write`")
    doc = read_json(path, "prior")  # strict: encoding, NaN tokens, number range, depth
    if not isinstance(doc, dict) or doc.get("format") != PRIOR_FORMAT or doc.get("version") != PRIOR_VERSION:
        raise NotOurFileError(f"{path} is not a {PRIOR_FORMAT} version {PRIOR_VERSION} file")
    from thor_sdk.store.files import validate_schema
    from thor_sdk.layers.kinds import get_kind

    validate_schema(doc, "prior.schema.json", path)
    for kind, entry in doc["kinds"].items():
        try:
            k = get_kind(kind)
            for c in entry["configs"]:
                k.check_config(c["config"])
        except ThorError as e:
            raise FormatError(f"{path}: kinds[{kind!r}]: {e}") from None
    return doc


def _valid(kind, config):
    from thor_sdk.layers.kinds import get_kind

    k = get_kind(kind)
    try:
        k.check_config(config)
        shapes = list(k.in_shape(config)) + list(k.out_shape(config))
    except Exception:
        return False
    if not all(isinstance(s, (int, float)) and s >= 1 for s in shapes):
        return False
    if "kernel" in config and "height" in config and kind != "conv_transpose2d":  # (a transposed one grows)
        if config["kernel"] > config["height"] + 2 * config.get("padding", 0):
            return False
        if config.get("kernel_w", config["kernel"]) > config["width"] + 2 * config.get("padding_w",
                                                                                        config.get("padding", 0)):
            return False
    if "kernel" in config and "length" in config:
        if config["kernel"] > config["length"] + 2 * config.get("padding", 0):
            return False
    return True


def _scaled(kind, base, factors):
    """``base`` with its size features scaled by ``factors`` (dict feature -> factor), kept valid."""
    c = dict(base)
    for f, x in factors.items():
        step = ALIGN if f in ALIGNED_FEATURES and base[f] % ALIGN == 0 else 1
        c[f] = max(step, step * int(round(base[f] * x / step)))
    for f in ("height", "width"):  # a side of 1 is 1-D data run as a 2-D kind (AvgPool1d, AdaptiveMaxPool1d)
        if base.get(f) == 1:
            c[f] = 1
    groups = base.get("groups", 1)
    if groups > 1 and "in_channels" in base:
        if groups == base["in_channels"] == base["out_channels"]:  # depthwise: channels tied to groups
            c["in_channels"] = c["out_channels"] = c["groups"] = c["in_channels"]
        elif groups == base["in_channels"]:  # depthwise with a channel multiplier
            mult = base["out_channels"] // groups
            c["groups"] = c["in_channels"]
            c["out_channels"] = c["in_channels"] * mult
        else:  # grouped: keep whole groups
            c["in_channels"] = groups * max(1, round(c["in_channels"] / groups))
            c["out_channels"] = groups * max(1, round(c["out_channels"] / groups))
    for tie in TIED:
        if all(t in c for t in tie):
            for t in tie[1:]:
                c[t] = c[tie[0]] if base[t] == base[tie[0]] else c[t]
    if kind == "softmax" and "last_dim" in c:
        c["numel"] = c["last_dim"] * max(1, round(c["numel"] / c["last_dim"]))
    if kind == "cat" and "parts" in c:
        c["numel"] = c["parts"] * max(1, round(c["numel"] / c["parts"]))
    if kind == "transformer_block" and "d_model" in c:
        c["d_model"] = max(c["d_model"], 8)
    if kind == "groupnorm" and "channels" in c:  # whole groups, of an aligned width where the zoo layer's is
        g = c["num_groups"]
        step = math.lcm(ALIGN, g) if base["channels"] % math.lcm(ALIGN, g) == 0 else g
        c["channels"] = step * max(1, round(c["channels"] / step))
    if kind == "mha" and "embed_dim" in c:  # whole heads, of an aligned width where the zoo layer's is
        h = c["num_heads"]
        step = math.lcm(ALIGN, h) if base["embed_dim"] % math.lcm(ALIGN, h) == 0 else h
        c["embed_dim"] = step * max(1, round(c["embed_dim"] / step))
    return c


def _kernel_neighbour(config, down):
    """``config`` with the next odd kernel size down (or up; up from 1), its padding kept "same" where it
    was, else no wider than half the kernel; None for an even kernel, a patchify layer (kernel = stride:
    structural, as a ViT's patch embedding) or a rectangular kernel (its shape is the structure: a 10x4 over
    MFCCs, a 1x7 of a factorised pair). A square conv2d's kernel stays square."""
    k = config.get("kernel")
    if not isinstance(k, int) or k % 2 == 0 or (k > 1 and k == config.get("stride", 1)):
        return None
    if "kernel_w" in config and (config["kernel_w"], config["padding_w"]) != (k, config["padding"]):
        return None
    k2 = k - 2 if down and k >= 3 else k + 2
    c = dict(config, kernel=k2)
    if "padding" in config:
        p, d = config["padding"], config.get("dilation", 1)
        c["padding"] = d * (k2 - 1) // 2 if p == d * (k - 1) // 2 else min(p, d * (k2 - 1) // 2)
    if "kernel_w" in config:
        c.update(kernel_w=c["kernel"], padding_w=c["padding"])
    return c


def _channels_neighbour(config):
    """An input conv2d ``config`` reading one channel (a grayscale image, a spectrogram) where it read any other
    count, three (RGB) where it read one."""
    return dict(config, in_channels=3 if config["in_channels"] == 1 else 1)


def _dilation_neighbour(config, u):
    """A conv ``config`` with another dilation: an undilated one dilated 2 (``u < 1/2``) or 4, a dilated one undilated
    (``u < 1/2``) or dilated twice as far; its padding kept "same" (``dilation x (kernel - 1) / 2`` per side) where it
    was, else as it was. None for a kernel of one tap (no spacing to change) or a patchify layer (kernel = stride).
    A TCN's dilations double per level (1, 2, 4, 8), WaveNet's to 512; DeepLab's atrous convs take 2-18."""
    k, d = config.get("kernel"), config.get("dilation", 1)
    if not isinstance(k, int) or not isinstance(d, int) or k < 2 or k == config.get("stride", 1):
        return None
    d2 = (2 if u < 0.5 else 4) if d == 1 else (1 if u < 0.5 else 2 * d)
    c = dict(config, dilation=d2)
    same = config.get("padding") == d * (k - 1) // 2 and d * (k - 1) % 2 == 0
    if same:
        c["padding"] = d2 * (k - 1) // 2
    if "kernel_w" in config:
        kw = config["kernel_w"]
        if kw > 1 and same and config.get("padding_w") == d * (kw - 1) // 2:
            c["padding_w"] = d2 * (kw - 1) // 2
    return c


def _rect_neighbour(kind, config, tall):
    """A square ``conv2d`` kernel k >= 3 as its factorised half: k x 1 (``tall``) or 1 x k, padded "same" along k
    where it was, and not along the 1; a square 2-D pooling as its one-sided k x 1 or 1 x k (stride and padding
    along the 1 too: an audio net's (2, 1) pooling over time). None for any other (an even conv kernel, a 1x1, a
    patchify or a rectangular kernel). The zoo's one rectangular kernel (a keyword spotter's 10x4) alone left every
    other shape an extrapolation: Inception's and ERFNet's 1x7/7x1 pairs, an audio net's 3x1 over time."""
    k, s = config["kernel"], config["stride"]
    square = (config["kernel_w"], config["stride_w"], config["padding_w"]) == (k, s, config["padding"])
    if not square or k < 2 or (kind == "conv2d" and (k % 2 == 0 or k == s)):
        return None
    if kind == "conv2d":
        p, half = config["padding"], config.get("dilation", 1) * (k - 1) // 2  # "same" of the (dilated) kernel
        p = half if p == half else min(p, half)
        one = {"kernel": 1, "padding": 0}
        long = {"kernel": k, "padding": p}
    else:  # a pooling: kernel, stride and padding along the 1 are 1, 1 and 0
        one = {"kernel": 1, "stride": 1, "padding": 0}
        long = {"kernel": k, "stride": s, "padding": config["padding"]}
    tall_side, wide_side = (long, one) if tall else (one, long)
    return dict(config, **tall_side, **{f"{f}_w": v for f, v in wide_side.items()})


#: the transposed convs that upsample by 2 as nets build them (kernel, padding, output_padding at stride 2): U-Net's
#: 2x2, ERFNet's and autoencoders' 3x3 with output padding, DCGAN's and pix2pix's 4x4. A neighbour share of
#: ``conv_transpose2d`` candidates takes another of them (``_deconv_neighbour``): the zoo has U-Net's and ERFNet's
DECONV_SHAPES = ((2, 0, 0), (3, 1, 1), (4, 1, 0))


def _deconv_neighbour(config, u):
    """A stride-2 ``conv_transpose2d`` config with another of ``DECONV_SHAPES`` (``u`` in [0, 1) picks which), the
    same input and so the same 2x output; None for another stride."""
    if config["stride"] != 2:
        return None
    others = [sh for sh in DECONV_SHAPES if sh != (config["kernel"], config["padding"], config["output_padding"])]
    k, p, op = others[min(int(u * len(others)), len(others) - 1)]
    return dict(config, kernel=k, padding=p, output_padding=op)


#: kinds a neighbour share of whose candidates takes another upsampling factor (``_scale_neighbour``)
SCALE_NEIGHBOUR_KINDS = ("upsample", "upsample_bilinear")


def _scale_neighbour(config):
    """An upsampling config by 2 where its zoo layer's factor is larger (LR-ASPP's bilinear x4 and x8; a U-Net or an
    FPN upsamples by 2), else by 4: the input kept."""
    return dict(config, scale=2 if config["scale"] > 2 else 4)


def _pad_neighbour(config, u):
    """A ``pad`` config padding other axes than its zoo layer's: a channel padding (a ResNet's option-A shortcut)
    as a spatial one, a spatial one (U-Net's to its skip) as ``nn.ZeroPad2d(1)`` (``u`` < 1/2: 2 along each axis)
    or TensorFlow's "same" before a strided conv (one after: 1), with no channel padding."""
    if config["pad_c"]:
        return dict(config, pad_c=0, pad_h=2, pad_w=2)
    side = 2 if u < 0.5 else 1
    return dict(config, pad_h=side, pad_w=side) if (config["pad_h"], config["pad_w"]) != (side, side) \
        else dict(config, pad_h=0, pad_w=0)


#: flags of which a neighbour share takes the value none of a kind's zoo layers has (``_other_flag``)
NEIGHBOUR_FLAGS = ("bias", "shared", "indices")


def _other_flag(configs, flag="bias"):
    """The value of ``flag`` (``bias``, ``shared``) none of a kind's zoo ``configs`` has, when they all have one
    (else None).

    A neighbour share of such a kind's candidates takes it: every zoo linear has a bias, but attention
    projections are often built without one (and the linear stand-ins of ``x @ y`` have none); profiles
    without bias-free samples left those layers outside what the samples covered. The zoo's PReLUs have a
    slope per channel, and ``nn.PReLU()`` (PyTorch's default) shares one. The zoo's max reductions keep their argmax
    (``torch.max(x, dim)``); ``x.amax(dim)`` does not."""
    seen = {c["config"].get(flag) for c in configs}
    return 1 - seen.pop() if len(seen) == 1 and seen <= {0, 1} else None


def _other_role(kind, configs):
    """The role ``kind`` can take that none of its zoo ``configs`` has, for ROLE_NEIGHBOUR_KINDS (else None)."""
    from thor_sdk.layers.kinds import get_kind

    if kind not in ROLE_NEIGHBOUR_KINDS:
        return None
    seen = {c["role"] for c in configs}
    other = [r for r in get_kind(kind).roles if r not in seen]
    return other[0] if len(seen) == 1 and other else None


def _other_dropout(config):
    """``config`` with the other attention dropout: none for a layer with dropout, DROPOUT_NEIGHBOUR_P without."""
    return dict(config, p=0 if config["p"] > 0 else DROPOUT_NEIGHBOUR_P)


def _attention_neighbour(config, path, masking):
    """An ``mha`` config on the other attention path (``path`` not None: the weights returned or the fused
    kernel) and/or with the other masking (``masking`` not None: an unmasked layer takes a mask, causal on the
    fused kernel for ``masking < 1/2``; a masked one none). Returned weights take a causal layer's mask as a
    tensor added to the scores, as PyTorch does."""
    c = dict(config)
    if path is not None:
        c["need_weights"] = 1 - c["need_weights"]
    if masking is not None:
        if c["mask"] or c["causal"]:
            c["mask"] = c["causal"] = 0
        elif c["need_weights"] or masking >= 0.5:
            c["mask"] = 1
        else:
            c["causal"] = 1
    if c["need_weights"] and c["causal"]:
        c["mask"], c["causal"] = 1, 0
    return c


def _groups_neighbour(config, more):
    """A ``groupnorm`` config with twice (``more``) or half the groups, where they still divide its channels
    (else None): a net's group count is a choice its author makes (2 in federated ResNets, 32 in the GroupNorm
    paper), and a profile whose samples kept the zoo's one would extrapolate every other."""
    g = config["num_groups"] * 2 if more else config["num_groups"] // 2
    if g < 1 or g == config["num_groups"] or config["channels"] % g:
        return None
    return dict(config, num_groups=g)


def _valid_or(kind, near, config):
    """A structural neighbour ``near`` where there is one and it is a valid layer, else ``config`` as it was."""
    return near if near is not None and _valid(kind, near) else config


def candidates(prior, kind, n, seed=0):
    """``n`` probe candidates ``(config, batch_size, role)`` for ``kind``, in Sobol order (deterministic)."""
    from scipy.stats import qmc

    from thor_sdk.layers.kinds import FREEZABLE, IN_PLACE, get_kind

    entry = prior["kinds"][kind]
    configs = entry["configs"]
    # a config only fine-tuned twins have (a frozen backbone's) is drawn at the twins' weight: the start, all that
    # many small kinds get, stays mostly on the layers trained whole, and the active selection (rel_weight) and the
    # coverage picks find the forward-only ones
    twin = float(prior.get("finetune_weight", 1.0))
    weights = [math.sqrt(max(c.get("rel_share", c["share"]), 1e-12)) * c["count"]
               * (twin if c.get("models") and all(m.endswith(FINETUNE_SUFFIX) for m in c["models"]) else 1.0)
               for c in configs]
    cum, acc = [], 0.0
    for w in weights:
        acc += w
        cum.append(acc)
    size_feats = sorted({f for c in configs for f in c["config"] if f in SIZE_FEATURES} - {"width"})
    lo, hi = prior.get("batch_range", BATCH_RANGE)
    factor = float(prior.get("size_factor", SIZE_FACTOR))
    seq_factor = float(prior.get("sequence_factor", factor))
    share = float(prior.get("neighbour_share", 0.0))
    dilation_share = float(prior.get("dilation_share", 0.0))
    channels_share = float(prior.get("input_channels_share", 0.0))
    other_role = _other_role(kind, configs) if share > 0 else None
    kernels = share > 0 and kind in KERNEL_NEIGHBOUR_KINDS
    other_flags = {f: v for f in NEIGHBOUR_FLAGS if (v := _other_flag(configs, f)) is not None} if share > 0 else {}
    # a dimension of its own for the dropout flip or the dilation, and one for freezing
    first_size = 5 if kind in DROPOUT_NEIGHBOUR_KINDS or kind in DILATION_NEIGHBOUR_KINDS else 4
    roles = get_kind(kind).roles
    frozen_share = float(prior.get("frozen_share", 0.0)) if kind in FREEZABLE else 0.0
    forward_share = (float(prior.get("forward_only_share", 0.0))
                     if not get_kind(kind).has_params and "input" in roles and "hidden" in roles else 0.0)
    frozen_dim = first_size if frozen_share > 0 or forward_share > 0 else None
    first_size += frozen_dim is not None
    dims = first_size + len(size_feats)
    sob = qmc.Sobol(d=dims, scramble=True, seed=seed)
    pts = sob.random(1 << max(1, math.ceil(math.log2(max(2 * n, 2)))))
    out, seen = [], set()
    for p in pts:
        i = min(next((j for j, c in enumerate(cum) if p[0] * acc <= c), len(cum) - 1), len(configs) - 1)
        base = configs[i]
        factors = {f: (seq_factor if f in SEQUENCE_FEATURES else factor) ** (2.0 * p[first_size + j] - 1.0)
                   for j, f in enumerate(size_feats) if f in base["config"]}
        if "height" in factors and "width" in base["config"]:
            factors["width"] = factors["height"]
        batch = int(round(math.exp(math.log(lo) + p[1] * (math.log(hi) - math.log(lo)))))
        config = _scaled(kind, base["config"], factors)
        if not _valid(kind, config):
            config = dict(base["config"])
        if kind in RECT_NEIGHBOUR_KINDS and p[3] < share / 3:
            config = _valid_or(kind, _rect_neighbour(kind, config, tall=p[2] < 0.5), config)
        elif kernels and p[3] < share:
            split = 2 * share / 3 if kind in RECT_NEIGHBOUR_KINDS else share / 2  # down below it, up above
            config = _valid_or(kind, _kernel_neighbour(config, down=p[3] < split), config)
        if kind == "groupnorm" and p[3] < share:
            config = _valid_or(kind, _groups_neighbour(config, more=p[3] < share / 2), config)
        if kind == "conv_transpose2d" and p[3] < share:
            config = _valid_or(kind, _deconv_neighbour(config, p[3] / share), config)
        if kind in SCALE_NEIGHBOUR_KINDS and p[3] < share:
            config = _valid_or(kind, _scale_neighbour(config), config)
        if kind == "pad" and p[3] < share:
            config = _valid_or(kind, _pad_neighbour(config, p[3] / share), config)
        if kind in DROPOUT_NEIGHBOUR_KINDS and p[4] < share:
            config = _other_dropout(config)
        if kind in DILATION_NEIGHBOUR_KINDS and p[4] < dilation_share:
            config = _valid_or(kind, _dilation_neighbour(config, p[4] / dilation_share), config)
        if (kind == "conv2d" and base["role"] == "input" and not base["config"].get("frozen")
                and p[4] >= 1.0 - channels_share):  # a net's first conv, not a frozen backbone's (forward only)
            config = _valid_or(kind, _channels_neighbour(config), config)
        if kind == "mha":
            config = _attention_neighbour(config, p[3] / share if p[3] < share else None,
                                          p[2] / share if p[2] < share else None)
        if other_flags and p[2] < share:  # (p[2] also picks a role: recurrent kinds have no such flag)
            config = dict(config, **other_flags)
        role = other_role if other_role and p[2] < share else base["role"]
        if frozen_dim is not None and p[frozen_dim] < frozen_share:  # frozen; half of them forward only
            config = dict(config, frozen=1 - int(config.get("frozen", 0)))
            if p[frozen_dim] < frozen_share / 2 and "input" in roles:
                role = "input"
        elif frozen_dim is not None and p[frozen_dim] < forward_share:  # forward only; half of them in place
            role = "input"
            if p[frozen_dim] < forward_share / 2 and kind in IN_PLACE:
                config = dict(config, inplace=1)
        key = json.dumps([config, batch, role], sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        out.append((config, batch, role))
        if len(out) >= n:
            break
    return out


def main(argv=None):
    import argparse

    ap = argparse.ArgumentParser(description="Build the profile prior from the model zoo.")
    ap.add_argument("--write", action="store_true", help=f"write {PRIOR_FILE}")
    args = ap.parse_args(argv)
    doc = build_prior()
    text = json.dumps(doc, indent=1, sort_keys=False) + "\n"
    if args.write:
        from thor_sdk.store.files import write_text

        write_text(PRIOR_FILE, text, "prior")
    for k, e in doc["kinds"].items():
        print(f"{k:20s} share {e['share']:.3f}  configs {len(e['configs'])}")


if __name__ == "__main__":
    main()
