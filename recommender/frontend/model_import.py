"""Model specs -> legalized, fused Relax modules.

A model spec is one of:
- ``zoo:NAME``: a zoo architecture (see ``recommender.frontend.zoo``),
- a path ending in ``.onnx``: an ONNX model,
- a path ending in ``.pt2``: a program saved with ``torch.export.save``.

An ONNX spec may bind input dims that the file leaves dynamic: ``model.onnx?x=1,3,224,224&mask=1,128``
(`with_input_shapes` writes it; the CLI's ``--input-shape x=1,3,224,224`` does), or a named (symbolic) dim
wherever it appears: ``model.onnx?seq=128``. A named dim bound in one input's shape holds in every input
that has it. A dynamic leading dim left unbound is taken as batch 1 (with a note); any other unbound dim is
an error that names it.
"""
from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field

from ..core.errors import ModelImportError


@dataclass
class ImportedModel:
    """A model as Relax sees it, before and after legalization/fusion."""

    name: str
    spec: str
    mod: object  # tvm.IRModule, legalized and fused
    input_names: list[str] = field(default_factory=list)
    input_shapes: list[tuple[int, ...]] = field(default_factory=list)
    input_dtypes: list[str] = field(default_factory=list)


def model_name_from_spec(spec: str) -> str:
    """A short, file-system-safe name for a model spec."""
    if spec.startswith("zoo:"):
        return spec[4:]
    base = os.path.splitext(os.path.basename(split_spec(spec)[0]))[0]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", base) or "model"


def parse_input_shape(text: str) -> tuple[str, list[int]]:
    """``NAME=D0,D1,...`` -> (name, dims)."""
    name, sep, dims = text.partition("=")
    try:
        shape = [int(d) for d in dims.split(",")] if dims.strip() else []
    except ValueError:
        shape = None
    if not sep or not name.strip() or shape is None or any(d < 1 for d in shape):
        raise ModelImportError(f"bad input shape {text!r}: expected NAME=D0,D1,... with positive dims, "
                               f"e.g. x=1,3,224,224")
    return name.strip(), shape


def with_input_shapes(spec: str, shapes: dict[str, list[int]]) -> str:
    """The spec with these input dims bound (see the module docstring); the spec itself when none."""
    if not shapes:
        return spec
    path, bound = split_spec(spec)
    bound.update(shapes)
    return path + "?" + "&".join(f"{n}={','.join(map(str, d))}" for n, d in bound.items())


def split_spec(spec: str) -> tuple[str, dict[str, list[int]]]:
    """(the model file or zoo name, the input shapes bound in the spec)."""
    path, _, query = spec.partition("?")
    return path, dict(parse_input_shape(part) for part in query.split("&") if part)


def load_relax(spec: str) -> tuple[object, str]:
    """Import a model spec into an un-legalized Relax IRModule. Returns (module, name)."""
    spec, shapes = split_spec(spec)
    if shapes and not spec.lower().endswith(".onnx"):
        raise ModelImportError(f"{spec}: input shapes can only be bound for ONNX models; this model's are fixed")
    if spec.startswith("zoo:"):
        return _from_zoo(spec[4:]), model_name_from_spec(spec)
    if not os.path.exists(spec):
        raise ModelImportError(f"model file not found: {spec}")
    if os.path.isdir(spec):
        raise ModelImportError(f"model spec is a directory, not a model file: {spec}")
    ext = os.path.splitext(spec)[1].lower()
    if ext == ".onnx":
        return _from_onnx(spec, shapes), model_name_from_spec(spec)
    if ext == ".pt2":
        return _from_pt2(spec), model_name_from_spec(spec)
    raise ModelImportError(
        f"unrecognised model spec {spec!r}: expected zoo:NAME, a .onnx file or a .pt2 (torch.export) file")


def import_model(spec: str, target: object, pack_weights: bool = False) -> ImportedModel:
    """Import a model spec and legalize + fuse it for `target` (ready for task extraction); with
    `pack_weights`, its kernels' weights are marked layout-free (see lower_for_tuning). Holds the machine's
    measurement lock: an export and its lowering keep both cores busy, spoiling a measurement beside them."""
    from ..measure.host_lock import exclusive
    with exclusive(f"importing {spec}"):
        mod, name = load_relax(spec)
        mod = lower_for_tuning(mod, target, spec, pack_weights=pack_weights)
    names, shapes, dtypes = main_inputs(mod)
    return ImportedModel(name=name, spec=spec, mod=mod, input_names=names,
                         input_shapes=shapes, input_dtypes=dtypes)


def lower_for_tuning(mod: object, target: object, spec: str = "model", canonical: bool = True,
                     pack_weights: bool = False) -> object:
    """Run the passes that MetaSchedule task extraction needs: matmuls in their export-independent form
    (`recommender.frontend.canonical`, unless `canonical` is False), decompose, legalize, fuse. With `pack_weights`,
    the kernels' constant operands (the weights) are marked layout-free (`layout_free_buffers`), so that
    MetaSchedule's RewriteLayout postprocessor packs them in the order a schedule reads them; the packing
    is folded into the model's constants at build (`measure.worker.pack_weights_ahead`). The kernels then
    are other workloads than unmarked ones (the bank's records apply to them by replay, not by lookup)."""
    import tvm
    from tvm import relax

    from .canonical import canonicalize_kernels
    try:
        if canonical:
            mod = canonicalize_kernels(mod)
        with target:
            seq = tvm.transform.Sequential([
                relax.transform.DecomposeOpsForInference(),
                relax.transform.CanonicalizeBindings(),
                relax.get_pipeline("zero"),
                *([relax.transform.AttachAttrLayoutFreeBuffers()] if pack_weights else []),
            ])
            return seq(mod)
    except Exception as err:  # TVM raises its own error classes with long C++ traces
        raise ModelImportError(f"{spec}: Relax lowering failed: {_first_line(err)}") from err


