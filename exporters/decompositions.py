"""Decompositions used while tracing a training step for ONNX export.

The ONNX translation library (onnxscript's torch_lib) has no implementations of most *backward*
ATen ops, so the traced step must be written in forward ops only. torch ships decompositions for
many backward ops; the ones it lacks for CPU tracing (``convolution_backward``, 1-D and 2-D, plain and transposed,
``avg_pool2d_backward``, ``_adaptive_avg_pool2d_backward``, ``upsample_bilinear2d_backward``,
``adaptive_max_pool2d_backward``) are written here in terms of plain (transposed) convolutions, matrix products and
scatters, which every ONNX runtime executes.

Only backward ops are decomposed, plus forward ops ONNX has no (correct) translation for, so the
forward part of the exported graph keeps its natural ONNX ops (Conv, MaxPool, Gemm, ...). Training-mode
batch norm is one of those: onnxscript 0.7 exports it as an inference-mode ``BatchNormalization``
(normalising with the running statistics and never updating them -- silently wrong numbers), so it is
decomposed into mean/variance arithmetic here. The same goes for ``nll_loss_forward`` (its
``total_weight`` is faked); thor-sdk's own loss never emits it, the decomposition is a second guard.
"""


def _pair(v):
    if isinstance(v, (list, tuple)):
        return [int(i) for i in v] if len(v) == 2 else [int(v[0])] * 2
    return [int(v)] * 2


def convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                         output_padding, groups, output_mask):
    """``aten.convolution_backward`` for 1-D and 2-D convolutions, plain or transposed, as two convolutions (a 1-D
    one as the 2-D one over a single row).

    Plain: grad_input is the transposed convolution of grad_output with the weight; grad_weight is a
    grouped convolution of the input (batch moved into channels) with grad_output used as the
    kernel (stride and dilation swap roles); grad_bias is a sum. Transposed (``nn.ConvTranspose2d``): the
    roles of input and output swap: grad_input is the plain convolution of grad_output with the weight, and
    grad_weight is the plain convolution's weight gradient with grad_output as its input and the input as its
    output's gradient (the weight, ``(C_in, C_out / groups, kH, kW)``, is that convolution's).
    """
    import torch

    aten = torch.ops.aten
    if input.dim() == 3:  # 1-D (nn.Conv1d, nn.ConvTranspose1d): the 2-D one over a single row
        got = convolution_backward(grad_output.unsqueeze(2), input.unsqueeze(2), weight.unsqueeze(2), bias_sizes,
                                   [1, _pair(stride)[0]], [0, _pair(padding)[0]], [1, _pair(dilation)[0]],
                                   transposed, [0, _pair(output_padding)[0]], groups, output_mask)
        if got is NotImplemented:
            return got
        return tuple(None if t is None else t.squeeze(2) if i < 2 else t for i, t in enumerate(got))
    if input.dim() != 4:
        return NotImplemented
    stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    h, w = input.shape[2], input.shape[3]
    kh, kw = weight.shape[2], weight.shape[3]
    ho, wo = grad_output.shape[2], grad_output.shape[3]
    g = int(groups)
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        if transposed:
            grad_input = aten.convolution(grad_output, weight, None, stride, padding, dilation, False, [0, 0], g)
            if tuple(grad_input.shape[2:]) != (h, w):
                return NotImplemented
        else:
            out_pad = [
                h - ((ho - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + 1),
                w - ((wo - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw - 1) + 1),
            ]
            if any(p < 0 or (p >= s and p >= d) for p, s, d in zip(out_pad, stride, dilation)):
                return NotImplemented
            grad_input = aten.convolution(grad_output, weight, None, stride, padding, dilation, True, out_pad, g)
    if output_mask[1]:
        x, gy = (grad_output, input) if transposed else (input, grad_output)
        grad_weight = _weight_grad(x, gy, weight.shape, stride, padding, dilation, g)
    if output_mask[2]:
        grad_bias = grad_output.sum(dim=(0, 2, 3))
    return grad_input, grad_weight, grad_bias


def _weight_grad(x, gy, weight_shape, stride, padding, dilation, g):
    """The weight gradient of the plain 2-D convolution of ``x`` (N, C_in, H, W) by a weight of ``weight_shape``
    (C_out, C_in / g, kH, kW) whose output's gradient is ``gy``: a grouped convolution of ``x`` (batch moved into
    channels) with ``gy`` as the kernel (stride and dilation swap roles), cropped to the kernel."""
    import torch

    aten = torch.ops.aten
    n, _, h, w = x.shape
    c_out, cig, kh, kw = weight_shape
    ho, wo = gy.shape[2], gy.shape[3]
    cog = c_out // g
    # x (N, g*cig, H, W) -> (cig, g*N, H, W): batch = cig, channels = (group, sample)
    x = x.reshape(n, g, cig, h, w).permute(2, 1, 0, 3, 4).reshape(cig, g * n, h, w)
    # gy (N, g*cog, Ho, Wo) -> kernel (g*cog, N, Ho, Wo)
    k = gy.reshape(n, g, cog, ho, wo).permute(1, 2, 0, 3, 4).reshape(g * cog, n, ho, wo)
    gw = aten.convolution(x, k, None, dilation, padding, stride, False, [0, 0], g)
    return gw[:, :, :kh, :kw].permute(1, 0, 2, 3).contiguous()


def _interpolation_matrix(out_size, in_size, align_corners, scale, like):
    """The (out_size, in_size) matrix of 1-D linear interpolation as PyTorch's ``upsample_bilinear2d`` computes it
    along one axis (``area_pixel_compute_source_index``: source = scale x destination with ``align_corners``, else
    scale x (destination + 1/2) - 1/2 clamped at 0; scale = 1 / the given scale factor, else in / out), built from
    traced arange and comparison ops (no data of its own)."""
    import torch

    if align_corners:
        step = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    else:
        step = 1.0 / scale if scale is not None and scale > 0 else in_size / out_size
    dst = torch.arange(out_size, dtype=like.dtype, device=like.device)
    src = dst * step if align_corners else torch.clamp((dst + 0.5) * step - 0.5, min=0.0)
    i0 = torch.floor(src)
    frac = (src - i0).unsqueeze(1)
    i1 = torch.clamp(i0 + 1, max=in_size - 1).unsqueeze(1)
    cols = torch.arange(in_size, dtype=like.dtype, device=like.device).unsqueeze(0)
    return (cols == i0.unsqueeze(1)).to(like.dtype) * (1 - frac) + (cols == i1).to(like.dtype) * frac


def upsample_bilinear2d_backward(grad_output, output_size, input_size, align_corners, scales_h=None, scales_w=None):
    """``aten.upsample_bilinear2d_backward`` as two matrix products: bilinear upsampling is linear and separable,
    ``out = A_h x A_w^T`` per channel, so ``grad_x = A_h^T grad_out A_w`` (onnxscript has no translation of the
    backward op; MatMul is in every runtime)."""
    ho, wo = int(output_size[0]), int(output_size[1])
    hi, wi = int(input_size[2]), int(input_size[3])
    a_h = _interpolation_matrix(ho, hi, align_corners, scales_h, grad_output)
    a_w = _interpolation_matrix(wo, wi, align_corners, scales_w, grad_output)
    return a_h.transpose(0, 1) @ grad_output @ a_w


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """Training-mode batch norm in elementwise ops, updating the running statistics as torch does
    (biased variance to normalise, unbiased variance into ``running_var``)."""
    if not training:
        return NotImplemented
    dims = [0] + list(range(2, input.dim()))
    shape = [1, input.shape[1]] + [1] * (input.dim() - 2)
    n = input.numel() // input.shape[1]
    mean = input.mean(dim=dims)
    centered = input - mean.reshape(shape)
    var = (centered * centered).mean(dim=dims)
    rstd = (var + eps).rsqrt()
    out = centered * rstd.reshape(shape)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    if running_mean is not None:
        running_mean.copy_(running_mean * (1.0 - momentum) + mean * momentum)
    if running_var is not None:
        running_var.copy_(running_var * (1.0 - momentum) + var * (momentum * n / max(n - 1, 1)))
    return out, mean, rstd


def native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train,
                               eps, output_mask):
    """Training-mode batch-norm backward in a few elementwise ops and two reductions (torch's own
    decomposition emits several times more nodes, which makes tracing and export slow)."""
    if not train or save_mean is None or save_invstd is None:
        return NotImplemented
    dims = [0] + list(range(2, input.dim()))
    shape = [1, input.shape[1]] + [1] * (input.dim() - 2)
    n = input.numel() // input.shape[1]
    rstd = save_invstd.reshape(shape)
    xhat = (input - save_mean.reshape(shape)) * rstd
    sum_dy = grad_out.sum(dim=dims)
    sum_dy_xhat = (grad_out * xhat).sum(dim=dims)
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        scale = rstd if weight is None else rstd * weight.reshape(shape)
        grad_input = scale * (grad_out - (sum_dy / n).reshape(shape) - xhat * (sum_dy_xhat / n).reshape(shape))
    if output_mask[1]:
        grad_weight = sum_dy_xhat
    if output_mask[2]:
        grad_bias = sum_dy
    return grad_input, grad_weight, grad_bias


