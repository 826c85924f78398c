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
