"""ONNX files as users bring them: exported here from architectures outside the zoo, with dynamic dims.

Their kernels must fall in the classes that the torch-exported bank holds (2-D linear layers, 3-D batch
matmuls), the rewrite must not change what the model computes, and dynamic dims are bound or refused with
a message that names them."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from recommender.core.errors import ModelImportError
from recommender.frontend.kernels import extract_kernels, flop_shares
from recommender.frontend.model_import import ImportedModel, export_torch, from_exported, import_model, load_relax, lower_for_tuning, with_input_shapes

from .onnx_nets import encoder, export_onnx

SMALL = dict(d=64, heads=2, ff=128, layers=1, seq=16)


@pytest.fixture(scope="module")
def encoder_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("enc")
    model, args = encoder(**SMALL)
    return {"static": export_onnx(model, args, str(folder / "enc.onnx")),
            "dynamic": export_onnx(model, args, str(folder / "enc_dyn.onnx"), {"x0": {0: "batch", 1: "seq"}}),
            "batch": export_onnx(model, args, str(folder / "enc_batch.onnx"), {"x0": {0: "batch"}}),
            "torch": (model, args)}


def _kernels(mod, target, canonical=True):
    return extract_kernels(ImportedModel("m", "m", lower_for_tuning(mod, target.tvm(), canonical=canonical)),
                           target.tvm())


def _run(mod, target, inputs):
    import tvm
    from tvm import relax
    vm = relax.VirtualMachine(tvm.compile(mod, target=target.tvm()), tvm.cpu())
    return vm["main"](*[tvm.runtime.tensor(x) for x in inputs]).numpy()


def _onnxruntime(path, inputs):
    import onnxruntime as ort
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), inputs)})[0]


def test_onnx_encoder_matmuls_fall_in_the_torch_classes(encoder_files, target):
    """ONNX writes [1, s, d] x [d, n] and [1, h, s, d] batch matmuls; after the rewrite every matmul kernel
    has a class (and shapes) that the torch export of the same module has."""
    mod, _ = load_relax(encoder_files["static"])
    raw = {k.class_key for k in _kernels(mod, target, canonical=False) if "matmul" in k.kind}
    onnx_kernels = [k for k in _kernels(mod, target) if "matmul" in k.kind]
    model, args = encoder_files["torch"]
    torch_kernels = [k for k in _kernels(from_exported(export_torch(model, args, "t"), "t"), target)
                     if "matmul" in k.kind]
    assert any(key.startswith(("matmul/s3r1", "batch_matmul/s4r1")) for key in raw)  # what ONNX gives as is
    assert {k.class_key for k in onnx_kernels} == {k.class_key for k in torch_kernels}
    assert sorted(str(k.args) for k in onnx_kernels) == sorted(str(k.args) for k in torch_kernels)
    assert {k.class_key for k in onnx_kernels} == {"matmul/s2r1:@matmul+add", "batch_matmul/s3r1:@matmul"}


def test_the_rewrite_keeps_the_model_output(encoder_files, target):
    path = encoder_files["static"]
    mod, _ = load_relax(path)
    x = np.random.default_rng(0).standard_normal((1, SMALL["seq"], SMALL["d"])).astype("float32")
    from recommender.frontend.canonical import canonicalize_kernels
    rewritten = canonicalize_kernels(mod)
    plain, canonical = _run(mod, target, [x]), _run(rewritten, target, [x])
    np.testing.assert_allclose(canonical, plain, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(canonical, _onnxruntime(path, [x]), rtol=1e-4, atol=1e-4)


def test_dynamic_dims_are_bound_or_named(encoder_files, target, capsys):
    dyn = encoder_files["dynamic"]
    with pytest.raises(ModelImportError, match=r"unbound: x0\[1\] \(seq\)"):
        load_relax(dyn)
    with pytest.raises(ModelImportError, match="no input named y; its inputs are x0"):
        load_relax(with_input_shapes(dyn, {"y": [1, 8, 64]}))
    with pytest.raises(ModelImportError, match="does not fit"):
        load_relax(with_input_shapes(dyn, {"x0": [1, 8, 65]}))
    with pytest.raises(ModelImportError, match="only be bound for ONNX"):
        load_relax(with_input_shapes("zoo:resnet18", {"x": [1, 3, 224, 224]}))
    spec = with_input_shapes(dyn, {"x0": [1, 8, SMALL["d"]]})
    model = import_model(spec, target.tvm())
    assert model.name == "enc_dyn" and model.input_shapes == [(1, 8, SMALL["d"])]
    assert max(k.args[0][0][0] for k in extract_kernels(model, target.tvm()) if k.kind == "matmul") == 8
    # a dynamic batch dim alone is taken as 1, with a note; the shape arithmetic of the export is folded
    # (TVM's frontend refuses this file as is: a float64 attention scale)
    mod, _ = load_relax(encoder_files["batch"])
    assert "dynamic batch dim x0[0] (batch) taken as 1" in capsys.readouterr().err
    x = np.random.default_rng(1).standard_normal((1, SMALL["seq"], SMALL["d"])).astype("float32")
    np.testing.assert_allclose(_run(mod, target, [x]), _onnxruntime(encoder_files["batch"], [x]),
                               rtol=1e-4, atol=1e-4)


def test_onnx_encoder_flops_are_covered_by_the_shipped_bank(target, shipped_bank_index):
    """Issue 14's example: an encoder (d=384, 6 heads, sequence 96) exported with torch.onnx got 0% FLOP
    coverage from the bank. Every kernel holding FLOPs must now have a donor that replays on it."""
    from recommender.measure import Measurer
    from recommender.transfer.kernel import find_candidates
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = export_onnx(*encoder(layers=1), str(Path(tmp) / "enc384.onnx"))
        kernels = extract_kernels(import_model(path, target.tvm()), target.tvm())
    index = shipped_bank_index
    shares = flop_shares(kernels)
    heavy = [(k, s) for k, s in zip(kernels, shares) if s > 0.001]
    covered = 0.0
    with Measurer(target.config) as m:
        for k, s in heavy:
            found = find_candidates(k, index, m, target.tvm(), top_n=1, exclude_models=(), cap=3)
            covered += s if found.valid else 0.0
    assert covered >= 0.95, f"{100 * covered:.1f}% of FLOPs covered"


def _two_input_graph():
    """y = a + b, both inputs of dims [batch, seq, 4] (named dims, as exporters write them)."""
    from onnx import TensorProto, helper
    value = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", "seq", 4]) for n in ("a", "b", "y")]
    return helper.make_model(helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "g", value[:2],
                                               value[2:]), opset_imports=[helper.make_opsetid("", 17)])


def test_named_dims_bind_every_input_that_has_them():
    """`input_ids=1,128` must bind `attention_mask`'s [batch, sequence] too, and `seq=128` every input's seq."""
    from recommender.frontend.model_import import onnx_input_shapes
    model, notes = _two_input_graph(), []
    assert onnx_input_shapes(model, {"a": [2, 5, 4]}, log=notes.append) == {"a": [2, 5, 4], "b": [2, 5, 4]}
    assert notes == []  # the batch dim came from `a`, not the default
    assert onnx_input_shapes(model, {"seq": [7]}, log=notes.append) == {"a": [1, 7, 4], "b": [1, 7, 4]}
    assert "a[0] (batch), b[0] (batch) taken as 1" in notes[0]
    with pytest.raises(ModelImportError, match=r"unbound: a\[1\] \(seq\), b\[1\] \(seq\).*--input-shape seq=N"):
        onnx_input_shapes(model, {}, log=notes.append)
    with pytest.raises(ModelImportError, match="seq is a named dim: bind it to one value"):
        onnx_input_shapes(model, {"seq": [7, 8]})
    with pytest.raises(ModelImportError, match="dim seq bound to both 5 and 6"):
        onnx_input_shapes(model, {"a": [1, 5, 4], "b": [1, 6, 4]})
    with pytest.raises(ModelImportError, match="no input named c; its inputs are a, b and its named dims batch, seq"):
        onnx_input_shapes(model, {"c": [1]})


def test_kernels_with_data_dependent_shapes_are_left_to_tvm_and_the_rest_are_kept(tmp_path, target, capsys):
    """NonZero sizes the kernels after it by the data: they cannot be built or measured alone (MetaSchedule's
    ArgInfo refused them and `schedrec kernels` stopped with an internal error). They are named in a note and
    run TVM's default code; the static kernels are kernels as usual."""
    import torch

    from .onnx_nets import BooleanMask
    path = export_onnx(BooleanMask().eval(), (torch.randn(1, 8),), str(tmp_path / "mask.onnx"))
    kernels = extract_kernels(import_model(path, target.tvm()), target.tvm())
    assert "kernel(s) with data-dependent shapes run TVM's default code" in capsys.readouterr().err
    assert any(k.kind == "matmul" for k in kernels)
    assert all(all(isinstance(d, int) for shape, _ in k.args for d in shape) for k in kernels)


