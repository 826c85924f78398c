"""Compares of two bool tensors (as in GPT-2's causal mask) compile and compute what torch does: TVM 0.27's
LLVM codegen takes bool for a float there and fails the build without the rewrite in recommender/canonical.py.
(Its bool cumsum rewrite is checked on GPT-2 itself: the whole model compiles and its output matches torch.)"""
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


def _compile(mod, target):
    import tvm
    from tvm import relax
    vm = relax.VirtualMachine(tvm.compile(mod, target=target), tvm.cpu())
    def run(a):
        out = vm["main"](tvm.runtime.tensor(a))
        return (out if hasattr(out, "numpy") else out[0]).numpy()  # torch.export returns a tuple
    return run


def test_bool_compares_compile_and_match_torch(tmp_path, target):
    from recommender.model_import import import_model, load_relax, lower_for_tuning
    ids = torch.tensor([[3, 0, 5, 1, 6, 2, 2, 7]], dtype=torch.int64)
    path = tmp_path / "mask.pt2"
    torch.export.save(torch.export.export(MaskLike().eval(), (ids,)), str(path))
    model = import_model(str(path), target.tvm())
    got = _compile(model.mod, target.tvm())(ids.numpy())
    np.testing.assert_array_equal(got, MaskLike()(ids).numpy())
    # without the rewrite the build fails (the reason for it)
    plain = lower_for_tuning(load_relax(str(path))[0], target.tvm(), canonical=False)
    with pytest.raises(Exception, match="fcmp|kDLFloat"):  # a float compare of i1 values
        _compile(plain, target.tvm())
