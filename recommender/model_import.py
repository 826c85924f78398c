"""Model specs -> legalized, fused Relax modules.

A model spec is one of:
- ``zoo:NAME``: a zoo architecture (see ``recommender.zoo``),
- a path ending in ``.onnx``: an ONNX model,
- a path ending in ``.pt2``: a program saved with ``torch.export.save``.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import numpy as np

from .errors import ModelImportError


@dataclass
class ImportedModel:
    """A model as Relax sees it, before and after legalization/fusion."""

    name: str
    spec: str
    mod: object  # tvm.IRModule, legalized and fused
    input_names: list[str] = field(default_factory=list)
    input_shapes: list[tuple[int, ...]] = field(default_factory=list)
    input_dtypes: list[str] = field(default_factory=list)

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Inputs with the model's shapes and dtypes (integer inputs drawn as small token ids)."""
        rng = np.random.default_rng(seed)
        out = []
        for shape, dtype in zip(self.input_shapes, self.input_dtypes):
            if dtype.startswith("int"):
                out.append(rng.integers(0, 100, size=shape).astype(dtype))
            else:
                out.append(rng.standard_normal(size=shape).astype(dtype))
        return out


def model_name_from_spec(spec: str) -> str:
    """A short, file-system-safe name for a model spec."""
    if spec.startswith("zoo:"):
        return spec[4:]
    base = os.path.splitext(os.path.basename(spec))[0]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", base) or "model"


def load_relax(spec: str) -> tuple[object, str]:
    """Import a model spec into an un-legalized Relax IRModule. Returns (module, name)."""
    if spec.startswith("zoo:"):
        return _from_zoo(spec[4:]), model_name_from_spec(spec)
    if not os.path.exists(spec):
        raise ModelImportError(f"model file not found: {spec}")
    if os.path.isdir(spec):
        raise ModelImportError(f"model spec is a directory, not a model file: {spec}")
    ext = os.path.splitext(spec)[1].lower()
    if ext == ".onnx":
        return _from_onnx(spec), model_name_from_spec(spec)
    if ext == ".pt2":
        return _from_pt2(spec), model_name_from_spec(spec)
    raise ModelImportError(
        f"unrecognised model spec {spec!r}: expected zoo:NAME, a .onnx file or a .pt2 (torch.export) file")


def import_model(spec: str, target: object) -> ImportedModel:
    """Import a model spec and legalize + fuse it for `target` (ready for task extraction)."""
    mod, name = load_relax(spec)
    mod = lower_for_tuning(mod, target, spec)
    names, shapes, dtypes = _main_inputs(mod)
    return ImportedModel(name=name, spec=spec, mod=mod, input_names=names,
                         input_shapes=shapes, input_dtypes=dtypes)


def lower_for_tuning(mod: object, target: object, spec: str = "model") -> object:
    """Run the passes that MetaSchedule task extraction needs: decompose, legalize, fuse."""
    import tvm
    from tvm import relax
    try:
        with target:
            seq = tvm.transform.Sequential([
                relax.transform.DecomposeOpsForInference(),
                relax.transform.CanonicalizeBindings(),
                relax.get_pipeline("zero"),
            ])
            return seq(mod)
    except Exception as err:  # TVM raises its own error classes with long C++ traces
        raise ModelImportError(f"{spec}: Relax lowering failed: {_first_line(err)}") from err


def _main_inputs(mod: object) -> tuple[list[str], list[tuple[int, ...]], list[str]]:
    from tvm import relax
    func = mod["main"]
    names, shapes, dtypes = [], [], []
    for p in func.params:
        ty = p.ty
        if not isinstance(ty, relax.TensorType) or ty.shape is None:
            raise ModelImportError(f"model input {p.name} is not a tensor of static shape")
        try:
            shape = tuple(int(d) for d in ty.shape.values)
        except (TypeError, ValueError) as err:
            raise ModelImportError(f"model input {p.name} has a dynamic shape {ty.shape}") from err
        names.append(str(p.name))
        shapes.append(shape)
        dtypes.append(str(ty.dtype))
    return names, shapes, dtypes


def _first_line(err: BaseException) -> str:
    """The informative line of a (possibly multi-line, C++-traced) TVM error."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    for ln in lines:
        if re.search(r"(Error|error|not supported|Unsupported|unsupported)", ln) and not ln.startswith("File"):
            return ln[:300]
    return (lines[-1] if lines else type(err).__name__)[:300]


def _export_torch(model: object, args: tuple, label: str) -> object:
    import torch
    try:
        with torch.no_grad():
            return torch.export.export(model, args)
    except Exception as err:
        raise ModelImportError(f"{label}: torch.export failed: {_first_line(err)}") from err


def _from_exported(ep: object, label: str) -> object:
    from tvm.relax.frontend.torch import from_exported_program
    try:
        return from_exported_program(ep, keep_params_as_input=False)
    except Exception as err:
        raise ModelImportError(f"{label}: the Relax PyTorch frontend failed: {_first_line(err)}") from err


def _from_zoo(name: str) -> object:
    from .zoo import build_zoo_model
    model, args = build_zoo_model(name)
    return _from_exported(_export_torch(model, args, f"zoo:{name}"), f"zoo:{name}")


def _from_pt2(path: str) -> object:
    import logging
    import zipfile

    import torch
    if not zipfile.is_zipfile(path):
        raise ModelImportError(f"{path}: not a torch.export program (.pt2): not a zip archive")
    logging.getLogger("torch.export").setLevel(logging.ERROR)
    try:
        ep = torch.export.load(path)
    except Exception as err:
        raise ModelImportError(f"{path}: not a torch.export program (.pt2): {_first_line(err)}") from err
    return _from_exported(ep, path)


def _from_onnx(path: str) -> object:
    import onnx
    from tvm.relax.frontend.onnx import from_onnx
    try:
        model = onnx.load(path)
        onnx.checker.check_model(model)
    except Exception as err:
        raise ModelImportError(f"{path}: not a valid ONNX model: {_first_line(err)}") from err
    known = set()
    try:
        from tvm.relax.frontend.onnx.onnx_frontend import _get_convert_map
        known = set(_get_convert_map())
    except Exception:  # the private map moved; fall back to the frontend's own error
        pass
    if known:
        missing = sorted({n.op_type for n in model.graph.node if n.op_type not in known})
        if missing:
            raise ModelImportError(
                f"{path}: ONNX operator(s) not supported by the TVM Relax frontend: {', '.join(missing)}")
    try:
        return from_onnx(model, keep_params_in_input=False)
    except Exception as err:
        raise ModelImportError(f"{path}: the Relax ONNX frontend failed: {_first_line(err)}") from err
