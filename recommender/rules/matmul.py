"""Rule-built schedules for matmuls whose right operand is row-major [.., K, N]: a register tile of rows x
vectors of columns.

A transformer's dense layers (`matmul/s2r1`, X[M, K] by W[K, N]) and attention products
(`batch_matmul/s3r1`) reach about 40% of the FMA peak with the schedules their 64-trial search found.
The rule writes the micro-kernel directly: for every k, `tm` values of X are broadcast and multiplied
into `tm x nv` accumulators of one vector of W's row k each, so the accumulators stay in registers over
the whole reduction and W is read as contiguous vectors (no packing). The loop over column tiles is
outside the loop over row tiles, so that one column panel of W (K x tn floats) stays in the L2 cache while
every row tile passes over it; both are fused into one parallel loop. The epilogue (bias add, GELU, a
residual add) is computed per tile while it is in cache.

Where K is deep, the reduction is cut into blocks of W's panel (K_BLOCKS), each passed over by every row
tile before the next, the accumulators then stored and reloaded between blocks. A packed tile first copies
the panel (or its block) into a buffer of its own, rows of tn floats back to back: in W, a panel's rows lie
N floats apart, and where N * 4 bytes is a multiple of 4 KiB (3072 columns: 12 KiB) they all fall into the
same few cache sets, so the panel does not stay in cache however small it is. The tile follows the
target's vector registers (`target.float32_lanes`): with AVX2's 16 registers of 8 floats, up to 12
accumulators; with AVX-512's 32 registers of 16 floats, up to 24. It applies to a
matmul block whose iterators are batch spatial loops, then M, N and one reduction, reading its right
operand at [.., k, n]; `rule_schedules` gives one schedule per tile that fits, or none. Like every
candidate, each is checked against the unscheduled kernel and measured.
"""
from __future__ import annotations

import random
from dataclasses import replace

from .base import RuleInstance, ScheduleRule
from .common import block_extents, extent, only_root_block, parallel_root, sampled_split, tiled, vectorize_innermost

# (rows, vectors of columns) of the register tile, preferred first, by float32 lanes of the target's vectors
TILE_SHAPES = {8: ((6, 2), (4, 3), (8, 1), (4, 2), (2, 2), (1, 2)),
               16: ((6, 4), (8, 3), (4, 4), (4, 2), (2, 2), (1, 2), (8, 1))}
# rows of W's column panel per block of the reduction (0: the whole of K). Unblocked, a 3072-deep panel walks
# 3072 rows of W, a page apart, per row tile: 88 GFLOP/s on distilbert's 128x3072x768 matmul against 240
# with blocks of 256 (the same tile, llvm-rocketlake-2c, benchmarks/results/<key>/matmul_rules.md)
K_BLOCKS = (0, 128, 256)
# packed panels: 5.4 against 11.4 ms (112 against 53 GFLOP/s) on distilbert's 128x768x3072 matmul, the same
# 4x3 tile unblocked; 1.16 against 1.33 ms on 128x768x768 (llvm-znver3-2c, FMA peak 197, out-of-tree probe run
# with the rest of the machine idle, the median of 3 interleaved rounds)
# a row count with no divisor among the tiles' but 1 or 2 (ViT's 197 tokens) gets tiles of MIN_ROWS rows or
# more whose last row tile is cut short (a guard per row, not per lane), where the rows added to fill it are at
# most MAX_RAGGED_ROWS of M: 184-204 GFLOP/s on ViT-B/16's 197x3072x768 matmul against 26 with 1-row tiles
# (llvm-znver4-2c, FMA peak 229)
MIN_ROWS = 4
MAX_RAGGED_ROWS = 0.05
# a column count that no tile's vectors divide (ViT's 197 tokens as the N of Q by K-transposed) gets packed tiles
# over columns padded with zeros to a multiple of the tile's (TIR's pad_einsum: W's panel copied with zeros past
# N, the output cropped), where the columns added are at most MAX_PADDED_COLUMNS of N
MAX_PADDED_COLUMNS = 0.10
# the template's space (MatmulRule.space): row and vector counts of the register tile, accumulator vectors that fit
# the vector registers beside one vector of W and the broadcast X value (AVX2: 16 registers, AVX-512: 32), and the
# K blocks a reduction may be cut into
SPACE_ROWS = (1, 2, 3, 4, 5, 6, 7, 8, 12, 16)
SPACE_VECTORS = (1, 2, 3, 4)
ACCUMULATORS = {8: 12, 16: 24}
SPACE_K_BLOCKS = (0, 64, 128, 256, 512)