def _pool_backward(grad_output, input, kernel, stride, padding):
    """Gradient of an average pooling that divides by the full kernel area (count_include_pad)."""
    import torch

    aten = torch.ops.aten
    c = input.shape[1]
    h, w = input.shape[2], input.shape[3]
    ho, wo = grad_output.shape[2], grad_output.shape[3]
    out_pad = [h - ((ho - 1) * stride[0] - 2 * padding[0] + kernel[0]),
               w - ((wo - 1) * stride[1] - 2 * padding[1] + kernel[1])]
    if any(p < 0 or p >= s for p, s in zip(out_pad, stride)):
        return NotImplemented
    ones = torch.full((c, 1, kernel[0], kernel[1]), 1.0 / (kernel[0] * kernel[1]), dtype=grad_output.dtype)
    return aten.convolution(grad_output, ones, None, stride, padding, [1, 1], True, out_pad, c)


def avg_pool2d_backward(grad_output, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override):
    if ceil_mode or divisor_override is not None or input.dim() != 4:
        return NotImplemented
    kernel = _pair(kernel_size)
    stride = _pair(stride) if stride else kernel
    padding = _pair(padding)
    if not count_include_pad and any(padding):
        return NotImplemented
    return _pool_backward(grad_output, input, kernel, stride, padding)


def adaptive_avg_pool2d_backward(grad_output, input):
    if input.dim() != 4:
        return NotImplemented
    h, w = input.shape[2], input.shape[3]
    ho, wo = grad_output.shape[2], grad_output.shape[3]
    if h % ho or w % wo:
        return NotImplemented
    if ho == 1 and wo == 1:
        return (grad_output / float(h * w)).expand(input.shape).contiguous()
    kernel = [h // ho, w // wo]
    return _pool_backward(grad_output, input, kernel, kernel, [0, 0])


def adaptive_max_pool2d_backward(grad_output, input, indices):
    """The argmax's gradient scattered back: ``indices`` are positions within each (sample, channel) plane, as
    torch's own ``max_pool2d_with_indices_backward`` decomposition reads them (a ScatterElements with add)."""
    if input.dim() != 4:
        return NotImplemented
    b, c = input.shape[0], input.shape[1]
    flat = grad_output.new_zeros((b, c, input.shape[2] * input.shape[3]))
    return flat.scatter_add(2, indices.reshape(b, c, -1), grad_output.reshape(b, c, -1)).reshape(input.shape)


def decomposition_table():
    """The decomposition table for ``make_fx`` when tracing a training step for ONNX."""
    import torch
    from torch._decomp import get_decompositions

    aten = torch.ops.aten
    table = get_decompositions([
        aten.native_batch_norm_backward,
        aten.native_layer_norm_backward,
        aten.embedding_dense_backward,
        aten.max_pool2d_with_indices_backward,
        aten.threshold_backward,
        aten.hardtanh_backward,
        aten.gelu_backward,
        aten.tanh_backward,
        aten.sigmoid_backward,
        aten._softmax_backward_data,
        aten._log_softmax_backward_data,
        aten.native_dropout_backward,
        aten._adaptive_avg_pool2d,
        aten.mse_loss_backward,
        aten.mse_loss,
        aten.nll_loss_forward,
        aten.nll_loss_backward,
    ])
    # onnxscript translates training-mode batch norm as inference-mode BatchNormalization
    # (normalises with the running statistics and never updates them): decompose it instead
    table[aten.native_batch_norm.default] = native_batch_norm
    fallback = table[aten.native_batch_norm_backward.default]

    def bn_backward(*args):
        out = native_batch_norm_backward(*args)
        return fallback(*args) if out is NotImplemented else out

    table[aten.native_batch_norm_backward.default] = bn_backward
    table[aten._native_batch_norm_legit.default] = native_batch_norm
    table[aten.convolution_backward.default] = convolution_backward
    table[aten.avg_pool2d_backward.default] = avg_pool2d_backward
    table[aten.upsample_bilinear2d_backward.default] = upsample_bilinear2d_backward
    table[aten._adaptive_avg_pool2d_backward.default] = adaptive_avg_pool2d_backward
    table[aten.adaptive_max_pool2d_backward.default] = adaptive_max_pool2d_backward
    return table