def main_inputs(mod: object) -> tuple[list[str], list[tuple[int, ...]], list[str]]:
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


def export_torch(model: object, args: tuple, label: str) -> object:
    import torch
    try:
        with torch.no_grad():
            return torch.export.export(model, args)
    except Exception as err:
        raise ModelImportError(f"{label}: torch.export failed: {_first_line(err)}") from err


def from_exported(ep: object, label: str) -> object:
    from tvm.relax.frontend.torch import from_exported_program
    try:
        return from_exported_program(ep, keep_params_as_input=False)
    except Exception as err:
        raise ModelImportError(f"{label}: the Relax PyTorch frontend failed: {_first_line(err)}") from err


def _from_zoo(name: str) -> object:
    from .zoo import build_zoo_model
    model, args = build_zoo_model(name)
    return from_exported(export_torch(model, args, f"zoo:{name}"), f"zoo:{name}")


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
    return from_exported(ep, path)


def load_onnx(path: str) -> object:
    """The checked ONNX model (ModelImportError if the file is not one)."""
    import onnx
    try:
        model = onnx.load(path)
        onnx.checker.check_model(model)
    except Exception as err:
        raise ModelImportError(f"{path}: not a valid ONNX model: {_first_line(err)}") from err
    return model


def onnx_input_shapes(model: object, bound: dict[str, list[int]], path: str = "model",
                      log=None) -> dict[str, list[int]]:
    """Static shapes of the ONNX graph's inputs: the file's dims, the `bound` ones, and batch 1 for a dynamic
    leading dim left unbound (noted through `log`). A key of `bound` that names no input but a symbolic dim
    (`seq=128`) binds that dim in every input that has it, and a symbolic dim bound in one input's shape holds
    in the others (`input_ids=1,128` binds `attention_mask`'s [batch, sequence] too). Raises
    ModelImportError naming what stays unbound."""
    log = log or (lambda m: print(m, file=sys.stderr))
    params = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in params]
    names = [i.name for i in inputs]
    dims_of = {i.name: [(d.dim_value if d.HasField("dim_value") else None, d.dim_param or "?")
                        for d in i.type.tensor_type.shape.dim] for i in inputs}
    symbols = sorted({label for dims in dims_of.values() for v, label in dims if v is None and label != "?"})
    unknown = sorted(set(bound) - set(names) - set(symbols))
    if unknown:
        raise ModelImportError(f"{path}: no input named {', '.join(unknown)}; its inputs are {', '.join(names)}"
                               + (f" and its named dims {', '.join(symbols)}" if symbols else ""))
    values = {}  # symbolic dim -> value, from dims bound by name and from the shapes given per input
    for name, given in bound.items():
        if name in dims_of:
            continue
        if len(given) != 1:
            raise ModelImportError(f"{path}: {name} is a named dim: bind it to one value ({name}=N), not "
                                   f"{','.join(map(str, given))}")
        values[name] = given[0]
    shapes, unbound, batch_one = {}, [], []
    for i in inputs:
        dims = dims_of[i.name]
        if i.name in bound:
            given = bound[i.name]
            clash = [k for k, (v, _) in enumerate(dims) if v is not None and k < len(given) and given[k] != v]
            if len(given) != len(dims) or clash:
                raise ModelImportError(f"{path}: input {i.name} has shape "
                                       f"[{', '.join(str(v) if v is not None else p for v, p in dims)}]; "
                                       f"{','.join(map(str, given))} does not fit it")
            shapes[i.name] = list(given)
            for (v, label), g in zip(dims, given):
                if v is None and label != "?":
                    if values.setdefault(label, g) != g:
                        raise ModelImportError(f"{path}: dim {label} bound to both {values[label]} and {g}")
    for i in inputs:
        if i.name in bound:
            continue
        shape = []
        for k, (v, label) in enumerate(dims_of[i.name]):
            if v is None and label in values:
                v = values[label]
            elif v is None and k == 0:
                batch_one.append(f"{i.name}[0] ({label})")
                v = 1
            elif v is None:
                unbound.append(f"{i.name}[{k}] ({label})")
            shape.append(v)
        shapes[i.name] = shape
    if unbound:
        example = next(i.name for i in inputs if any(u.startswith(f"{i.name}[") for u in unbound))
        raise ModelImportError(f"{path}: dynamic input dims left unbound: {', '.join(unbound)}; give every "
                               f"dynamic input's shape, e.g. --input-shape "
                               f"{example}={','.join(str(d or 1) for d in shapes[example])}"
                               + (", or a named dim's value, e.g. --input-shape "
                                  f"{unbound[0].split('(')[-1].rstrip(')')}=N" if "(?)" not in unbound[0] else ""))
    if batch_one:
        log(f"note: {path}: dynamic batch dim {', '.join(batch_one)} taken as 1 (--input-shape NAME=... to choose)")
    return shapes


def _from_onnx(path: str, bound: dict[str, list[int]] | None = None) -> object:
    from tvm.relax.frontend.onnx import from_onnx

    from .onnx_rewrite import rewrite_for_frontend
    from .onnx_static import make_static
    model = load_onnx(path)
    shapes = onnx_input_shapes(model, bound or {}, path)
    model = rewrite_for_frontend(*make_static(model, shapes))
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
        return from_onnx(model, shape_dict=shapes, keep_params_in_input=False)
    except Exception as err:
        raise ModelImportError(f"{path}: the Relax ONNX frontend failed: {_first_line(err)}") from err
