"""schedrec's vectorized float32 exp and erf (recommender.measure.fast_math), with real TVM builds: accurate to a few
ulp, what every measured build uses by default, and much faster than libm's scalar calls."""
from __future__ import annotations

import numpy as np
import pytest

from recommender.measure.fast_math import fast_math
from recommender.measure import MeasureSettings, Measurer

pytestmark = pytest.mark.slow  # real tuning, replays or whole-model compiles: not in `make test-fast`

SHAPE = (64, 512)


def _model(op: str):
    """A Relax model of one op on a float32 SHAPE input, lowered as schedrec lowers models."""
    from tvm import relax
    from tvm.script import relax as R
    ops = {"exp": relax.op.exp, "softmax": lambda v: relax.op.nn.softmax(v, axis=-1), "sigmoid": relax.op.sigmoid,
           "tanh": relax.op.tanh, "log": relax.op.log, "gelu": relax.op.nn.gelu, "gelu_tanh": relax.op.nn.gelu_tanh, "silu": relax.op.nn.silu}
    bb = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor(SHAPE, "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(ops[op](x)))
        bb.emit_func_output(out)
    return bb.get()


def _run(mod, target, x: np.ndarray, on: bool | None) -> np.ndarray:
    import tvm
    from tvm import relax
    if on is None:  # stock TVM: no schedrec context at all
        lib = tvm.compile(mod, target=target)
    else:
        with fast_math(on):
            lib = tvm.compile(mod, target=target)
    return relax.VirtualMachine(lib, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()


@pytest.mark.parametrize("op,low,high", [("exp", -87.0, 88.0), ("softmax", -30.0, 30.0), ("sigmoid", -30.0, 30.0),
                                         ("silu", -30.0, 30.0), ("tanh", -12.0, 12.0), ("gelu", -12.0, 12.0),
                                         ("gelu_tanh", -12.0, 12.0)])
def test_fast_math_is_within_a_few_ulp_of_libm_and_off_is_stock_tvm(op, low, high, target):
    from recommender.frontend.model_import import lower_for_tuning
    tt = target.tvm()
    mod = lower_for_tuning(_model(op), tt, canonical=False)
    x = np.random.default_rng(0).uniform(low, high, SHAPE).astype("float32")
    x[0, :8] = [0.0, 1e-6, -1e-6, 1e-3, -1e-3, 0.5, -0.5, 2.0]  # near zero, where cancellation would show
    exact, fast, stock = (_run(mod, tt, x, on) for on in (False, True, None))
    np.testing.assert_array_equal(exact, stock)  # switched off, the code is stock TVM's
    assert np.isfinite(fast).all()
    assert not np.array_equal(fast, exact), "the fast rules did not apply"
    scale = np.maximum(np.abs(exact), 1.0 if op in ("gelu", "gelu_tanh", "silu", "tanh") else 1e-30)
    worst = float(np.max(np.abs(fast - exact) / scale))
    # exp, softmax, sigmoid: relative error of a few ulp (float32 ulp 1.2e-7); GELU/SiLU/tanh: absolute error
    # of the same order where the output is small (erf's and tanh's approximations near zero)
    assert worst < 2e-6, (op, worst)


def test_fast_log_is_within_a_few_ulp_of_libm_with_its_special_values(target):
    """log over float32's normal range (Mish's and softplus's log, a log-softmax's): relative error of a few ulp;
    0, a negative number and +inf give -inf, NaN and +inf as libm does; a subnormal reads as the smallest
    normal float (-87.3, where libm goes down to -103.3)."""
    from recommender.frontend.model_import import lower_for_tuning
    tt = target.tvm()
    mod = lower_for_tuning(_model("log"), tt, canonical=False)
    x = np.exp(np.random.default_rng(0).uniform(-80.0, 80.0, SHAPE)).astype("float32")
    special = [0.0, -1.0, np.inf, 1.0, 0.70710677, 0.7071068, 2.0, 1.0000001, 0.9999999]
    x[0, :len(special)] = special
    exact, fast = (_run(mod, tt, x, on) for on in (False, True))
    assert not np.array_equal(fast, exact), "the fast rule did not apply"
    np.testing.assert_array_equal(fast[0, :4], [-np.inf, np.nan, np.inf, 0.0])
    worst = float(np.max(np.abs(fast - exact)[0, 3:] / np.maximum(np.abs(exact[0, 3:]), 1e-30)))
    rest = float(np.max(np.abs(fast[1:] - exact[1:]) / np.maximum(np.abs(exact[1:]), 1.0)))
    assert worst < 2e-6 and rest < 2e-6, (worst, rest)


def test_every_measured_build_uses_it_unless_exact_math_is_asked(target):
    """The measurer builds with fast math by default (its setting travels to the build worker), and a GELU
    then runs several times faster than with libm's erf, as the same measurer times it."""
    import tvm

    from recommender.frontend.model_import import lower_for_tuning
    lowered = lower_for_tuning(_model("gelu"), target.tvm(), canonical=False)
    kernel = next(f for f in lowered.functions.values() if isinstance(f, tvm.tirx.PrimFunc))
    mod = tvm.IRModule({"main": kernel.with_attr("global_symbol", "main")})
    assert MeasureSettings().fast_math is True
    median = {}
    for on in (True, False):
        with Measurer(target.config, MeasureSettings(repeat=5, min_repeat_ms=20, fast_math=on)) as m:
            r, = m.measure([mod], reference=mod)
        assert r.ok, r.error
        median[on] = r.median
    assert median[True] * 3 < median[False], median  # 10-20x on this project's znver3 machine


def _pow_model():
    """x ** y, elementwise, on two float32 SHAPE inputs."""
    from tvm import relax
    from tvm.script import relax as R
    bb = relax.BlockBuilder()
    x, y = relax.Var("x", R.Tensor(SHAPE, "float32")), relax.Var("y", R.Tensor(SHAPE, "float32"))
    with bb.function("main", [x, y]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(relax.op.power(x, y)))
        bb.emit_func_output(out)
    return bb.get()


def test_fast_pow_is_within_a_few_ulp_of_libm_and_keeps_its_special_cases(target):
    """x ** y as exp(y log|x|) (a local response norm's x ** 0.75): relative error of a few ulp times |y log x|
    against libm's powf, and libm's results where x or y is 0, 1, negative, infinite or NaN, or the result
    leaves float32's range."""
    import tvm
    from tvm import relax

    from recommender.frontend.model_import import lower_for_tuning
    tt = target.tvm()
    mod = lower_for_tuning(_pow_model(), tt, canonical=False)
    rng = np.random.default_rng(0)
    x = np.exp(rng.uniform(-20.0, 20.0, SHAPE)).astype("float32")
    y = rng.uniform(-4.0, 4.0, SHAPE).astype("float32")
    y[1::4] = 0.75
    inf, nan = np.inf, np.nan
    cases = [(0.0, 0.75), (0.0, -0.5), (0.0, 0.0), (-2.0, 3.0), (-2.0, 2.0), (-2.0, 0.5), (inf, 0.75), (inf, -1.0),
             (-inf, 3.0), (nan, 2.0), (2.0, nan), (1.0, nan), (nan, 0.0), (10.0, 40.0), (10.0, -50.0), (3.0, 1.0)]
    x[0, :len(cases)], y[0, :len(cases)] = zip(*cases)

    def run(on: bool) -> np.ndarray:
        with fast_math(on):
            lib = tvm.compile(mod, target=tt)
        return relax.VirtualMachine(lib, tvm.cpu())["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(y)).numpy()
    exact, fast = run(False), run(True)
    assert not np.array_equal(fast, exact), "the fast rule did not apply"
    np.testing.assert_array_equal(fast[0, :len(cases)], exact[0, :len(cases)])
    rel = np.abs(fast[1:] - exact[1:]) / np.abs(exact[1:])
    bound = 2e-7 * (4.0 + np.abs(y[1:] * np.log(x[1:].astype("float64"))))  # a few ulp times |y log x|
    assert (rel <= bound).all(), float(np.max(rel / bound))
