"""Argument shapes and dtypes of a kernel, from MetaSchedule's ArgInfo."""
from __future__ import annotations


def arg_specs(arg_infos: object) -> list[tuple[tuple[int, ...], str]]:
    """(shape, dtype) of each MetaSchedule TensorInfo."""
    out = []
    for info in arg_infos:
        _, dtype, shape = info.as_json()
        out.append((tuple(int(x) for x in shape), str(dtype)))
    return out


def kernel_args(mod: object) -> list[tuple[tuple[int, ...], str]]:
    """(shape, dtype) of each argument of the module's `main` PrimFunc."""
    from tvm.s_tir import meta_schedule as ms
    return arg_specs(ms.arg_info.ArgInfo.from_prim_func(mod["main"]))


def index_bounds(mod: object) -> list[int | None]:
    """For each argument of the module's `main`: if it is an integer tensor whose values index another tensor
    (a gather, an embedding lookup), the exclusive upper bound that keeps every such index in range (the
    smallest extent it indexes); None for the others. The output check fills such arguments with random
    indices below it, so that a wrong schedule cannot hide behind inputs that all read index 0."""
    import tvm_ffi
    func = mod["main"]
    params = list(func.params)
    ints = [i for i, p in enumerate(params) if str(p.dtype).startswith(("int", "uint"))]
    bounds: list[int | None] = [None] * len(params)
    if not ints:
        return bounds
    for load in _loads(func.body, tvm_ffi):
        for axis, index in enumerate(load.indices):
            extent = load.source.shape[axis]
            extent = int(extent) if isinstance(extent, int) else getattr(extent, "value", None)
            if extent is None:
                continue
            for inner in _loads(index, tvm_ffi):
                for i in ints:
                    if inner.source.same_as(params[i]):
                        bounds[i] = extent if bounds[i] is None else min(bounds[i], extent)
    return bounds


def _loads(node: object, tvm_ffi: object) -> list:
    """The tensor loads under a TIR node."""
    found: list = []
    tvm_ffi.structural_walk(node, lambda n: found.append(n) if type(n).__name__ == "TensorLoad" else None)
    return found
