"""Export-independent kernel classes: a Relax rewrite run before legalization.

The same layer exported two ways gives kernels of different classes, and a schedule replays only within its
class. torch.export flattens a linear layer to a 2-D matmul ([tokens, d] x [d, n]); ONNX exporters keep the
batch dimension ([1, tokens, d] x [d, n], three spatial axes) and write attention as 4-D batch matmuls
([1, heads, s, d]) where torch has 3-D ones ([heads, s, d]). This pass gives every model the torch form:

- ``matmul(x[..., k], w[k, n])`` with x of rank 3 or more becomes a 2-D matmul between two reshapes;
- ``matmul(a[b..., m, k], c[b..., k, n])`` with equal batch dims of rank 2 or more (or one unit batch dim)
  gets a single batch dim (none when it is 1);
- the reshape back to the original shape is moved past a bias add (an operand that broadcasts along the
  last dim), so that the bias stays fused with the matmul as in torch's addmm; what follows (activation,
  residual add) stays outside the kernel, as in the torch form.

Ops that no bank model has (conv1d, transposed conv) are first rewritten into conv2ds
(`recommender.frontend.canonical_ops`; einsum and recurrent layers are rewritten in the ONNX graph, `recommender.frontend.onnx_rewrite`).

Also compile fixes, not class changes: compares (``equal``, ``greater``, ...) of two bool tensors compare them
as int8, bitwise ops on bool tensors become the logical ones, and a bool ``cumsum`` sums as int32 and casts
back (TVM 0.27's LLVM codegen takes bool for a float in compares, bitwise ops and adds and fails the build:
GPT-2's causal mask and position ids; a padding mask inverted with ``~``). And a speed fix: a float tensor
raised to a constant 2, 3 or 4 becomes multiplies (GPT-2's GELU computes ``x ** 3``; TVM calls libm's pow
for each element). And a concat drops its empty parts (a roll by a whole period, exported as slices and a
concat, slices nothing): a loop of extent 0 makes the kernel's scope no stage pipeline, so no block of it
inlines, and MetaSchedule's postprocessor divides by it (Swin's window roll ran as plain loops).

Reshapes cost nothing at run time (the build turns them into views). Every rewrite keeps the function's
output exactly (tests compare the compiled outputs).
"""
from __future__ import annotations

from math import prod


def canonicalize_kernels(mod: object) -> object:
    """The module with every function's matmuls in the torch form (see the module docstring)."""
    from tvm import relax
    from tvm.relax.dpl import rewrite_call
    out = mod
    for gv, func in mod.functions.items():
        if not isinstance(func, relax.Function):
            continue
        new = func
        for pattern, rewriter in _rules():
            new = rewrite_call(pattern, rewriter, new)
        if not new.same_as(func):
            out = _replaced(out, gv, new)
    return out


def _replaced(mod: object, gv: object, func: object) -> object:
    import tvm
    funcs = dict(mod.functions.items())
    funcs[gv] = func
    return tvm.IRModule(funcs, attrs=mod.attrs)


def _shape(expr: object) -> list[int] | None:
    """The static shape of a tensor expression, None if unknown or symbolic."""
    from tvm import relax
    ty = getattr(expr, "ty", None)
    if not isinstance(ty, relax.TensorType) or ty.shape is None or not hasattr(ty.shape, "values"):
        return None
    try:
        return [int(d) for d in ty.shape.values]
    except (TypeError, ValueError):
        return None


