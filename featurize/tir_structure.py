"""Structure of a kernel's TIR: its blocks, anchor op kind, kernel class key and FLOPs.

The kernel class groups kernels whose schedules replay on each other. A MetaSchedule trace addresses
blocks by name and loops by position, so a class is fixed by: the anchor op kind (derived from the
anchor block's iteration and access pattern, not from any name), the anchor's number of spatial and
reduction axes, and the ordered list of blocks (prologue such as padding, anchor, fused epilogue), each
normalised to an op name without the numeric suffixes that TVM adds. Shapes are not part of it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

# iter_type values of tvm.tirx.IterVar
_DATA_PAR = 0
_COMM_REDUCE = 2


@dataclass(frozen=True)
class BlockInfo:
    """One TIR block: its name, normalised op, axis kinds and extents, and read buffers."""

    name: str
    op: str
    axis_kinds: str  # one letter per block axis: S spatial, R reduction, O other
    extents: tuple[int, ...]
    n_reads: int
    window_dims: int  # most dims of one read whose index mixes a spatial and a reduction axis
    min_reduce_extent: int
    reducer: str  # "sum", "max", "min", "other" or "" for non-reduction blocks

    @property
    def n_spatial(self) -> int:
        return self.axis_kinds.count("S")

    @property
    def n_reduce(self) -> int:
        return self.axis_kinds.count("R")

    @property
    def window(self) -> bool:
        """Some read index mixes a spatial and a reduction axis (a convolution or pooling window)."""
        return self.window_dims > 0

    @property
    def volume(self) -> int:
        v = 1
        for e in self.extents:
            v *= max(e, 1)
        return v


def _prim_func(mod: object) -> object:
    import tvm
    if isinstance(mod, tvm.IRModule):
        funcs = [f for _, f in mod.functions.items()]
        if len(funcs) != 1:
            raise ValueError(f"expected a module with one PrimFunc, got {len(funcs)} functions")
        return funcs[0]
    return mod


def _vars_in(expr: object) -> set[str]:
    from tvm.tirx.analysis import undefined_vars
    return {str(v.name) for v in undefined_vars(expr)}


def _normalise_name(name: str, arg_names: set[str]) -> str:
    n = re.sub(r"^T_", "", name)
    # reductions are named after their input buffer (lv88_red): drop that model-specific prefix
    for arg in sorted(arg_names, key=len, reverse=True):
        if n.startswith(arg + "_") and len(n) > len(arg) + 1:
            n = n[len(arg) + 1:]
            break
    n = re.sub(r"_intermediate$", "", n)
    n = re.sub(r"(_\d+)+$", "", n)
    n = re.sub(r"\d+$", "", n)
    return n or name


def _peel_cast(e: object) -> object:
    while type(e).__name__ == "Cast":
        e = e.value
    return e


def _is_zero(e: object) -> bool:
    return type(e).__name__ in ("FloatImm", "IntImm") and float(e.value) == 0.0


def _expr_op(value: object) -> str:
    """A name for the top-level operation of a spatial block's stored value."""
    e = _peel_cast(value)
    kind = type(e).__name__
    if kind == "Max" and (_is_zero(e.a) or _is_zero(e.b)):
        other = e.b if _is_zero(e.a) else e.a
        return "clip" if type(_peel_cast(other)).__name__ == "Min" else "relu"
    if kind == "Call":
        return str(e.op.name).split(".")[-1]
    if kind in ("BufferLoad", "TensorLoad"):
        return "copy"
    return kind.lower()


def _reducer(block: object) -> str:
    value = getattr(block.body, "value", None)
    if value is None:
        return "other"
    return {"Add": "sum", "Max": "max", "Min": "min"}.get(type(_peel_cast(value)).__name__, "other")