TILE_KNOBS = ("rows", "vectors", "lanes", "k_block", "packed")  # a tile's knob names, in its tuple's order


def k_blocks(depth: int) -> list[int]:
    """The K_BLOCKS a reduction of `depth` can be cut into: 0 (unblocked), and each that divides it and is shorter."""
    return [kb for kb in K_BLOCKS if kb == 0 or (depth > kb and depth % kb == 0)]


def matmul_tiles(rows: int, columns: int, depth: int, lanes: int = 8) -> list[tuple[int, int, int, int, bool]]:
    """Register tiles (rows, vectors, lanes, K block, packed) for an M x N output of a K-deep reduction on a
    target with `lanes` float32 lanes: the first shape whose rows divide M and whose vectors of `lanes` columns
    divide N, with each K block of K_BLOCKS that divides K (and is shorter), W read in place and then packed,
    and the second shape with blocks of 128, read in place. Where only 1- or 2-row shapes divide M, the shapes
    of MIN_ROWS rows or more whose last row tile is short by at most MAX_RAGGED_ROWS of M instead. Where no
    shape's vectors divide N, the shapes whose padded columns add at most MAX_PADDED_COLUMNS of N, packed only."""
    if lanes not in TILE_SHAPES:
        raise ValueError(f"matmul tiles are defined for 8 or 16 float32 lanes, not {lanes}")
    fits = [(tm, nv) for tm, nv in TILE_SHAPES[lanes] if columns % (nv * lanes) == 0]
    padded = not fits
    if padded:
        fits = [(tm, nv) for tm, nv in TILE_SHAPES[lanes]
                if _round_up(columns, nv * lanes) <= columns * (1 + MAX_PADDED_COLUMNS)]
    shapes = [(tm, nv) for tm, nv in fits if rows % tm == 0]
    if not shapes or shapes[0][0] < MIN_ROWS:
        ragged = [(tm, nv) for tm, nv in fits if tm >= MIN_ROWS and _round_up(rows, tm) <= rows * (1 + MAX_RAGGED_ROWS)]
        shapes = ragged or shapes
    blocks = k_blocks(depth)
    out = [(*shapes[0], lanes, kb, packed) for packed in ((True,) if padded else (False, True)) for kb in blocks] \
        if shapes else []
    if len(shapes) > 1:
        out.append((*shapes[1], lanes, 128 if 128 in blocks else 0, padded))
    return out or _small_tiles(rows, columns, lanes)


def space_tiles(rows: int, columns: int, depth: int, lanes: int = 8) -> list[tuple[int, int, int, int, bool]]:
    """Every register tile (rows, vectors, lanes, K block, packed) of the matmul template for an M x N output of a
    K-deep reduction: SPACE_ROWS that divide M (or, of MIN_ROWS or more, leave a last row tile short by at most
    MAX_RAGGED_ROWS of M), SPACE_VECTORS whose columns divide N (or, packed only, pad at most MAX_PADDED_COLUMNS
    of N), no more accumulator vectors than ACCUMULATORS[lanes], each K block of SPACE_K_BLOCKS that divides K
    (and is shorter), W read in place or packed. `matmul_tiles` picks a few of these by hand."""
    if lanes not in ACCUMULATORS:
        raise ValueError(f"matmul tiles are defined for 8 or 16 float32 lanes, not {lanes}")
    tile_rows = [tm for tm in SPACE_ROWS if rows % tm == 0
                 or (tm >= MIN_ROWS and _round_up(rows, tm) <= rows * (1 + MAX_RAGGED_ROWS))]
    vectors = [(nv, bool(columns % (nv * lanes))) for nv in SPACE_VECTORS
               if _round_up(columns, nv * lanes) <= columns * (1 + MAX_PADDED_COLUMNS)]
    blocks = [kb for kb in SPACE_K_BLOCKS if kb == 0 or (depth > kb and depth % kb == 0)]
    return [(tm, nv, lanes, kb, packed) for tm in tile_rows for nv, padded in vectors if tm * nv <= ACCUMULATORS[lanes]
            for kb in blocks for packed in ((True,) if padded else (False, True))]