def _rules() -> list:
    from tvm import relax
    from tvm.relax.dpl import is_op, wildcard

    x, w = wildcard(), wildcard()

    def matmul(orig: object, m: dict) -> object:
        a, b = m[x], m[w]
        sa, sb = _shape(a), _shape(b)
        if sa is None or sb is None:
            return orig
        dtype = orig.attrs.out_dtype
        if len(sb) == 2 and len(sa) >= 3:  # a linear layer over a batch of tokens
            rows = prod(sa[:-1])
            flat = relax.op.matmul(relax.op.reshape(a, [rows, sa[-1]]), b, out_dtype=dtype)
            return relax.op.reshape(flat, sa[:-1] + [sb[-1]])
        if len(sa) == len(sb) >= 3 and sa[:-2] == sb[:-2] and (len(sa) > 3 or sa[0] == 1):
            batch = prod(sa[:-2])
            lead = [batch] if batch > 1 else []
            flat = relax.op.matmul(relax.op.reshape(a, lead + sa[-2:]), relax.op.reshape(b, lead + sb[-2:]),
                                   out_dtype=dtype)
            return relax.op.reshape(flat, sa[:-1] + [sb[-1]])
        return orig

    inner, bias = wildcard(), wildcard()
    reshaped = is_op("relax.reshape")(inner, wildcard())

    def bias_add(orig: object, m: dict) -> object:
        src, r, c = m[inner], m[reshaped], m[bias]
        s, full, sc = _shape(src), _shape(r), _shape(c)
        if not (_is_flattening(s, full) and sc and sc[-1] == full[-1] and prod(sc[:-1]) == 1):
            return orig
        flat_bias = relax.op.reshape(c, [sc[-1]]) if len(sc) > 1 else c
        args = [src, flat_bias] if orig.args[0].same_as(r) else [flat_bias, src]
        return relax.op.reshape(relax.op.add(*args), full)

    p, q = wildcard(), wildcard()

    def bool_compare(orig: object, m: dict) -> object:
        a, b = m[p], m[q]
        if not (_dtype(a) == _dtype(b) == "bool"):
            return orig
        compare = getattr(relax.op, orig.op.name.split(".")[-1])
        return compare(relax.op.astype(a, "int8"), relax.op.astype(b, "int8"))

    def bool_bitwise(orig: object, m: dict) -> object:
        args = [m[p]] if orig.op.name == "relax.bitwise_not" else [m[p], m[q]]
        if any(_dtype(a) != "bool" for a in args):
            return orig
        return getattr(relax.op, orig.op.name.replace("relax.bitwise_", "logical_"))(*args)

    def bool_cumsum(orig: object, m: dict) -> object:
        a = m[p]
        if _dtype(a) != "bool" or _dtype(orig) != "bool":
            return orig
        at = orig.attrs
        summed = relax.op.cumsum(relax.op.astype(a, "int32"), axis=at.axis, dtype="int32", exclusive=at.exclusive)
        return relax.op.astype(summed, "bool")

    def small_power(orig: object, m: dict) -> object:
        base, exponent = m[p], _scalar(m[q])
        if exponent not in _SMALL_POWERS or _dtype(base) not in ("float32", "float64", "float16"):
            return orig
        out = base
        for _ in range(int(exponent) - 1):
            out = relax.op.multiply(out, base)
        return out

    parts = wildcard()

    def empty_concat(orig: object, m: dict) -> object:
        tup = m[parts]
        if not isinstance(tup, relax.Tuple):
            return orig
        shapes = [_shape(f) for f in tup.fields]
        if any(s is None for s in shapes):
            return orig
        kept = [f for f, s in zip(tup.fields, shapes) if prod(s) > 0]
        if not kept or len(kept) == len(tup.fields):
            return orig
        return kept[0] if len(kept) == 1 else relax.op.concat(kept, axis=orig.attrs.axis)

    from .canonical_ops import rules as op_rules
    return [*op_rules(_shape),  # first: the matmuls and conv2ds they write are then canonicalized in turn
            (is_op("relax.matmul")(x, w), matmul),
            (is_op("relax.add")(reshaped, bias) | is_op("relax.add")(bias, reshaped), bias_add),
            (_any_op(_COMPARES, p, q), bool_compare),
            (is_op("relax.bitwise_not")(p) | _any_op(_BITWISE, p, q), bool_bitwise),
            (is_op("relax.cumsum")(p), bool_cumsum),
            (is_op("relax.power")(p, q), small_power),
            (is_op("relax.concat")(parts), empty_concat)]


_SMALL_POWERS = (2.0, 3.0, 4.0)  # x**n as n-1 multiplies: a libm pow per element cost GPT-2 15% of its time


def _scalar(expr: object) -> float | None:
    """The value of a constant with one element, None for anything else."""
    import tvm
    if not isinstance(expr, tvm.ir.Constant):  # Relax constants in TVM 0.27 (their tensor is `.value`)
        return None
    value = expr.value.numpy()
    return float(value.reshape(())) if value.size == 1 else None


_COMPARES = ("equal", "not_equal", "greater", "greater_equal", "less", "less_equal")
_BITWISE = ("bitwise_and", "bitwise_or", "bitwise_xor")


def _any_op(names: tuple[str, ...], *args: object) -> object:
    """A pattern matching a call of any of the binary ops `names` on `args`."""
    from functools import reduce

    from tvm.relax.dpl import is_op
    return reduce(lambda a, b: a | b, (is_op(f"relax.{n}")(*args) for n in names))


def _dtype(expr: object) -> str | None:
    """The element type of a tensor expression, None if not a tensor."""
    from tvm import relax
    ty = getattr(expr, "ty", None)
    return str(ty.dtype) if isinstance(ty, relax.TensorType) else None


def _is_flattening(flat: list[int] | None, full: list[int] | None) -> bool:
    """A reshape from 2-D `flat` to `full` that splits the rows only (a matmul's output back to its batch)."""
    return (flat is not None and full is not None and len(flat) == 2 and len(full) > 2
            and flat[-1] == full[-1] and prod(flat) == prod(full))