def block_infos(mod: object) -> list[BlockInfo]:
    """The kernel's blocks in program order (root excluded)."""
    from tvm.s_tir import Schedule
    func = _prim_func(mod)
    sch = Schedule(func)
    arg_names = {str(p.name) for p in func.params}
    infos = []
    for rv in all_blocks(sch):
        block = sch.get(rv)
        kinds, extents, spatial, reduce_ = [], [], set(), set()
        for iv in block.iter_vars:
            t = int(iv.iter_type)
            kinds.append("S" if t == _DATA_PAR else "R" if t == _COMM_REDUCE else "O")
            try:
                extents.append(int(iv.dom.extent))
            except (TypeError, ValueError):
                extents.append(-1)
            (spatial if t == _DATA_PAR else reduce_).add(str(iv.var.name))
        window_dims = 0
        for region in block.reads:
            mixed = 0
            for rng in region.region:
                used = _vars_in(rng.min)
                if used & spatial and used & reduce_:
                    mixed += 1
            window_dims = max(window_dims, mixed)
        reduce_extents = [e for k, e in zip(kinds, extents) if k == "R"]
        n_reads = len({str(r.source.name) for r in block.reads}
                      - {str(w.source.name) for w in block.writes})
        is_reduction = "R" in kinds
        name = str(block.name_hint)
        op = _normalise_name(name, arg_names)
        if not is_reduction and op in ("compute", "T"):
            op = _expr_op(block.body.value) if hasattr(block.body, "value") else op
        infos.append(BlockInfo(name=name, op=op, axis_kinds="".join(kinds), extents=tuple(extents),
                               n_reads=n_reads, window_dims=window_dims,
                               min_reduce_extent=min(reduce_extents, default=0),
                               reducer=_reducer(block) if is_reduction else ""))
    return infos


def all_blocks(sch: object) -> Iterable[object]:
    """Every block under the root, depth first in program order."""
    root = sch.get_sblock("root")
    stack = list(reversed(sch.get_child_blocks(root)))
    while stack:
        rv = stack.pop()
        yield rv
        stack.extend(reversed(sch.get_child_blocks(rv)))


def anchor_index(blocks: list[BlockInfo]) -> int:
    """Index of the anchor block: the reduction block with the most iterations, else the largest block."""
    if not blocks:
        raise ValueError("kernel has no blocks")
    reductions = [i for i, b in enumerate(blocks) if b.n_reduce > 0]
    pool = reductions or list(range(len(blocks)))
    return max(pool, key=lambda i: (blocks[i].volume, -i))


def anchor_kind(block: BlockInfo) -> str:
    """The op kind of an anchor block, from its axes and access pattern."""
    if block.n_reduce == 0:
        return "elementwise"
    if block.window:
        if block.reducer in ("max", "min") or block.n_reads == 1:
            return "pool"
        if block.reducer == "sum" and block.n_reads >= 2:
            dims = block.n_spatial - 2
            conv = "conv"
            if block.window_dims > dims:  # the input channel index mixes output channel and reduction
                conv = "depthwise_conv" if block.min_reduce_extent == 1 else "group_conv"
            return f"{conv}{dims}d"
        return "reduction"
    if block.reducer == "sum" and block.n_reads >= 2:
        batch = 1
        spatial_extents = [e for k, e in zip(block.axis_kinds, block.extents) if k == "S"]
        for e in spatial_extents[:-2]:
            batch *= max(e, 1)
        return "batch_matmul" if batch > 1 else "matmul"
    return "reduction"


def class_key(mod: object) -> str:
    """The kernel class key, e.g. ``conv2d/s4r3:pad+conv2d_nchw+subtract+divide+multiply+add+relu``."""
    blocks = block_infos(mod)
    a = blocks[anchor_index(blocks)]
    kind = anchor_kind(a)
    ops = [("@" if i == anchor_index(blocks) else "") + b.op for i, b in enumerate(blocks)]
    return f"{kind}/s{a.n_spatial}r{a.n_reduce}:" + "+".join(ops)


def class_label(key: str) -> str:
    """A short readable form of a class key: the anchor kind and the fused epilogue ops."""
    kind, _, blocks = key.partition(":")
    ops = blocks.split("+")
    anchor = next((i for i, op in enumerate(ops) if op.startswith("@")), -1)
    epilogue = ops[anchor + 1:] if anchor >= 0 else ops
    return kind.split("/", 1)[0] + "".join(">" + op for op in epilogue)


def anchor_key(key: str) -> str:
    """The class key without the fused epilogue: kind, axes, prologue and anchor blocks.

    Kernels with equal anchor keys (but other epilogues) can share the anchor block's part of a schedule
    (MetaSchedule's anchor-trace application)."""
    head, _, blocks = key.partition(":")
    ops = blocks.split("+")
    anchor = next((i for i, op in enumerate(ops) if op.startswith("@")), len(ops) - 1)
    return head + ":" + "+".join(ops[:anchor + 1])


def kernel_kind(key: str) -> str:
    """The anchor op kind part of a class key."""
    return key.split("/", 1)[0]


def kernel_flops(mod: object) -> float:
    """Estimated floating-point operations of one call of the kernel."""
    import tvm
    from tvm.s_tir.analysis import estimate_tir_flops
    func = _prim_func(mod)
    if not isinstance(mod, tvm.IRModule):
        mod = tvm.IRModule({"main": func})
    try:
        return float(estimate_tir_flops(mod))
    except Exception:  # estimation is undefined for some opaque kernels
        return 0.0
