"""Ops that no bank model has, rewritten into ops that bank models have (part of `recommender.frontend.canonical`).

A kernel gets transferred schedules only from donors of its class or anchor (a conv2d, a matmul); ops
that the zoo's models never use had none, and their kernels fell back to a short search. Two that ONNX
files from other architectures bring, each rewritten exactly (tests compare with ONNX Runtime):

- ``conv1d`` (audio and sequence models) is a conv2d over a map of height 1; the reshape back to 3-D is
  moved below the bias add and the activation that follow, so that they stay in the conv's kernel;
- ``conv2d_transpose`` (decoders, U-Nets, GANs): with kernel = stride and no padding (the usual 2x
  up-convolution) a 1x1 conv2d to ``out * kh * kw`` channels followed by a depth-to-space shuffle, which
  needs no more multiplies than the transposed conv itself; otherwise a stride-1 conv2d over the input
  spread out with zeros, with the kernel flipped (what TVM's own transposed conv computes, in one kernel).

A transposed conv with groups or dilation is left as it is. (Einsum, which TVM's ONNX frontend lowers to a
TIR kernel of its own, is rewritten in the ONNX graph: `recommender.frontend.onnx_rewrite`.)
"""
from __future__ import annotations


def rules(shape) -> list:
    """(pattern, rewriter) pairs for `tvm.relax.dpl.rewrite_call`; `shape(expr)` gives a static shape."""
    from tvm import relax
    from tvm.relax.dpl import is_op, wildcard

    x, w = wildcard(), wildcard()

    def conv1d(orig: object, m: dict) -> object:
        a, data, weight = orig.attrs, m[x], m[w]
        sd, sw, so = shape(data), shape(weight), shape(orig)
        if (sd is None or sw is None or so is None or a.data_layout != "NCW" or a.kernel_layout != "OIW"
                or (a.out_layout or "NCW") != "NCW"):
            return orig
        out = relax.op.nn.conv2d(relax.op.reshape(data, [sd[0], sd[1], 1, sd[2]]),
                                 relax.op.reshape(weight, [sw[0], sw[1], 1, sw[2]]),
                                 strides=(1, a.strides[0]), padding=(0, a.padding[0], 0, a.padding[1]),
                                 dilation=(1, a.dilation[0]), groups=a.groups, out_dtype=a.out_dtype)
        return relax.op.reshape(out, so)

    def conv_transpose(orig: object, m: dict) -> object:
        a, data, weight = orig.attrs, m[x], m[w]
        sd, sw = shape(data), shape(weight)
        if (sd is None or sw is None or a.data_layout != "NCHW" or a.kernel_layout != "IOHW"
                or (a.out_layout or "NCHW") != "NCHW" or a.groups != 1 or tuple(a.dilation) != (1, 1)):
            return orig
        n, c, h, wd = sd
        _, o, kh, kw = sw
        sh, sv = (int(s) for s in a.strides)
        pad = [int(p) for p in a.padding]
        extra = [int(p) for p in a.output_padding]
        if (kh, kw) == (sh, sv) and not any(pad) and not any(extra):
            flat = relax.op.reshape(relax.op.permute_dims(weight, [1, 2, 3, 0]), [o * kh * kw, c, 1, 1])
            out = relax.op.reshape(relax.op.nn.conv2d(data, flat, out_dtype=a.out_dtype), [n, o, kh, kw, h, wd])
            return relax.op.reshape(relax.op.permute_dims(out, [0, 1, 4, 2, 5, 3]), [n, o, h * kh, wd * kw])
        top, left, bottom, right = pad
        pads = (kh - 1 - top, kw - 1 - left, kh - 1 - bottom + extra[0], kw - 1 - right + extra[1])
        if min(pads) < 0:
            return orig
        spread = data
        if (sh, sv) != (1, 1):  # zeros between the input's rows and columns
            spread = relax.op.reshape(data, [n, c, h, 1, wd, 1])
            spread = relax.op.nn.pad(spread, [0, 0, 0, 0, 0, 0, 0, sh - 1, 0, 0, 0, sv - 1])
            spread = relax.op.strided_slice(relax.op.reshape(spread, [n, c, h * sh, wd * sv]), axes=[2, 3],
                                            begin=[0, 0], end=[(h - 1) * sh + 1, (wd - 1) * sv + 1])
        flipped = relax.op.permute_dims(relax.op.flip(relax.op.flip(weight, 2), 3), [1, 0, 2, 3])
        return relax.op.nn.conv2d(spread, flipped, padding=pads, out_dtype=a.out_dtype)

    conv = is_op("relax.nn.conv2d")(wildcard(), wildcard())
    biased = is_op("relax.add")(conv, wildcard())
    dropped = is_op("relax.reshape")(conv | biased, wildcard())
    other = wildcard()

    def bias_above_height_drop(orig: object, m: dict) -> object:
        """add(drop_height(conv2d), c) -> drop_height(add(conv2d, c lifted)): the bias stays in the conv kernel."""
        sq, c = m[dropped], m[other]
        if not _drops_height(sq, shape):
            return orig
        sc, so = shape(c), shape(orig)
        if sc is None or so is None or len(sc) > 3:
            return orig
        lifted = relax.op.expand_dims(relax.op.reshape(c, [1] * (3 - len(sc)) + sc) if len(sc) < 3 else c, 2)
        return relax.op.reshape(relax.op.add(sq.args[0], lifted), so)  # `c` may broadcast the conv's output

    def act_above_height_drop(orig: object, m: dict) -> object:
        """act(drop_height(conv2d [+ bias])) -> drop_height(act(...)): the activation stays in the conv kernel."""
        sq = m[dropped]
        if not _drops_height(sq, shape):
            return orig
        return relax.op.reshape(_same_op(orig, sq.args[0]), shape(sq))

    acts = _any_unary(_ACTIVATIONS, dropped)
    return [(is_op("relax.nn.conv1d")(x, w), conv1d),
            (is_op("relax.nn.conv2d_transpose")(x, w), conv_transpose),
            (is_op("relax.add")(dropped, other) | is_op("relax.add")(other, dropped), bias_above_height_drop),
            (acts, act_above_height_drop)]


_ACTIVATIONS = ("nn.relu", "nn.gelu", "nn.gelu_tanh", "nn.silu", "sigmoid", "tanh")


def _any_unary(names: tuple[str, ...], arg: object) -> object:
    from functools import reduce

    from tvm.relax.dpl import is_op
    return reduce(lambda a, b: a | b, (is_op(f"relax.{n}")(arg) for n in names))


def _same_op(call: object, arg: object) -> object:
    """`call`'s op and attributes applied to `arg` instead."""
    from tvm import relax
    return relax.Call(call.op, [arg], call.attrs)


def _drops_height(sq: object, shape) -> bool:
    """A reshape of a 4-D tensor of height 1 to 3-D that drops the height (what the conv1d rewrite writes)."""
    src, dst = shape(sq.args[0]), shape(sq)
    return src is not None and dst is not None and len(src) == 4 and src[2] == 1 and dst == src[:2] + src[3:]
