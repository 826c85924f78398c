"""Architectures outside the zoo, exported to ONNX in the test (tests/onnx_arch.py): shifted-window
attention, channel shuffle, SPPF and nearest upsampling, RMS norms over token ids, causal masks and a tied LM
head, instance norms with reflection padding, fire modules, conformer blocks, depth-to-space, group norms around
fused attention, dilated convs with bilinear resizes, a local response norm that torch traces into an If, a
segmentation head upsampled bilinearly; and
Hugging Face models built from small configs (T5's encoder, Swin, wav2vec 2.0, DeBERTa-v2). Each must import with a dynamic batch dim,
compute what ONNX Runtime computes, and have a bank donor (same class or same anchor) for at least 95% of its
FLOPs, so that transfer schedules it instead of leaving plain loops."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from recommender.frontend.kernels import extract_kernels, flop_shares
from recommender.frontend.model_import import import_model, load_onnx, onnx_input_shapes
from recommender.frontend.onnx_static import make_static

from .onnx_arch import ARCHITECTURES, HF_ARCHITECTURES, SEGMENTATION_ARCHITECTURES, VIDEO_ARCHITECTURES, shufflenet
from .onnx_nets import export_onnx



def _export(name: str, folder: Path, opset: int | None = None, dynamo: bool = False) -> tuple[str, list[np.ndarray]]:
    """Export an architecture with a dynamic batch dim: by the TorchScript exporter (at `opset`, else its
    default) or, with `dynamo`, by torch.onnx's default exporter since torch 2.9 (torch.export, opset 20)."""
    import torch
    model, args = {**ARCHITECTURES, **HF_ARCHITECTURES, **VIDEO_ARCHITECTURES, **SEGMENTATION_ARCHITECTURES}[name]()
    path = str(folder / f"{name}.onnx")
    if dynamo:
        batch = torch.export.Dim("batch")
        with torch.no_grad():
            torch.onnx.export(model, args, path, dynamo=True, input_names=[f"x{i}" for i in range(len(args))],
                              dynamic_shapes=tuple([{0: batch}] + [None] * (len(args) - 1)))
    elif opset is None:
        export_onnx(model, args, path, {"x0": {0: "batch"}})
    else:
        with torch.no_grad():
            torch.onnx.export(model, args, path, dynamo=False, input_names=["x0"], opset_version=opset,
                              dynamic_axes={"x0": {0: "batch"}})
    return path, [a.numpy() for a in args]


def _assert_computes_as_onnxruntime(model, path: str, inputs: list[np.ndarray], target) -> None:
    import onnxruntime as ort
    import tvm
    from tvm import relax
    vm = relax.VirtualMachine(tvm.compile(model.mod, target=target.tvm()), tvm.cpu())
    out = vm["main"](*[tvm.runtime.tensor(x) for x in inputs])
    out = (out if hasattr(out, "numpy") else out[0]).numpy()
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ref = sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), inputs)})[0]
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * float(np.abs(ref).max()), err_msg=path)


def _donor_share(model, target, index) -> float:
    """The share of the model's FLOPs in kernels with a bank donor of the same class or the same anchor."""
    from recommender.core.rows import ANCHOR, CLASS
    kernels = extract_kernels(model, target.tvm())
    return sum(s for k, s in zip(kernels, flop_shares(kernels))
               if index.sources_for(k, top_n=1, match=CLASS) or index.sources_for(k, top_n=1, match=ANCHOR))


def test_shape_arithmetic_behind_a_channel_split_folds_away(tmp_path):
    """ShuffleNet's shuffle reshapes to dims computed from the shape of a concatenation of a slice, whose
    bounds are themselves computed from a shape: one round of shape inference cannot see it, and TVM's
    frontend refused the reshape (`shape_of expects a tensor input`). Rounds of folding leave no Shape node."""
    model, args = shufflenet()
    path = export_onnx(model, args, str(tmp_path / "shuffle.onnx"), {"x0": {0: "batch"}})
    onnx_model = load_onnx(path)
    assert any(n.op_type == "Shape" for n in onnx_model.graph.node)
    folded, static = make_static(onnx_model, onnx_input_shapes(onnx_model, {}, path, log=lambda m: None))
    assert not [n.name for n in folded.graph.node if n.op_type in ("Shape", "Gather", "Unsqueeze")]
    assert static["x0"] == [1, 3, 64, 64]
    reshapes = {n.input[1] for n in folded.graph.node if n.op_type == "Reshape"}
    consts = {t.name for t in folded.graph.initializer}
    assert reshapes and reshapes <= consts


def test_shape_arithmetic_of_a_deep_net_folds_away_however_many_rounds_it_takes(tmp_path):
    """Each round of folding makes known the shapes one more unit further on need: torchvision's
    ShuffleNetV2 (16 units) and Swin-T took 15 and 18 rounds, and a cap of 8 left Shape nodes that TVM's
    frontend refused. Folding runs until nothing more folds."""
    model, args = shufflenet(ch=8, image=32, units=16)
    path = export_onnx(model, args, str(tmp_path / "deep_shuffle.onnx"), {"x0": {0: "batch"}})
    onnx_model = load_onnx(path)
    folded, _ = make_static(onnx_model, onnx_input_shapes(onnx_model, {}, path, log=lambda m: None))
    assert not [n.name for n in folded.graph.node if n.op_type == "Shape"]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ARCHITECTURES) + sorted(HF_ARCHITECTURES))
