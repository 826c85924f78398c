"""Operators of architectures outside the zoo, from ONNX files exported in the test: recurrent layers and
opset 23's fused Attention (which TVM's frontend refuses), einsum, conv1d and transposed convs (which had no
donors in any bank) are
rewritten into matmuls and conv2ds; the model computes what ONNX Runtime computes, and the bank's
schedules replay on the kernels that hold the FLOPs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from recommender.frontend.kernels import extract_kernels, flop_shares
from recommender.frontend.model_import import import_model, load_relax
from recommender.frontend.onnx_rewrite import einsum_plan

from .onnx_nets import AudioNet, EinsumHeads, Recurrent, UpConvNet, export_onnx, peephole_lstm



def _tvm_outputs(path: str, x: np.ndarray, target) -> tuple[list[np.ndarray], str]:
    import tvm
    from tvm import relax

    from recommender.frontend.canonical import canonicalize_kernels
    mod = canonicalize_kernels(load_relax(path)[0])
    vm = relax.VirtualMachine(tvm.compile(mod, target=target.tvm()), tvm.cpu())
    out = vm["main"](tvm.runtime.tensor(x))
    return ([out.numpy()] if hasattr(out, "numpy") else [o.numpy() for o in out]), mod.script()


def _ort_outputs(path: str, x: np.ndarray) -> list[np.ndarray]:
    import onnxruntime as ort
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x0": x})


def _export(tmp_path: Path, name: str, model: nn.Module, shape: tuple) -> tuple[str, np.ndarray]:
    torch.manual_seed(0)
    x = np.random.default_rng(0).standard_normal(shape).astype("float32")
    return export_onnx(model.eval(), (torch.from_numpy(x),), str(tmp_path / f"{name}.onnx")), x


NETS = {
    "lstm_2_layers_bidirectional": lambda: (Recurrent(nn.LSTM, num_layers=2, bidirectional=True), (1, 7, 16)),
    "gru": lambda: (Recurrent(nn.GRU), (2, 5, 16)),
    "gru_bidirectional": lambda: (Recurrent(nn.GRU, bidirectional=True), (1, 4, 16)),
    "rnn_relu": lambda: (Recurrent(nn.RNN, nonlinearity="relu"), (1, 6, 16)),
    "einsum": lambda: (EinsumHeads(), (2, 3, 4, 8)),
    "conv1d": lambda: (AudioNet(), (1, 1, 1200)),
    "conv_transpose": lambda: (UpConvNet(), (1, 16, 7, 9)),
}


@pytest.mark.parametrize("name", sorted(NETS))
def test_rewritten_operators_compute_what_onnx_runtime_computes(name, tmp_path, target):
    torch.manual_seed(0)
    model, shape = NETS[name]()
    path, x = _export(tmp_path, name, model, shape)
    got, script = _tvm_outputs(path, x, target)
    want = _ort_outputs(path, x)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    if name.startswith(("lstm", "gru", "rnn", "einsum")):  # the frontend refused the first three
        assert "R.matmul(" in script and "einsum" not in script
    else:
        assert "R.nn.conv2d(" in script and "R.nn.conv1d(" not in script and "conv2d_transpose" not in script


@pytest.mark.parametrize("layout", [0, 1])
def test_lstm_with_peepholes_reverse_and_either_layout(layout, tmp_path, target):
    path0 = str(tmp_path / "lstm0.onnx")
    shape0 = peephole_lstm(path0, 0)
    path = path0 if layout == 0 else str(tmp_path / "lstm1.onnx")
    shape = shape0 if layout == 0 else peephole_lstm(path, 1)
    x = np.random.default_rng(1).standard_normal(shape).astype("float32")
    got, _ = _tvm_outputs(path, x, target)
    if layout == 0:
        want = _ort_outputs(path0, x)
    else:  # ONNX Runtime runs no batch-first LSTM: the layout-0 node on the transposed input
        y, yh, yc = _ort_outputs(path0, x.transpose(1, 0, 2))
        want = [y.transpose(2, 0, 1, 3), yh.transpose(1, 0, 2), yc.transpose(1, 0, 2)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_einsum_plans():
    # batch over h, rows b and s, contracted d: [h, b*s, d] x [h, d, e]
    (pa, fa), (pb, fb), full, po = einsum_plan("bhsd,hde->bhse", [[2, 3, 4, 8], [3, 8, 5]])
    assert (pa, fa, pb, fb, full, po) == ([1, 0, 2, 3], [3, 8, 8], [0, 1, 2], [3, 8, 5], [3, 2, 4, 5], [1, 0, 2, 3])
    assert einsum_plan("ij,jk->ik", [[2, 3], [3, 4]])[0] == ([0, 1], [2, 3])  # a plain 2-D matmul
    for eq, shapes in [("ii,ij->ij", [[2, 2], [2, 3]]),  # a repeated index
                       ("...ij,jk->...ik", [[2, 2, 3], [3, 4]]),  # an ellipsis
                       ("ij,kl->ijkl", [[2, 3], [4, 5]]),  # an outer product: nothing contracted
                       ("ij,jk->k", [[2, 3], [3, 4]]),  # i summed in one operand only
                       ("ij,jk->ik", [[2, 3], [4, 4]]),  # sizes that disagree
                       ("ij,jk,kl->il", [[2, 3], [3, 4], [4, 5]])]:  # three operands
        assert einsum_plan(eq, shapes) is None, eq


def test_conv1d_keeps_bias_and_activation_in_the_conv_kernel(tmp_path, target):
    path, _ = _export(tmp_path, "audio", AudioNet(), (1, 1, 1200))
    kernels = extract_kernels(import_model(path, target.tvm()), target.tvm())
    convs = [k for k in kernels if "conv" in k.kind]
    assert sorted(k.kind for k in convs) == ["conv2d", "conv2d", "depthwise_conv2d"]  # the last has groups
    assert all(k.class_key.endswith("+add+relu") for k in convs), [k.class_key for k in convs]


@pytest.mark.slow
def test_bank_schedules_replay_on_the_rewritten_kernels(tmp_path, target, shipped_bank_index):
    """The shipped bank has no conv1d, LSTM or transposed conv; after the rewrites, 95% of each model's FLOPs
    sit in kernels where a donor's schedule replays (in the measurer's workers; nothing timed)."""
    from recommender.measure import Measurer
    from recommender.transfer.kernel import find_candidates
    index = shipped_bank_index
    models = {"audio": (AudioNet(), (1, 1, 4000)), "lstm": (Recurrent(nn.LSTM, num_layers=2), (1, 16, 16)),
              "upconv": (UpConvNet(), (1, 16, 28, 28))}
    with Measurer(target.config) as m:
        for name, (model, shape) in models.items():
            path, _ = _export(tmp_path, name, model, shape)
            kernels = extract_kernels(import_model(path, target.tvm()), target.tvm())
            covered = 0.0
            for k, share in zip(kernels, flop_shares(kernels)):
                if share > 0.001 and find_candidates(k, index, m, target.tvm(), top_n=1, exclude_models=(),
                                                     cap=3).valid:
                    covered += share
            assert covered >= 0.95, f"{name}: {100 * covered:.1f}% of FLOPs covered"


def _opset23_graph(path: str, op: str, inputs: dict[str, tuple[tuple[int, ...], int]], out_shape: list,
                   consts: dict[str, np.ndarray] | None = None, **attrs: object) -> None:
    """One `op` node of opset 23 over graph inputs {name: (shape, ONNX element type)} and constant inputs."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    names = list(inputs) + list(consts or {})
    graph = helper.make_graph(
        [helper.make_node(op, names, ["y"], **attrs)], "g",
        [helper.make_tensor_value_info(n, t, list(s)) for n, (s, t) in inputs.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
        [numpy_helper.from_array(v, n) for n, v in (consts or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def _compare_with_onnxruntime(path: str, feeds: dict[str, np.ndarray], target) -> str:
    """Run the file by TVM (after schedrec's import) and by ONNX Runtime; returns the imported Relax script."""
    import onnxruntime as ort
    import tvm
    from tvm import relax
    model = import_model(path, target.tvm())
    out = relax.VirtualMachine(tvm.compile(model.mod, target=target.tvm()), tvm.cpu())["main"](
        *[tvm.runtime.tensor(x) for x in feeds.values()])
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5)
    return model.mod.script()


ATTENTION_CASES = {
    # 4-D [batch, heads, seq, head size], causal, the default scale
    "4d_causal": dict(q=(1, 4, 12, 16), kv=(1, 4, 12, 16), v=16, attrs={"is_causal": 1}),
    # 3-D [batch, seq, heads * head size], two query heads per key/value head, a bool mask, a scale
    "3d_grouped_bool_mask": dict(q=(2, 10, 64), kv=(2, 14, 32), v=24, mask=("bool", (2, 1, 10, 14)),
                                 attrs={"q_num_heads": 4, "kv_num_heads": 2, "scale": 0.3}),
    # 4-D with an additive float mask broadcast over heads, and causal on top
    "4d_float_mask_causal": dict(q=(1, 2, 8, 8), kv=(1, 2, 8, 8), v=8, mask=("float", (8, 8)),
                                 attrs={"is_causal": 1}),
}


@pytest.mark.parametrize("case", sorted(ATTENTION_CASES))
def test_opset23_attention_is_rewritten_and_computes_what_onnx_runtime_computes(case, tmp_path, target):
    """torch.onnx writes scaled_dot_product_attention as one Attention node at opset 23 and later; TVM's
    frontend fails on it ('num_heads'). Rewritten into matmuls and a softmax, it computes what ONNX Runtime's
    Attention computes: heads split from 3-D inputs, grouped key/value heads, bool and float masks, causal."""
    from onnx import TensorProto
    c = ATTENTION_CASES[case]
    rng = np.random.default_rng(0)
    q, kv = c["q"], c["kv"]
    v = (*kv[:-1], c["v"] * (c["attrs"].get("kv_num_heads", 1) if len(kv) == 3 else 1))
    feeds = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in (("q", q), ("k", kv), ("v", v))}
    types = {"q": TensorProto.FLOAT, "k": TensorProto.FLOAT, "v": TensorProto.FLOAT}
    if "mask" in c:
        kind, shape = c["mask"]
        feeds["mask"] = (rng.random(shape) > 0.3 if kind == "bool" else rng.standard_normal(shape)).astype(
            np.bool_ if kind == "bool" else np.float32)
        types["mask"] = TensorProto.BOOL if kind == "bool" else TensorProto.FLOAT
    heads = c["attrs"].get("q_num_heads")
    out_shape = [q[0], q[1], heads * c["v"]] if len(q) == 3 else [*q[:3], c["v"]]
    path = str(tmp_path / f"{case}.onnx")
    _opset23_graph(path, "Attention", {n: (feeds[n].shape, types[n]) for n in feeds}, out_shape, **c["attrs"])
    script = _compare_with_onnxruntime(path, feeds, target)
    assert "matmul" in script and "softmax" in script


@pytest.mark.parametrize("axis", [-1, 1])
def test_opset23_rms_normalization_imports_and_computes_what_onnx_runtime_computes(axis, tmp_path, target):
    """The other op torch.onnx writes at opset 23 for a transformer block: TVM's frontend maps it itself."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 6, 32)).astype(np.float32)
    scale = rng.standard_normal((6, 32) if axis == 1 else (32,)).astype(np.float32)
    path = str(tmp_path / "rms.onnx")
    from onnx import TensorProto
    _opset23_graph(path, "RMSNormalization", {"x": (x.shape, TensorProto.FLOAT)}, list(x.shape),
                   consts={"scale": scale}, axis=axis, epsilon=1e-3)
    _compare_with_onnxruntime(path, {"x": x}, target)


@pytest.mark.slow
def test_a_torch_opset23_export_with_fused_attention_imports_and_has_donors(tmp_path, target, shipped_bank_index):
    """A pre-norm causal attention block (nn.RMSNorm, scaled_dot_product_attention) exported by torch.onnx at
    opset 23: one RMSNormalization and one Attention node (rewritten); it computes what ONNX Runtime
    computes and its matmuls have bank donors."""
    import onnx
    from recommender.core.rows import ANCHOR, CLASS

    from .onnx_nets import CausalAttentionBlock
    model, x = CausalAttentionBlock().eval(), torch.randn(1, 16, 64)
    path = str(tmp_path / "attention23.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (x,), path, dynamo=True, opset_version=23, input_names=["x0"])
    assert {"Attention", "RMSNormalization"} <= {n.op_type for n in onnx.load(path).graph.node}
    _compare_with_onnxruntime(path, {"x0": x.numpy()}, target)
    kernels = extract_kernels(import_model(path, target.tvm()), target.tvm())
    covered = sum(s for k, s in zip(kernels, flop_shares(kernels))
                  if shipped_bank_index.sources_for(k, top_n=1, match=CLASS)
                  or shipped_bank_index.sources_for(k, top_n=1, match=ANCHOR))
    assert covered >= 0.95, f"{100 * covered:.1f}% of FLOPs have a donor"