def _small_tiles(rows: int, columns: int, lanes: int) -> list[tuple[int, int, int, int, bool]]:
    """Where no tile fits within the limits above (a window attention's 49 x 49 products: neither 49 rows nor
    49 columns fit, and TVM's default ran them as plain loops), the shapes of MIN_ROWS rows or more (or whose
    rows divide M) that pad
    the fewest columns, packed, the last row tile cut short however much: two of them, the most accumulators
    first and the fewest vectors second, unblocked. They are measured beside everything else, so a slower
    one costs its measurement only. swin's 192 x 49x32x49 product (unseen_onnx, llvm-znver5-2c): 0.109 ms
    against 0.372 for TVM's default."""
    def padded_columns(shape: tuple[int, int]) -> int:
        return _round_up(columns, shape[1] * lanes)
    shapes = [s for s in TILE_SHAPES[lanes] if s[0] >= MIN_ROWS or rows % s[0] == 0]
    least = min(padded_columns(s) for s in shapes)
    best = sorted((s for s in shapes if padded_columns(s) == least),
                  key=lambda s: (-s[0] * s[1], _round_up(rows, s[0])))
    chosen = [best[0]] + [s for s in sorted(best, key=lambda s: (s[1], -s[0])) if s != best[0]][:1]
    return [(tm, nv, lanes, 0, True) for tm, nv in chosen]


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def rule_schedules(mod: object, tiles: list[tuple[int, int, int, int, bool]] | None = None,
                   lanes: int = 8) -> list[object]:
    """The rule's schedules of `mod` (tvm.s_tir.Schedule, before postprocessing), one per register tile
    (`matmul_tiles` of the output by default); [] where `mod` is not a matmul the rule applies to."""
    return [i.schedule for i in rule_instances(mod, tiles, lanes)]


def rule_instances(mod: object, tiles: list[tuple[int, int, int, int, bool]] | None = None,
                   lanes: int = 8) -> list[RuleInstance]:
    """`rule_schedules`, each with its tile's knob values (rows, vectors, lanes, k_block, packed)."""
    shape = matmul_output(mod)
    if shape is None:
        return []
    tiles = tiles if tiles is not None else matmul_tiles(*shape, lanes=lanes)
    return [RuleInstance(MatmulRule.name, dict(zip(TILE_KNOBS, tile)), sch)
            for tile, sch in tiled(mod, tiles, _tile)]


class MatmulRule(ScheduleRule):
    """Register tiles of rows x vectors of columns for matmuls with a row-major right operand (`matmul_tiles`)."""

    name = "matmul"
    source = "(matmul rule)"
    classes = ("matmul/", "batch_matmul/")
    structural = ("k_block", "packed")

    def instances(self, mod: object, lanes: int = 8) -> list[RuleInstance]:
        return rule_instances(mod, lanes=lanes)

    def space(self, mod: object, lanes: int = 8, limit: int = 64, seed: int = 0) -> list[RuleInstance]:
        """Today's tiles (`instances`), then the other tiles of `space_tiles` in a seeded order, up to `limit` in
        all: the same template, other decisions of its sampled splits (rows, vectors, K block) and of packing."""
        shape = matmul_output(mod)
        if shape is None:
            return []
        fixed = self.instances(mod, lanes)
        known = {tuple(i.knobs[k] for k in TILE_KNOBS) for i in fixed}
        others = [t for t in space_tiles(*shape, lanes=lanes) if t not in known]
        random.Random(seed).shuffle(others)
        room = max(0, limit - len(fixed))
        return fixed[:limit] + [replace(i, fixed=False) for i in rule_instances(mod, others[:room], lanes)]


def matmul_output(mod: object) -> tuple[int, int, int] | None:
    """(rows, columns, depth) of the kernel's matmul, None if the kernel is not a rule's matmul."""
    extents = block_extents(mod, _matmul_block)
    return None if extents is None else (extents[-3], extents[-2], extents[-1])


