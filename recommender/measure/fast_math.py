"""Vectorized float32 exp, log, pow and erf (and so tanh, sigmoid, softmax, GELU, softplus, Mish and a local
response norm) in kernels compiled for CPUs.

TVM lowers `exp` on an LLVM target to LLVM's `llvm.exp`, which x86 code generation turns into one scalar
libm `expf` call per element, even in a vectorized loop, and `erf` to a libm `erff` call. tanh and sigmoid
are lowered through exp. A softmax, a GELU or a SiLU then runs at a few ns per element
(`benchmarks/fast_math_probe.py` times both on real models' kernels).

`fast_math(True)` makes `tvm.compile` lower them to polynomials instead, which vectorize with the loop:
exp by the Cephes range reduction (x = n ln2 + r, a degree-7 polynomial in r, 2^n built in the exponent
bits), log by Cephes' too (exponent bits and a degree-8 polynomial of the mantissa), pow as exp(y log|x|)
with IEEE's special cases kept, erf by TVM's own rational approximation (the one its GPU targets use,
`fast_erf_float_expr`). exp, log and erf stay within 2e-6 of libm, pow within a few ulp times |y log|x||
(`tests/test_fast_math.py` checks them). The rules act when the kernel is lowered
(TVM's LowerIntrin pass), after scheduling: kernels, workloads, the bank's records and their classes stay
the same, and only the machine code changes.

schedrec measures every build with it (`MeasureSettings.fast_math`, on by default; `--exact-math` to turn
it off), so the latencies it ranks and reports are those of this code. A user building a schedrec database
with stock TVM gets the same code by compiling inside `with fast_math(True):`.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

FLOAT32 = "float32"
LEVEL = 100  # above the level of TVM's own lowering rules, so that the rule below is the one used

_enabled = False
_registered = False

# Cephes expf: exp(x) = 2^n * exp(r), r = x - n ln2 in [-ln2/2, ln2/2], ln2 split in two for exactness
_LN2_HI, _LN2_LO, _LOG2E = 0.693359375, -2.12194440e-4, 1.44269504088896341
_EXP_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
             5.0000001201e-1)
_EXP_MAX, _EXP_MIN = 88.0, -87.3  # 2^n stays a normal float32 (n in [-126, 127])


def fast_exp_expr(x: object) -> object:
    """exp(x) for a float32 TIR expression (a scalar or a vector of float32 lanes), as a polynomial that
    vectorizes."""
    from tvm import tirx
    lanes = _lanes(x)

    def c(v: float) -> object:
        return _splat(v, FLOAT32, lanes)
    x = tirx.max(tirx.min(x, c(_EXP_MAX)), c(_EXP_MIN))
    n = tirx.floor(x * c(_LOG2E) + c(0.5))
    r = x - n * c(_LN2_HI) - n * c(_LN2_LO)
    p = c(_EXP_POLY[0])
    for coef in _EXP_POLY[1:]:
        p = p * r + c(coef)
    mantissa = p * r * r + r + c(1.0)
    exponent = tirx.Cast(_vector("int32", lanes), n) + _splat(127, "int32", lanes)
    two_to_n = tirx.reinterpret(_vector(FLOAT32, lanes), tirx.shift_left(exponent, _splat(23, "int32", lanes)))
    return mantissa * two_to_n


# Cephes logf: log(x) = e ln2 + log(m), m in [sqrt(1/2), sqrt(2)), a degree-8 polynomial in m - 1
_SQRT_HALF = 0.707106781186547524
_LOG_POLY = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
             -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)
_FLT_MIN = 1.17549435e-38  # the smallest normal float32: a subnormal input is read as this


def fast_log_expr(x: object) -> object:
    """log(x) for a float32 TIR expression, as a polynomial that vectorizes: -inf at 0, NaN below, +inf at
    +inf (as libm); a subnormal input reads as the smallest normal float32 (log -87.3 instead of down to
    -103.3)."""
    from tvm import tirx
    lanes = _lanes(x)

    def c(v: float) -> object:
        return _splat(v, FLOAT32, lanes)

    def i(v: int) -> object:
        return _splat(v, "int32", lanes)
    bits = tirx.reinterpret(_vector("int32", lanes), tirx.max(x, c(_FLT_MIN)))
    exponent = tirx.Cast(_vector(FLOAT32, lanes), tirx.shift_right(bits, i(23)) - i(126))
    m = tirx.reinterpret(_vector(FLOAT32, lanes), tirx.bitwise_or(tirx.bitwise_and(bits, i(0x007FFFFF)), i(0x3F000000)))
    small = m < c(_SQRT_HALF)  # m in [0.5, 1): below sqrt(1/2) take 2m and one less in the exponent
    exponent = tirx.Select(small, exponent - c(1.0), exponent)
    m = tirx.Select(small, m + m, m) - c(1.0)
    z = m * m
    p = c(_LOG_POLY[0])
    for coef in _LOG_POLY[1:]:
        p = p * m + c(coef)
    y = p * m * z + exponent * c(_LN2_LO) - z * c(0.5)
    result = m + y + exponent * c(_LN2_HI)
    inf = c(float("inf"))
    result = tirx.Select(x == inf, inf, result)
    result = tirx.Select(x == c(0.0), -inf, result)
    return tirx.Select(x < c(0.0), c(float("nan")), result)


_POW_OVER = 88.72284  # log(FLT_MAX): above it x**y is +inf
_POW_UNDER = -103.97208  # log of the smallest subnormal: below it x**y is 0


def fast_pow_expr(x: object, y: object) -> object:
    """x**y for float32 TIR expressions, as exp(y log|x|) with the polynomials above, so that it vectorizes
    (a local response norm's x**0.75). The IEEE cases are kept: y == 0 gives 1, x == 0 gives 0 or +inf, a
    negative x gives NaN, or the sign of an odd integer y, a NaN NaN (but 1**y is 1), and results past
    float32's range +inf or 0 (0 also where libm still returns a subnormal). Relative error: a few ulp times
    |y log|x||, up to ~1e-5 near the overflow."""
    from tvm import tirx
    lanes = _lanes(x)

    def c(v: float) -> object:
        return _splat(v, FLOAT32, lanes)
    if _lanes(y) != lanes:  # a scalar exponent against a vector base
        y = tirx.Broadcast(y, lanes)
    ax = tirx.abs(x)
    t = y * fast_log_expr(ax)  # at |x| == 0, inf or NaN the selects below decide
    magnitude = tirx.Select(t > c(_POW_OVER), c(float("inf")),
                            tirx.Select(t < c(_POW_UNDER), c(0.0), fast_exp_expr(t)))
    magnitude = tirx.Select(ax == c(0.0), tirx.Select(y > c(0.0), c(0.0), c(float("inf"))), magnitude)
    integer = tirx.floor(y) == y
    odd = tirx.floor(y * c(0.5)) * c(2.0) != y
    signed = tirx.Select(tirx.all(integer, odd), -magnitude, magnitude)
    negative = tirx.Select(integer, signed, c(float("nan")))
    result = tirx.Select(x < c(0.0), negative, magnitude)
    result = tirx.Select(tirx.isnan(x), x, tirx.Select(tirx.isnan(y), y, result))  # a NaN stays NaN
    return tirx.Select(tirx.any(y == c(0.0), x == c(1.0)), c(1.0), result)  # but x**0 and 1**y are 1


def _vector(dtype: str, lanes: int) -> str:
    return f"{dtype}x{lanes}" if lanes > 1 else dtype


def _splat(value: float, dtype: str, lanes: int) -> object:
    """A constant of `dtype`, broadcast to `lanes` lanes where there is more than one."""
    from tvm import tirx
    k = tirx.const(value, dtype)
    return tirx.Broadcast(k, lanes) if lanes > 1 else k


def _lanes(expr: object) -> int:
    """The vector lanes of a float32 expression's type (1 for a scalar), or 0 if it is not float32."""
    ty = str(expr.ty)
    if ty == FLOAT32:
        return 1
    if ty.startswith(FLOAT32 + "x") and ty[len(FLOAT32) + 1:].isdigit():
        return int(ty[len(FLOAT32) + 1:])
    return 0


def _rules() -> dict[str, object]:
    """op name -> the lowering rule used while fast math is on (TVM's original rule otherwise)."""
    import tvm
    return {"exp": lambda call: fast_exp_expr(call.args[0]), "log": lambda call: fast_log_expr(call.args[0]),
            "pow": lambda call: fast_pow_expr(call.args[0], call.args[1]),
            "erf": tvm.ir.Op.get("tirx.erf").get_attr("webgpu.FLowerIntrinsic")}  # TVM's DispatchFastErf


def _register() -> None:
    """Register, once per process, LLVM lowering rules for exp, log, pow and erf that use the fast version for
    float32 while fast math is on and TVM's own rule otherwise."""
    global _registered
    if _registered:
        return
    import tvm
    from tvm.tirx.op import register_intrin_lowering
    for name, fast in _rules().items():
        op = tvm.ir.Op.get(f"tirx.{name}")
        original = op.get_attr("llvm.FLowerIntrinsic") or op.get_attr("default.FLowerIntrinsic")

        def rule(call: object, fast=fast, original=original) -> object:
            if _enabled and _lanes(call) > 0:
                return fast(call)
            return original(call)
        register_intrin_lowering(f"tirx.{name}", "llvm", f=rule, level=LEVEL)
    _registered = True


@contextlib.contextmanager
def fast_math(on: bool = True) -> Iterator[None]:
    """Within the block, `tvm.compile` for an LLVM target lowers float32 exp, log, pow and erf (and what TVM
    lowers through exp: tanh, sigmoid) to vectorizable polynomials (`on`), or to libm calls as stock TVM does."""
    global _enabled
    _register()
    before, _enabled = _enabled, bool(on)
    try:
        yield
    finally:
        _enabled = before
