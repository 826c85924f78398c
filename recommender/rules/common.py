"""Helpers the rule families share: block lookup, loop extents, one schedule per tile, and the parallel and
vector loops every rule's epilogue gets."""
from __future__ import annotations

from typing import Callable

from ..core.tvm_setup import new_schedule


def extent(sch: object, loop: object) -> int:
    """The loop's extent (0 if symbolic)."""
    extent = sch.get(loop).extent
    return int(extent.value) if hasattr(extent, "value") else 0


def only_root_block(sch: object, prefix: str) -> object | None:
    """The one block at the root whose name starts with `prefix`, None where there is none or more than one."""
    blocks = [b for b in sch.get_child_blocks(sch.get_sblock("root")) if sch.get(b).name_hint.startswith(prefix)]
    return blocks[0] if len(blocks) == 1 else None


def block_extents(mod: object, find) -> list[int] | None:
    """The loop extents of the block `find(sch)` returns (None where it finds none, or a loop has no constant
    extent)."""
    from tvm.s_tir import Schedule
    sch = Schedule(mod)
    block = find(sch)
    if block is None:
        return None
    extents = [extent(sch, lp) for lp in sch.get_loops(block)]
    return None if 0 in extents else extents


def tiled(mod: object, tiles: list, apply: Callable[[object, object], None]) -> list[tuple[object, object]]:
    """(tile, schedule) for each tile, `apply(sch, tile)` writing it into a schedule of `mod`; a tile a
    primitive refuses is left out."""
    out = []
    for tile in tiles:
        sch = new_schedule(mod)
        try:
            apply(sch, tile)
        except Exception:  # a primitive refused this kernel (an epilogue that does not inline, say)
            continue
        out.append((tile, sch))
    return out


def vectorize_innermost(sch: object, block: object) -> None:
    """Vectorize the block's innermost loop where it is longer than 1 and not vectorized yet."""
    loops = sch.get_loops(block)
    if loops and extent(sch, loops[-1]) > 1 and sch.get(loops[-1]).kind != 2:  # 2: ForKind.VECTORIZED
        sch.vectorize(loops[-1])


def parallel_root(sch: object, block: object) -> None:
    """Fuse the block's loops but the innermost into one parallel loop; vectorize the innermost (256 or
    shorter)."""
    loops = sch.get_loops(block)
    if len(loops) < 2:
        return
    sch.parallel(sch.fuse(*loops[:-1]))
    if extent(sch, loops[-1]) <= 256:
        sch.vectorize(loops[-1])


def sampled_split(sch: object, loop: object, inner: int, max_inner: int = 16) -> list:
    """Split `loop` into (outer, `inner`) with the factors drawn by a SamplePerfectTile instruction whose
    decision is that split, so that the schedule's trace carries the choice as a knob: the same trace with
    another decision is another instance, and MetaSchedule's tile mutator can change it. `inner` divides the
    loop's extent."""
    n = extent(sch, loop)
    if n <= 0 or n % inner:
        raise ValueError(f"a tile of {inner} does not divide a loop of {n}")
    factors = sch.sample_perfect_tile(loop, n=2, max_innermost_factor=max(max_inner, inner), decision=[n // inner, inner])
    return sch.split(loop, factors)