def _matmul_block(sch: object) -> object | None:
    """The kernel's one matmul block at the root (spatial iterators, then one reduction) whose right operand
    is read at [.., k, n], else None."""
    found = only_root_block(sch, "matmul")
    if found is None:
        return None
    block = sch.get(found)
    kinds = [int(iv.iter_type) for iv in block.iter_vars]
    if len(kinds) < 3 or kinds[-1] != 2 or any(k != 0 for k in kinds[:-1]):
        return None
    if len(sch.get_loops(found)) != len(kinds) or len(block.reads) != 2:
        return None
    n, k = block.iter_vars[-2].var, block.iter_vars[-1].var
    right = block.reads[1].region
    if len(right) < 2 or not _is_var(right[-1].min, n) or not _is_var(right[-2].min, k):
        return None
    return found


def _is_var(expr: object, var: object) -> bool:
    return hasattr(expr, "same_as") and expr.same_as(var)


def _tile(sch: object, tile: tuple[int, int, int, int, bool]) -> None:
    tm, nv, lanes, kb, packed = tile
    block = _matmul_block(sch)
    padded_panel = None
    if extent(sch, sch.get_loops(block)[-2]) % (nv * lanes):
        if not packed:
            raise ValueError("columns that the tile does not divide are padded in a packed panel only")
        padding = [1] * len(sch.get_loops(block))
        padding[-2] = nv * lanes
        sch.pad_einsum(block, padding)  # W copied with zeros past N (the packed panel), the output cropped
        padded_w = sch.get(block).reads[1].source
        padded_panel = next(b for b in sch.get_producers(block) if sch.get(b).writes[0].source.same_as(padded_w))
    blocks = list(sch.get_child_blocks(sch.get_sblock("root")))
    at = blocks.index(next(b for b in blocks if sch.get(b).same_as(sch.get(block))))
    producers, consumers = blocks[:at], blocks[at + 1:]
    for b in consumers[:-1]:  # the epilogue into one block: bias, GELU, residual add
        sch.compute_inline(b)
    out = consumers[-1] if consumers else sch.cache_write(block, 0, "global")
    *batch, m, n, k = sch.get_loops(block)
    # the knobs are sampling decisions where they divide their loop (a ragged last row tile is a literal split)
    m_o, m_i = sampled_split(sch, m, tm) if extent(sch, m) % tm == 0 else sch.split(m, [None, tm])
    n_o, n_v, n_l = sch.split(n, sch.sample_perfect_tile(n, n=3, max_innermost_factor=lanes,
                                                         decision=[extent(sch, n) // (nv * lanes), nv, lanes]))
    blocked = kb and extent(sch, k) > kb and extent(sch, k) % kb == 0
    if blocked:
        # blocks of kb rows of W's column panel: the rows a block spans stay within the TLB's reach
        k_o, k = sampled_split(sch, k, kb, max_inner=kb)
        sch.reorder(*batch, n_o, k_o, m_o, k, m_i, n_v, n_l)
        outer = sch.fuse(*batch, n_o)
    else:
        sch.reorder(*batch, n_o, m_o, k, m_i, n_v, n_l)
        # a packed panel is copied once per column panel, so row tiles stay inside the parallel loop
        outer = sch.fuse(*batch, n_o) if packed else sch.fuse(*batch, n_o, m_o)
    sch.parallel(outer)
    if packed:
        # the panel (or its K block) copied to a buffer allocated inside the loop: rows of tn floats, contiguous
        panel = padded_panel or sch.cache_read(block, 1, "global")
        sch.compute_at(panel, k_o if blocked else outer, preserve_unit_loops=True)
        vectorize_innermost(sch, panel)
    sch.reverse_compute_at(out, outer, preserve_unit_loops=True)
    for loop in (m_i, n_v):
        sch.unroll(loop)
    sch.vectorize(n_l)
    vectorize_innermost(sch, out)
    # zeroes the accumulators in a loop nest of its own: before the first K block where K is blocked
    init = sch.decompose_reduction(block, sch.get_loops(block)[1] if blocked else k)
    vectorize_innermost(sch, init)
    for b in producers:
        if padded_panel is None or not sch.get(b).same_as(sch.get(padded_panel)):
            parallel_root(sch, b)