def test_a_roll_by_a_whole_period_drops_its_empty_slice_and_its_kernel_gets_a_loop_rule(tmp_path, target):
    """torch.roll by a multiple of the dim (Swin's unshifted blocks) is exported as a concat of two slices, one
    of them empty: its kernel had a loop of extent 0, which makes the scope no stage pipeline (nothing inlines)
    and MetaSchedule's postprocessor divide by zero, so it ran as plain loops. The empty part is dropped
    (recommender.frontend.canonical), and the output stays ONNX Runtime's."""
    import torch

    from recommender.rules import loop as loop_rules

    class Roll(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.roll(x * 2.0, shifts=(8, 3), dims=(2, 3)) + 1.0

    x = torch.randn(1, 4, 8, 16)
    path = export_onnx(Roll().eval(), (x,), str(tmp_path / "roll.onnx"))

    def zero_loops(mod) -> bool:
        from tvm.s_tir import Schedule

        from featurize.tir_structure import all_blocks
        sch = Schedule(mod)
        return any(int(sch.get(lp).extent) == 0 for b in all_blocks(sch) for lp in sch.get_loops(b))
    assert any(zero_loops(k.mod) for k in _kernels(load_relax(path)[0], target, canonical=False))  # as exported
    model = import_model(path, target.tvm())
    kernels = extract_kernels(model, target.tvm())
    assert not any(zero_loops(k.mod) for k in kernels)
    assert all(loop_rules.rule_schedules(k.mod) for k in kernels)
    np.testing.assert_allclose(_run(model.mod, target, [x.numpy()]), _onnxruntime(path, [x.numpy()]), rtol=1e-6)