def test_an_unseen_architecture_imports_computes_as_onnxruntime_and_has_donors(name, target, tmp_path,
                                                                             shipped_bank_index):
    path, inputs = _export(name, tmp_path)
    model = import_model(path, target.tvm())
    assert model.input_shapes[0][0] == 1  # the dynamic batch dim, taken as 1
    _assert_computes_as_onnxruntime(model, path, inputs, target)
    covered = _donor_share(model, target, shipped_bank_index)
    assert covered >= 0.95, f"{name}: {covered:.1%} of FLOPs have a donor"


@pytest.mark.slow
def test_a_video_models_conv3ds_import_compute_as_onnxruntime_and_get_the_conv_rule(target, tmp_path):
    """A video model (conv3d, batch norm folded or not, residual adds) imports with its dynamic batch dim and
    computes what ONNX Runtime computes; its conv3d kernels, which a bank without a video model has no donor for,
    each get the conv rule's register tiles (class conv3d/, recommender.rules.tile_rule_for) and hold nearly all of its FLOPs."""
    from recommender.rules.conv import conv_output
    from recommender.transfer.replay import tile_rule_schedules
    from recommender.rules import tile_rule_for
    path, inputs = _export("r3d", tmp_path)
    model = import_model(path, target.tvm())
    _assert_computes_as_onnxruntime(model, path, inputs, target)
    kernels = extract_kernels(model, target.tvm())
    convs = [(k, s) for k, s in zip(kernels, flop_shares(kernels)) if k.class_key.startswith("conv3d/")]
    assert tile_rule_for("conv3d/").name == "conv" and sum(s for _, s in convs) > 0.95
    assert all(conv_output(k.mod) and tile_rule_schedules(k.mod, target.tvm()) for k, _ in convs), \
        [k.name for k, _ in convs if not conv_output(k.mod)]


@pytest.mark.slow
def test_a_segmentation_heads_resizes_take_donors_from_a_bank_with_a_segmentation_model(target, tmp_path,
                                                                                       shipped_bank_index):
    """lraspp's bilinear upsampling to the input holds a quarter of its FLOPs. The shipped znver3 bank has no
    model with a resize, so they have no donor there (below 95% of FLOPs); llvm-znver5-2c's bank has zoo:fcn8s,
    whose tuned resize (exported by torch.export) replays onto the ONNX resizes and computes what they compute."""
    from recommender.transfer.candidates import BankIndex
    from recommender.measure import MeasureSettings, Measurer
    from recommender.transfer.replay import replay_trace
    from recommender.core.rows import CLASS
    path, inputs = _export("lraspp", tmp_path)
    model = import_model(path, target.tvm())
    _assert_computes_as_onnxruntime(model, path, inputs, target)
    znver5 = BankIndex(Path(__file__).resolve().parents[1] / "models" / "llvm-znver5-2c" / "bank")
    assert _donor_share(model, target, shipped_bank_index) < 0.95 <= _donor_share(model, target, znver5)
    resizes = [k for k in extract_kernels(model, target.tvm()) if k.class_key.endswith("@resize")]
    assert len(resizes) == 2
    with Measurer(target.config, MeasureSettings(repeat=1, min_repeat_ms=0)) as m:
        for k in resizes:
            src = znver5.sources_for(k, top_n=1, match=CLASS)[0]
            assert src.model == "fcn8s"
            (res,) = m.measure([replay_trace(src.trace_json, src.source_mod, k.mod, target.tvm()).mod], reference=k.mod)
            assert res.status == "ok", (k.name, res.error)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt", "yolo", "conformer", "espcn", "activations"])
def test_torch_default_exporter_models_import_and_have_donors(name, target, tmp_path, shipped_bank_index):
    """torch.onnx.export's default since torch 2.9 goes through torch.export and writes opset 20: Gelu and
    LayerNormalization as single ops, a symbolic batch dim named by torch.export.Dim. What users export today
    must import, compute as ONNX Runtime does and find donors as the TorchScript exporter's files do."""
    import onnx
    path, inputs = _export(name, tmp_path, dynamo=True)
    assert max(o.version for o in onnx.load(path).opset_import if o.domain in ("", "ai.onnx")) >= 18
    model = import_model(path, target.tvm())
    assert model.input_shapes[0][0] == 1
    _assert_computes_as_onnxruntime(model, path, inputs, target)
    covered = _donor_share(model, target, shipped_bank_index)
    assert covered >= 0.95, f"{name}: {covered:.1%} of FLOPs have a donor"


@pytest.mark.slow
@pytest.mark.parametrize("opset", [11, 13])
def test_older_opsets_import_as_the_current_one(opset, target, tmp_path):
    """Exporters of older opsets write Split, Squeeze, Resize and Clip in their older forms; the models that
    torch can export at that opset compute what ONNX Runtime computes."""
    for name in ("shufflenet", "yolo", "swin"):
        path, inputs = _export(name, tmp_path, opset)
        _assert_computes_as_onnxruntime(import_model(path, target.tvm()), path, inputs, target)
