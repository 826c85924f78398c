"""Compares and bitwise ops of bool tensors (GPT-2's causal mask, a padding mask inverted with ``~``) compile and
compute what torch does: TVM 0.27's LLVM codegen takes bool for a float there and fails the build without the
rewrite in recommender/frontend/canonical.py. (Its bool cumsum rewrite is checked on GPT-2 itself: the whole model
compiles and its output matches torch.)"""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.slow  # whole-model compiles


class MaskLike(torch.nn.Module):
    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        same = (ids > 4) == (ids > 2)  # bool == bool
        differ = (ids > 1) != (ids < 5)  # bool != bool
        return torch.where(same, 1.0, -1.0) + torch.where(differ, 2.0, 0.0) + ids.float()


class PaddingMaskLike(torch.nn.Module):
    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        keep = ~(ids == 0)  # bitwise_not of bool
        later = (ids > 4) > (ids > 2)  # bool > bool
        small = (ids < 6) <= keep  # bool <= bool
        both = (keep & (ids < 6)) | (later ^ small)  # bitwise and / or / xor of bool
        return torch.where(both, ids.float(), -1.0) + torch.where(small, 0.5, 0.0)


def _compile(mod, target):
    import tvm
    from tvm import relax
    vm = relax.VirtualMachine(tvm.compile(mod, target=target), tvm.cpu())
    def run(a):
        out = vm["main"](tvm.runtime.tensor(a))
        return (out if hasattr(out, "numpy") else out[0]).numpy()  # torch.export returns a tuple
    return run


@pytest.mark.parametrize("net", [MaskLike, PaddingMaskLike])
def test_bool_ops_compile_and_match_torch(tmp_path, target, net):
    from recommender.frontend.model_import import import_model, load_relax, lower_for_tuning
    ids = torch.tensor([[3, 0, 5, 1, 6, 2, 0, 7]], dtype=torch.int64)
    path = tmp_path / "mask.pt2"
    torch.export.save(torch.export.export(net().eval(), (ids,)), str(path))
    model = import_model(str(path), target.tvm())
    got = _compile(model.mod, target.tvm())(ids.numpy())
    np.testing.assert_array_equal(got, net()(ids).numpy())
    # without the rewrite the build fails (the reason for it)
    plain = lower_for_tuning(load_relax(str(path))[0], target.tvm(), canonical=False)
    with pytest.raises(Exception, match="fcmp|kDLFloat"):  # LLVM codegen takes the i1 values for floats
        _compile(plain, target.tvm())


class GeluTanh(torch.nn.Module):
    """GPT-2's GELU (x ** 3 inside), and x ** 2 and x ** 0.5, which is not a small power and stays one."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inner = 0.7978845608 * (x + 0.044715 * torch.pow(x, 3.0))
        return 0.5 * x * (1.0 + torch.tanh(inner)) + x ** 2 + torch.abs(x) ** 0.5


def test_small_constant_powers_become_multiplies_and_keep_the_output(tmp_path, target):
    from tvm import relax

    from recommender.frontend.model_import import import_model, load_relax
    x = torch.linspace(-3, 3, 96).reshape(1, 2, 48)
    path = tmp_path / "gelu.pt2"
    torch.export.save(torch.export.export(GeluTanh().eval(), (x,)), str(path))
    exponents = []

    def powers(mod):
        exponents.clear()
        for func in mod.functions.values():
            if isinstance(func, relax.Function):
                relax.analysis.post_order_visit(func, lambda e: exponents.append(float(e.args[1].value.numpy()))
                                                if isinstance(e, relax.Call) and getattr(e.op, "name", "")
                                                == "relax.power" else None)
        return sorted(exponents)
    assert powers(load_relax(str(path))[0]) == [0.5, 2.0, 3.0]  # as exported
    from recommender.frontend.canonical import canonicalize_kernels
    assert powers(canonicalize_kernels(load_relax(str(path))[0])) == [0.5]
    model = import_model(str(path), target.tvm())
    np.testing.assert_allclose(_compile(model.mod, target.tvm())(x.numpy()), GeluTanh()(x).numpy(),
                               rtol=1e-5, atol=1e-5)
