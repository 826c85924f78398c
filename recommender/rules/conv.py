"""Rule-built schedules for NCHW convolutions: a register tile of output channels x output columns.

A conv donor replayed from the bank carries the tile sizes its own search found in a few hundred trials;
on this CPU those reach 40-70% of the FMA peak, where PyTorch's convs reach about 80%. The rule here writes
the micro-kernel such convs need directly: for every input channel and filter tap, `tc` weights are
broadcast and multiplied into `tc x th` vectors of `tw` output columns, so they stay in registers over
the whole reduction, the input row is read as contiguous vectors and the weights keep their
OIHW layout (no packing). Parallel over (batch, channel tile, row tile); the epilogue (bias, batch norm,
ReLU, residual add) computed per tile while it is in cache; padding materialized once at the root, the
input's and, where Relax fused the next conv's padding into the epilogue, the output's (mobilenet_v2's expand
convs: 37.5 -> 152.3 GFLOP/s on 16 -> 96 channels at 112x112, where every rule schedule used to leave the border
unwritten; benchmarks/results/llvm-znver4-2c/conv_rules.padded.md). A stride-2 conv's padded input keeps even and
odd columns apart, so that each tap reads one contiguous vector instead of shuffling two (resnet50 on
llvm-znver4-2c, best column tile each way, side by side: its 3 -> 64 7x7 stem 186.9 against 87.5 GFLOP/s, its
3x3 convs onto 14x14 and 7x7 140.5 against 103.5 and 99.9 against 52.2, onto 28x28 81.4 against 78.3;
`python benchmarks/conv_rules_probe.py --models resnet50 --kernels 8 --stride-2-plain`, conv_rules.stride2.md.
In the same run the 1x1 stride-2 convs, whose two schedules are the same, read up to 1.5x apart: the noise). An
unpadded (1x1) conv's input is read in place, and a 1x1 stride-2 conv also gets flat tiles (`flat_fits`).
On AVX2, packed tiles (`PackedTile`) turn the tile around: vectors of output channels, each input value
broadcast, the weights read from a packed copy that a model build folds into its constants.

The tile follows the target's vector registers (`float32_lanes`): with AVX2's 16 registers of 8 floats, 8
accumulators of up to 8 columns; with AVX-512's 32 registers of 16 floats, 16 accumulators of up to 16
columns (on resnet50's and vgg16's convs of 14- to 56-wide maps 255-320 GFLOP/s against 126-180 for the
best AVX2 tile on the same Intel AVX-512 CPU, benchmarks/results/llvm-rocketlake-2c/conv_rules.json).

It applies to a stride-1 or stride-2 conv2d_nchw block (4 spatial and 3 reduction iterators, loops unscheduled)
whose output columns split into vectors, grouped or not (a grouped conv's tile spans channels of one group:
RegNet's 64-channel groups, which no donor of another class serves; a depthwise conv's, one channel and
several rows), and to a conv3d_ncdhw block alike (video models; no bank model has one, so no donor serves
it): the tile is one frame's, the output frames are parallel with the rows and the depth taps loop outside
the unrolled row and column taps. `rule_schedules` gives one schedule per register tile that fits, and flat
tiles (2-D convs only) where `flat_fits`, or none. Like every candidate, each is checked against the unscheduled kernel and measured.
"""
from __future__ import annotations

import random
from dataclasses import replace
from typing import NamedTuple

from ..measure.worker import REWRITE_ANNOTATION
from .base import RuleInstance, ScheduleRule
from .common import block_extents, extent, only_root_block, parallel_root, sampled_split, tiled, vectorize_innermost

# output columns per vector, by float32 lanes of the target's vector registers, preferred first: a full
# register, then widths that suit 28/14/7-wide maps (7 on AVX2, 14 on AVX-512)
COLUMN_TILES = {8: (8, 7, 6, 5), 16: (16, 14, 12, 8)}
NARROW_TILES = {8: (4,), 16: (7, 6, 5, 4)}  # the first that divides the width where no COLUMN_TILES entry does
# (channels, rows) of the register tile, preferred first: 8 accumulators of AVX2's 16 registers, 16 of AVX-512's 32
TILE_SHAPES = {8: ((8, 1), (4, 2), (4, 1), (2, 1)),
               16: ((8, 2), (4, 4), (16, 1), (8, 1), (4, 2), (4, 1), (2, 1))}
MIN_FLOPS = 2e6  # smaller convs get no rule candidates: under 0.1 ms with any schedule, not worth four builds
TILES_PER_WIDTH = 2
WIDTHS = 2  # column tiles tried: the first this many of COLUMN_TILES that divide the output width
# one-row tiles also tried on the first column width, for AVX-512: on Zen 4, whose AVX-512 units are 256 bits
# wide, 16 x 1 and 8 x 1 beat the two- and four-row tiles by 5-16% on vgg16's and resnet50's 3x3 convs (e.g.
# 185 against 168 GFLOP/s at 256x56x56), where Rocket Lake prefers 8 x 2 and 4 x 4
# (benchmarks/results/llvm-znver4-2c/conv_rules.md, .../llvm-rocketlake-2c/conv_rules.md)
ONE_ROW_SHAPES = {8: (), 16: ((16, 1), (8, 1))}
# (channels, rows) for a depthwise conv (one channel per group): a tile of one channel, and as many rows as
# divide the map, tallest first: a column of taps loads each input row once for all the tile's rows. On
# mnasnet1_0's and efficientnet_b0's depthwise convs (llvm-znver4-2c) the rule's tiles reach 21-130 GFLOP/s,
# above the best donor the ranker picked on 14 of 16 (e.g. 97.8 against 47.9 on 72 channels of 56x56) and
# above PyTorch on 15 of 16
# (benchmarks/results/llvm-znver4-2c/conv_rules.depthwise_conv2d.md)
DEPTHWISE_SHAPES = {lanes: ((1, 8), (1, 7), (1, 4), (1, 2), (1, 1)) for lanes in (8, 16)}
# (channels, vectors) of a flat tile, preferred first: a conv whose output map is at most half a vector wide (7x7
# with AVX-512's 16 lanes: 7-wide vectors fill 44% of each register), or of stride 2, computed over the map's
# positions flattened and padded up to whole vectors (49 -> 64: 77%), its input gathered into one row per input
# channel and filter tap (im2col; the padding and the stride resolved there) and the output cropped. Gathered,
# on resnet50's seven convs onto 7x7 maps or (stride 2) onto 14x14, a flat tile beat every column tile, e.g.
# 99.2 against 50.2 GFLOP/s on its 512 -> 512 3x3 conv at 7x7 and 109.1 against 60.3 on its 1024 -> 2048
# stride-2 1x1 conv (benchmarks/results/llvm-znver4-2c/conv_rules.flat.json, a noisy hour: compare within a row).
# AVX2's 8 lanes fit 7 columns well: none there
FLAT_SHAPES = {8: (), 16: ((16, 1), (8, 2), (4, 4))}
FLAT_TILES = 3  # the first this many FLAT_SHAPES that divide the channels
# a flat tile reads one gathered row per input channel and tap at each of its positions: rows of 784 positions
# (a stride-2 conv onto 28x28) lie 3 KB apart, and resnet50's 128 -> 128 3x3 conv fell to 5-8 GFLOP/s under
# 16 x 1 and 8 x 2 where column tiles reach 95, its 3 -> 64 stem (112x112) to 5-8 against 64; onto 14x14
# (196 positions) flat tiles won (conv_rules.flat.md)
FLAT_MAX_POSITIONS = 256
# the template's space (ConvRule.space): accumulator vectors that fit the vector registers beside the broadcast
# weights and the input vector (AVX2: 16 registers, AVX-512: 32), and the largest channel and row tiles
ACCUMULATORS = {8: 12, 16: 24}
SPACE_MAX_CHANNELS = 16
SPACE_MAX_ROWS = 8
# input channels per block of the reduction (the `reduction` knob; 0 or absent: the whole reduction under each
# column tile, as the fixed tiles do). A block loops outside the column tiles, so the tile's weights for that
# many input channels stay in L1 while the tile sweeps the row, and the accumulators go through the output
# between blocks. The bank's fastest donors for vgg16's 128-channel 112x112 convs do that (their reduction
# split 32 x 2 outside a 64 x 4 x 8 tile) and beat every register tile of the space by 1.45-1.55x
# (models/llvm-rocketlake-2c/space/vgg16.jsonl.gz: 8.9 against 12.8 ms, 17.8 against 27.5 ms)
REDUCTION_BLOCKS = (8, 16, 32, 64)
# packed tiles (`PackedTile`): (vectors of output channels, rows, columns) preferred first, the first PACKED_FIXED
# that fit are fixed tiles; the space holds every tile of PACKED_ACCUMULATORS accumulators (rows up to
# PACKED_MAX_ROWS). Measured on AVX2 only (llvm-znver3-2c, benchmarks/results/llvm-znver3-2c/channel_vector.md:
# resnet50's 3x3 convs 1.26-1.33x the best of the column template's first 32 instances, side by side, e.g. 159.9
# against 123.0 GFLOP/s at 256@14x14 under (2, 2, 2), 147.4 against 110.9 at 512@7x7 under (1, 1, 7); its 1x1 convs
# 1.32x and 1.63x from 128 and 256 input channels, 0.79x from 512): AVX-512 gets none until measured there
PACKED_SHAPES = {8: ((2, 2, 2), (1, 1, 7), (2, 1, 4), (4, 1, 2), (1, 4, 2), (1, 2, 4), (1, 1, 8)), 16: ()}
PACKED_FIXED = 2
# a 1x1 conv of this many input channels or more gets its fixed packed tiles with a reduction block of
# PACKED_BLOCK: on resnet50's 1x1 convs from 256 and 1024 channels (llvm-znver3-2c, channel_vector.rule.md) the
# blocked (2, 2, 2) ran 99.8 and 153.2 GFLOP/s against 76.9 and 96.0 unblocked; from 128 channels unblocked won
PACKED_BLOCK_FROM = 256
PACKED_BLOCK = 32
PACKED_ACCUMULATORS = {8: (6, 14), 16: (12, 28)}
PACKED_MAX_ROWS = 4
PACKED_MAX_VECTORS = 4


class FlatTile(NamedTuple):
    """A register tile over a conv's flattened map: `channels` x `vectors` vectors of the target's lanes;
    `local`: each tile of positions gathers its own columns inside the parallel loop, for every channel tile,
    instead of the whole map's at the root."""
    channels: int
    vectors: int
    local: bool = False


class PackedTile(NamedTuple):
    """A register tile of `vectors` vectors of output channels (`lanes` channels each) x `rows` x `columns` output
    positions: each input value is broadcast and multiplied into the tile's channel vectors, whose weights are read
    as vectors from a copy of the weights packed [O / lanes, C, KH, KW, lanes] (`_packed_tile`); with a `reduction`
    block, that many input channels at a time outside the tiles of a row, as the column template's blocks."""
    vectors: int
    rows: int
    columns: int
    lanes: int = 8
    reduction: int = 0


def packed_tiles(out_channels: int, height: int, width: int, lanes: int = 8, fixed: bool = False) -> list[PackedTile]:
    """The packed tiles of an ungrouped conv's output: PACKED_SHAPES[lanes] that fit first (with `fixed`, the first
    PACKED_FIXED of those only), then every other (vectors, rows, columns) whose channels divide the output's,
    whose rows and columns divide the map and whose accumulators are within PACKED_ACCUMULATORS[lanes]. None where
    the target has no PACKED_SHAPES."""
    shapes = PACKED_SHAPES.get(lanes, ())
    if not shapes:
        return []
    fits = lambda v, r, w: out_channels % (v * lanes) == 0 and height % r == 0 and width % w == 0  # noqa: E731
    preferred = [PackedTile(*t, lanes) for t in shapes if fits(*t)]
    if fixed:
        return preferred[:PACKED_FIXED]
    low, high = PACKED_ACCUMULATORS[lanes]
    others = [PackedTile(v, r, w, lanes) for v in range(1, PACKED_MAX_VECTORS + 1) for r in range(1, PACKED_MAX_ROWS + 1)
              for w in range(1, width + 1) if fits(v, r, w) and low <= v * r * w <= high]
    return preferred + [t for t in others if t not in preferred]


def conv_tiles(out_channels: int, height: int, width: int, lanes: int = 8) -> list[tuple[int, int, int]]:
    """Register tiles (channels, rows, columns) for an output of this shape on a target with `lanes` float32
    lanes per vector (8 or 16): for each of the first WIDTHS column tiles dividing the width (else the first
    NARROW_TILES entry that does), the first TILES_PER_WIDTH (channels, rows) shapes dividing the output
    (DEPTHWISE_SHAPES where a group has one channel); with 16 lanes, the ONE_ROW_SHAPES on the first width.
    Which of the two is faster depends on the shape (on AVX2, 4 x 2 x 7 columns on resnet50's 14x14 and 28x28
    maps and 8 x 1 x 8 on vgg16's 56x56 and 224x224 maps, benchmarks/results/llvm-znver3-2c/conv_rules.md),
    so both are measured."""
    if lanes not in COLUMN_TILES:
        raise ValueError(f"conv tiles are defined for 8 or 16 float32 lanes, not {lanes}")
    widths = column_widths(width, lanes)
    shapes = TILE_SHAPES[lanes] if out_channels > 1 else DEPTHWISE_SHAPES[lanes]
    out = []
    for tw in widths:
        fits = [(tc, th, tw) for tc, th in shapes if out_channels % tc == 0 and height % th == 0]
        out += fits[:TILES_PER_WIDTH]
    if widths:
        out += [(tc, 1, widths[0]) for tc, _ in ONE_ROW_SHAPES[lanes]
                if out_channels % tc == 0 and (tc, 1, widths[0]) not in out]
    return out


def column_widths(width: int, lanes: int) -> list[int]:
    """The column tiles for an output `width`: the first WIDTHS of COLUMN_TILES dividing it, else the first
    NARROW_TILES entry that does; none for a width no tile divides (17, 71: Inception's maps)."""
    return ([w for w in COLUMN_TILES[lanes] if width % w == 0][:WIDTHS]
            or [w for w in NARROW_TILES[lanes] if width % w == 0][:1])


def rule_schedules(mod: object, tiles: list[tuple[int, int, int]] | None = None, lanes: int = 8,
                   inline_copies: bool = True, deinterleave: bool = True) -> list[object]:
    """The rule's schedules of `mod` (tvm.s_tir.Schedule, before postprocessing), one per register tile
    (`conv_tiles` of the output for `lanes` float32 lanes by default); [] where `mod` is not a stride-1 or -2 NCHW
    conv. `inline_copies=False` keeps an unpadded conv's input copy at the root, as the rule once did, and
    `deinterleave=False` a stride-2 conv's padded input in its own layout (probes)."""
    return [i.schedule for i in rule_instances(mod, tiles, lanes, inline_copies, deinterleave)]


def rule_instances(mod: object, tiles: list[tuple[int, int, int]] | None = None, lanes: int = 8,
                   inline_copies: bool = True, deinterleave: bool = True) -> list[RuleInstance]:
    """`rule_schedules`, each with its tile's knob values (`tile_knobs`)."""
    shape = conv_output(mod)
    if shape is None:
        return []
    if tiles is None:
        tiles = (packed_fits(mod, lanes, fixed=True) + conv_tiles(*shape, lanes=lanes)
                 + (flat_tiles(shape[0], lanes, shape[1] * shape[2]) if flat_fits(mod, lanes) else []))

    def apply(sch: object, tile: object) -> None:
        if isinstance(tile, FlatTile):
            _flat_tile(sch, tile, lanes)
        elif isinstance(tile, PackedTile):
            _packed_tile(sch, tile)
        else:
            _tile(sch, tile, inline_copies, deinterleave)
    return [RuleInstance(ConvRule.name, tile_knobs(tile), sch) for tile, sch in tiled(mod, tiles, apply)]


def packed_fits(mod: object, lanes: int, fixed: bool = False) -> list[PackedTile]:
    """`packed_tiles` of the kernel where packed tiles apply (an ungrouped 2-D conv), else none; the fixed ones of
    a 1x1 conv of PACKED_BLOCK_FROM input channels or more each with a reduction block of PACKED_BLOCK."""
    extents = conv_extents(mod)
    if extents is None or len(extents) != 7 or _groups(mod) != 1:
        return []
    tiles = packed_tiles(extents[1], extents[2], extents[3], lanes, fixed)
    if fixed and extents[5:] == [1, 1] and extents[4] >= PACKED_BLOCK_FROM and PACKED_BLOCK in reduction_blocks(mod):
        return [t._replace(reduction=PACKED_BLOCK) for t in tiles]
    return tiles


class ConvRule(ScheduleRule):
    """Register tiles of output channels x columns for NCHW conv2d / conv3d (`conv_tiles`, `flat_tiles`)."""

    name = "conv"
    source = "(conv rule)"
    classes = ("conv2d/", "group_conv2d/", "depthwise_conv2d/", "conv3d/")
    structural = ("reduction", "flat", "packed")

    def instances(self, mod: object, lanes: int = 8) -> list[RuleInstance]:
        return rule_instances(mod, lanes=lanes)

    def space(self, mod: object, lanes: int = 8, limit: int = 64, seed: int = 0) -> list[RuleInstance]:
        """Today's tiles (`instances`), then the other packed tiles (`packed_tiles`), the fixed packed tiles with
        each of the kernel's `reduction_blocks`, today's register tiles with each block, then the other register
        tiles of `space_tiles` in a seeded order, then those with each reduction block (seeded), up to `limit` in
        all: the same template, other decisions of its sampled splits. (The column tiles keep the order they had
        before reduction blocks existed, so a matrix measured then lacks only the blocked and packed instances.)"""
        shape = conv_output(mod)
        if shape is None:
            return []
        fixed = self.instances(mod, lanes)
        known = [tuple(i.knobs[k] for k in ("channels", "rows", "columns")) for i in fixed
                 if not i.knobs.get("flat") and not i.knobs.get("packed")]
        packed_fixed = packed_fits(mod, lanes, fixed=True)
        preferred = packed_tiles(*shape, lanes=lanes, fixed=True) if packed_fixed else []  # unblocked
        packed = [t for t in packed_fits(mod, lanes) if t not in packed_fixed]
        others = [t for t in space_tiles(*shape, lanes=lanes) if t not in known]
        random.Random(seed).shuffle(others)
        blocks = reduction_blocks(mod)
        blocked_others = [(*t, rb) for rb in blocks for t in others]
        random.Random(seed).shuffle(blocked_others)
        packed_blocked = [b for rb in blocks for t in preferred if (b := t._replace(reduction=rb)) not in packed_fixed]
        rest = packed + packed_blocked + [(*t, rb) for rb in blocks for t in known] + others + blocked_others
        room = max(0, limit - len(fixed))
        return fixed[:limit] + [replace(i, fixed=False) for i in rule_instances(mod, rest[:room], lanes)]


def space_tiles(out_channels: int, height: int, width: int, lanes: int = 8) -> list[tuple[int, int, int]]:
    """Every register tile (channels, rows, columns) of the conv template for an output of this shape: channels
    and rows that divide the output (at most SPACE_MAX_CHANNELS and SPACE_MAX_ROWS), columns that divide its
    width and fill half a vector to two vectors (else the widest under a vector that divides it), and no more
    accumulator vectors (channels x rows x vectors per row) than ACCUMULATORS[lanes]. `conv_tiles` picks a few
    of these by hand."""
    if lanes not in ACCUMULATORS:
        raise ValueError(f"conv tiles are defined for 8 or 16 float32 lanes, not {lanes}")
    channels = [c for c in _divisors(out_channels) if c <= SPACE_MAX_CHANNELS]
    rows = [r for r in _divisors(height) if r <= SPACE_MAX_ROWS]
    columns = ([w for w in _divisors(width) if lanes <= 2 * w <= 4 * lanes]
               or [w for w in _divisors(width) if w <= lanes][-1:])
    return [(c, r, w) for c in channels for r in rows for w in columns
            if c * r * -(-w // lanes) <= ACCUMULATORS[lanes]]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def reduction_blocks(mod: object) -> list[int]:
    """The `REDUCTION_BLOCKS` that divide the conv's input channels (of a group) and leave two blocks or more;
    none for a depthwise conv (one input channel per group) or a conv3d."""
    extents = conv_extents(mod)
    if extents is None or len(extents) != 7:
        return []
    channels = extents[4]  # rc: the input channels one output channel reads
    return [b for b in REDUCTION_BLOCKS if channels % b == 0 and channels // b >= 2]


def tile_knobs(tile: tuple[int, ...] | FlatTile | PackedTile) -> dict:
    """A conv tile's knob values: channels x rows x columns (+ its reduction block), a flat tile's channels x
    vectors (+ local), or a packed tile's channels (its vectors x lanes) x rows x columns (+ vectors)."""
    if isinstance(tile, PackedTile):
        knobs = {"packed": True, "channels": tile.vectors * tile.lanes, "rows": tile.rows, "columns": tile.columns,
                 "vectors": tile.vectors}
        return {**knobs, "reduction": tile.reduction} if tile.reduction else knobs
    if isinstance(tile, FlatTile):
        return {"flat": True, "channels": tile.channels, "vectors": tile.vectors, "local": tile.local}
    channels, rows, columns, *block = tile
    knobs = {"channels": channels, "rows": rows, "columns": columns}
    return {**knobs, "reduction": block[0]} if block and block[0] else knobs


def flat_tiles(channels: int, lanes: int, positions: int = 0) -> list[FlatTile]:
    """The first FLAT_TILES of FLAT_SHAPES[lanes] whose channels divide `channels`; on a map of more than
    FLAT_MAX_POSITIONS `positions`, each tile of positions gathers its own columns (`FlatTile.local`). On six
    such convs (llvm-znver5-2c, 16 lanes, best tile each way, one run) the local gather won on all six, e.g.
    0.139 against 0.176 ms on 16 -> 64 3x3 at 55x55, 0.324 against 0.409 on 64 -> 96 3x3 at 35x35, 0.451 against
    0.499 on 192 -> 192 3x3 at 17x17 and 0.334 against 0.364 on a 3 -> 64 stride-2 stem onto 111x111: the whole
    map's gathered columns (1.3-1.7 MB there) no longer pass through memory. Smaller maps keep the gather at the
    root, parallel over channel tiles: a 7x7 map has 4 tiles of 16 positions, too few to run in parallel."""
    local = positions > FLAT_MAX_POSITIONS
    return [FlatTile(c, v, local) for c, v in FLAT_SHAPES.get(lanes, ()) if channels % c == 0][:FLAT_TILES]


def flat_fits(mod: object, lanes: int) -> bool:
    """Whether flat tiles apply: an ungrouped conv (any filter size or padding the rule takes) on a map at most
    half a vector wide, or of stride 2 (the gather makes its strided reads contiguous) onto at most
    FLAT_MAX_POSITIONS positions or, 1x1 (ResNet's projections, whose gather is one row per input channel), onto
    any map (resnet50's 256 -> 512 at 56x56 onto 28x28: 169.9 GFLOP/s flat against 70.8 under the best column tile
    reading the strided input in place, 150.9 with Relax's copy of it kept at the root, rows and columns apart;
    resnet18's 64 -> 128 at the same size 85.5 flat against 130.1 in place: both are measured; llvm-rocketlake-2c,
    benchmarks/results/llvm-rocketlake-2c/pad_copy.stride2.md), or onto a width no column tile divides or only one
    of at most half a vector (any size: on SqueezeNet's 55x55 maps, where only 5 of 16 lanes divide, a 16 -> 64
    3x3 conv ran 123 GFLOP/s under the best 5-column tile and 322 under a flat one, llvm-znver5-2c; its 64 -> 16
    1x1 conv 136 under a 5-column tile and 80 flat: both are measured). A stride-1 conv on a wider map that column
    tiles fit gets none: on 14x14 maps a 14-wide column tile won on all 12 1x1 convs probed.
    Where no column tile fits, flat tiles are the rule's only tiles: on torchvision inception_v3's ten heaviest
    convs (17x17 maps, and 71x71), llvm-znver4-2c, the best flat tile reached 76-165 GFLOP/s against 16-70 for
    the schedule its transfer had chosen (out of vgg16's donors), even over 71x71's 5041 positions."""
    extents = conv_extents(mod)
    if not FLAT_SHAPES.get(lanes) or extents is None or len(extents) != 7 or _groups(mod) != 1:
        return False
    widths = column_widths(extents[3], lanes)
    return (2 * extents[3] <= lanes or not widths or 2 * max(widths) <= lanes
            or (is_stride_2(mod) and (extents[2] * extents[3] <= FLAT_MAX_POSITIONS or extents[5:] == [1, 1])))


def is_stride_2(mod: object) -> bool:
    """Whether the kernel is a rule's conv that reads every other input column."""
    from tvm.s_tir import Schedule
    sch = Schedule(mod)
    conv = _conv_block(sch)
    return conv is not None and _column_stride(sch.get(conv)) == 2


def conv_extents(mod: object) -> list[int] | None:
    """The loop extents of the kernel's conv block (n, c, [d,] h, w, rc, [rd,] ry, rx), None where the kernel is
    not a conv the rule applies to."""
    return block_extents(mod, _conv_block)


def conv_output(mod: object) -> tuple[int, int, int] | None:
    """(channels, height, width) of the kernel's conv output, None if the kernel is not a rule's conv. For a
    grouped conv, channels are those of one group: a register tile spans the channels of one group only, so
    that they all read the same input row. A conv3d's depth is not in it: the tile is one frame's."""
    extents = conv_extents(mod)
    if extents is None:
        return None
    spatial = _spatial(extents)
    return extents[1] // _groups(mod), extents[spatial - 2], extents[spatial - 1]


def _spatial(extents: list) -> int:
    """The number of spatial loops of a conv block's loops (n, c, [d,] h, w, then rc, [rd,] ry, rx)."""
    return (len(extents) + 1) // 2


def _groups(mod: object) -> int:
    """The conv's groups: its input channels over the weight's input channels (1 for a plain conv)."""
    from tvm.s_tir import Schedule
    sch = Schedule(mod)
    data, weight = (r.source for r in sch.get(_conv_block(sch)).reads)
    return int(data.shape[1]) // int(weight.shape[1])


def _conv_block(sch: object) -> object | None:
    """The kernel's one conv2d_nchw (or group_conv2d_nchw) or conv3d_ncdhw block at the root with stride 1 or
    2 along the columns (dilated at stride 1 only), else None."""
    conv = (only_root_block(sch, "conv2d_nchw") or only_root_block(sch, "group_conv2d_nchw")
            or only_root_block(sch, "conv3d_ncdhw"))
    if conv is None:
        return None
    block = sch.get(conv)
    kinds = [int(iv.iter_type) for iv in block.iter_vars]
    spatial = 5 if block.name_hint.startswith("conv3d") else 4
    if kinds != [0] * spatial + [2] * (spatial - 1) or len(sch.get_loops(conv)) != len(kinds):
        return None
    if not _column_stride_fits(block):
        return None
    return conv


def _column_stride_fits(block: object) -> bool:
    """Whether the conv reads its input at column s * xx + rx with s 1 or 2 (or at xx + d * rx, dilated): a
    vector of output columns then loads one input row contiguously, or, at stride 2, every other float of two
    vectors (which LLVM shuffles out without a gather where the input is read in place; a padded input is
    stored with even and odd columns apart, see `_tile`) (resnet18's stride-2 3x3 convs on llvm-znver4-2c:
    108-127 GFLOP/s under the rule, against 22-108 with the donors the ranker picked; output-checked)."""
    return _column_stride(block) in (1, 2)


def _column_stride(block: object) -> int | None:
    """s where the conv reads its input at column s * xx + rx, or xx + d * rx (a dilated conv, DeepLab's atrous
    convs: each tap still reads a contiguous vector of the input row, shifted by d), else None."""
    spatial = _spatial(block.iter_vars)
    xx, rx = block.iter_vars[spatial - 1].var, block.iter_vars[-1].var
    if len(block.reads) != 2 or len(block.reads[0].region) != spatial:
        return None
    data = block.reads[0]  # (data or its padding, weight), as topi's conv2d_nchw and conv3d_ncdhw read them
    from tvm.sym.pattern import detect_linear_equation
    coeffs = detect_linear_equation(data.region[-1].min, [xx, rx])  # [per xx, per rx, constant]
    if len(coeffs) != 3 or not all(hasattr(c, "value") for c in coeffs[:2]):
        return None
    stride, dilation = int(coeffs[0].value), int(coeffs[1].value)
    return stride if dilation == 1 or (stride == 1 and dilation > 1) else None


def _around_conv(sch: object) -> tuple[object, list, list]:
    """The conv block, the root blocks before it (its input's padding or copy) and those after it (epilogue)."""
    conv = _conv_block(sch)
    blocks = list(sch.get_child_blocks(sch.get_sblock("root")))
    at = blocks.index(next(b for b in blocks if sch.get(b).same_as(sch.get(conv))))
    return conv, blocks[:at], blocks[at + 1:]


def _tile(sch: object, tile: tuple[int, ...], inline_copies: bool = True, deinterleave: bool = True) -> None:
    """Write the register tile (channels, rows, columns[, reduction block]) into `sch`."""
    tc, th, tw, *block = tile
    block = block[0] if block else 0
    conv, producers, consumers = _around_conv(sch)
    stride = _column_stride(sch.get(conv))  # read before the reduction's init block joins the conv's reads
    # a last block that pads the output for the next conv (Relax fuses the padding into this kernel) stays at
    # the root, over the whole padded map: computed per tile, it would leave the border unwritten
    padding = consumers[-1:] if consumers and _pads_output(sch, consumers[-1], conv) else []
    epilogue = consumers[:len(consumers) - len(padding)]
    for b in epilogue[:-1]:  # the epilogue into one block: bias, batch norm, ReLU, residual add
        sch.compute_inline(b)
    out = epilogue[-1] if epilogue else sch.cache_write(conv, 0, "global")
    loops = sch.get_loops(conv)
    spatial = _spatial(loops)
    # a conv3d's depth and depth taps (d, rd) are loops outside the tile, like the batch and the input channels
    (n, co, *depth, h, w), (rc, *depth_taps, ry, rx) = loops[:spatial], loops[spatial:]
    co_o, co_i = sampled_split(sch, co, tc)
    h_o, h_i = sampled_split(sch, h, th)
    w_o, w_i = sampled_split(sch, w, tw)
    if block:  # blocks of input channels outside the column tiles: the epilogue once the row's blocks are done
        rc_o, rc = sampled_split(sch, rc, block, max_inner=max(REDUCTION_BLOCKS))
        sch.reorder(n, co_o, *depth, h_o, rc_o, w_o, rc, *depth_taps, ry, rx, h_i, co_i, w_i)
    else:
        sch.reorder(n, co_o, *depth, h_o, w_o, rc, *depth_taps, ry, rx, h_i, co_i, w_i)
    outer = sch.fuse(n, co_o, *depth, h_o)
    sch.parallel(outer)
    sch.reverse_compute_at(out, outer if block else w_o, preserve_unit_loops=True)
    for loop in (ry, rx, h_i, co_i):
        sch.unroll(loop)
    sch.vectorize(w_i)
    vectorize_innermost(sch, out)
    init = sch.decompose_reduction(conv, rc_o if block else rc)  # zeroes the accumulators in a loop nest of its own
    vectorize_innermost(sch, init)
    for b in producers:  # padding: once, at the root, parallel rows and vector columns; a copy is inlined
        if inline_copies and is_copy(sch, b):
            sch.compute_inline(b)
        else:
            parallel_root(sch, b)
            if deinterleave and stride == 2 and int(sch.get(b).writes[0].source.shape[-1]) % 2 == 0:
                # even and odd columns apart: a tap's stride-2 columns are then one contiguous vector, no shuffle
                sch.transform_layout(b, ("write", 0), (lambda n, c, h, w: (n, c, h, w % 2, w // 2))
                                     if len(sch.get(b).writes[0].source.shape) == 4
                                     else (lambda n, c, d, h, w: (n, c, d, h, w % 2, w // 2)))
    for b in padding:
        parallel_root(sch, b)


def _packed_tile(sch: object, tile: PackedTile) -> None:
    """A packed tile (`PackedTile`): the weights read through a copy packed [O / lanes, C, KH, KW, lanes], marked
    as a layout-rewrite block, so that a model build moves it out of the kernel and folds it into the constants
    (`measure.worker.pack_weights_ahead`) and the measurer times the kernel without it; the accumulators in a
    buffer with a vector's channels innermost, over the whole reduction; the epilogue per tile, from there into
    the NCHW output. The input, padded once at the root (or read in place), is read one broadcast value at a time,
    so a stride of 2 needs nothing of its own."""
    lanes = tile.lanes
    conv, producers, consumers = _around_conv(sch)
    padding = consumers[-1:] if consumers and _pads_output(sch, consumers[-1], conv) else []
    epilogue = consumers[:len(consumers) - len(padding)]
    for b in epilogue[:-1]:
        sch.compute_inline(b)
    out = epilogue[-1] if epilogue else sch.cache_write(conv, 0, "global")
    weight = sch.cache_read(conv, 1, "global")
    sch.transform_layout(weight, ("write", 0), lambda o, c, ky, kx: (o // lanes, c, ky, kx, o % lanes))
    sch.annotate(weight, REWRITE_ANNOTATION, 1)  # 1, as a database gives it back
    sch.transform_layout(conv, ("write", 0), lambda n, o, y, x: (n, o // lanes, y, x, o % lanes))
    n, co, h, w, rc, ry, rx = sch.get_loops(conv)
    co_o, co_i = sampled_split(sch, co, tile.vectors * lanes, max_inner=PACKED_MAX_VECTORS * lanes)
    co_v, co_l = sch.split(co_i, [tile.vectors, lanes])
    h_o, h_i = sampled_split(sch, h, tile.rows)
    w_o, w_i = sampled_split(sch, w, tile.columns, max_inner=max(16, tile.columns))
    if tile.reduction:  # blocks of input channels outside a row's tiles: the epilogue once the row's blocks are done
        rc_o, rc = sampled_split(sch, rc, tile.reduction, max_inner=max(REDUCTION_BLOCKS))
        sch.reorder(n, co_o, h_o, rc_o, w_o, rc, ry, rx, h_i, w_i, co_v, co_l)
    else:
        sch.reorder(n, co_o, h_o, w_o, rc, ry, rx, h_i, w_i, co_v, co_l)
    outer = sch.fuse(n, co_o, h_o)
    sch.parallel(outer)
    sch.reverse_compute_at(out, outer if tile.reduction else w_o, preserve_unit_loops=True)
    for loop in (ry, rx, h_i, w_i, co_v):
        sch.unroll(loop)
    sch.vectorize(co_l)
    vectorize_innermost(sch, out)
    init = sch.decompose_reduction(conv, rc_o if tile.reduction else rc)
    vectorize_innermost(sch, init)
    parallel_root(sch, weight)
    for b in producers:
        if is_copy(sch, b):
            sch.compute_inline(b)
        else:
            parallel_root(sch, b)
    for b in padding:
        parallel_root(sch, b)


def _flat_tile(sch: object, tile: FlatTile, lanes: int) -> None:
    """A flat tile: the conv's input gathered into columns (`reindex`: one row per input channel and filter tap,
    the map's positions flat along it, padded with zeros to whole vectors of the tile where they do not cover it
    exactly (a map they do cover was refused until 2026-12-07, resnet50's 28x28 under 16 x 1); the input's own
    padding and a stride resolved in the gather), `channels` x `vectors` accumulators of `lanes` positions over the
    whole reduction, the output cropped back to rows and columns by the epilogue (at the root)."""
    conv, producers, consumers = _around_conv(sch)
    for b in consumers[:-1]:
        sch.compute_inline(b)
    if not consumers:  # the conv writes the kernel's output: accumulate into a buffer of the kernel's own
        sch.cache_write(conv, 0, "global")
    _, _, height, width, _, _, _ = (extent(sch, lp) for lp in sch.get_loops(conv))
    positions = height * width
    step = lanes * tile.vectors
    columns = sch.reindex(conv, ("read", 0))  # (n, h, w, rc, ry, rx) less the unit taps (a 1x1 conv's)
    for b in producers:  # the input's padding (or Relax's copy of an unpadded input) read in the gather
        sch.compute_inline(b)
    # (n, h, w, rc, and the filter's taps that are not unit) -> (n, rc, taps..., position); lambdas, not one
    # IndexMap of any rank, so that TVM gives the map the buffer's own index type
    gathered = {4: lambda n, h, w, rc: (n, rc, h * width + w),
                5: lambda n, h, w, rc, t: (n, rc, t, h * width + w),
                6: lambda n, h, w, rc, ry, rx: (n, rc, ry, rx, h * width + w)}[len(sch.get(columns).writes[0].source.shape)]
    sch.transform_layout(columns, ("write", 0), gathered)
    sch.transform_block_layout(columns, gathered)
    sch.transform_layout(conv, ("write", 0), lambda n, c, h, w: (n, c, h * width + w))
    sch.transform_block_layout(conv, lambda n, c, h, w, rc, ry, rx: (n, c, h * width + w, rc, ry, rx))
    name = sch.get(conv).name_hint
    if positions % step:  # where the tile's vectors cover the map exactly, the gather needs no padding
        sch.pad_einsum(conv, [1, 1, -(-positions // step) * step, 1, 1, 1])
        conv = sch.get_sblock(name)
        sch.compute_inline(columns)  # gathered straight into the zero-padded copy pad_einsum made
    n, co, p, rc, ry, rx = sch.get_loops(conv)
    co_o, co_i = sch.split(co, [None, tile.channels])
    p_o, p_v, p_i = sch.split(p, [None, tile.vectors, lanes])
    gather = sch.get_producers(conv)[0] if tile.local else None
    if tile.local:  # positions outside, channel tiles inside: a tile's gathered columns serve every channel tile
        sch.reorder(n, p_o, co_o, rc, ry, rx, co_i, p_v, p_i)
        outer = sch.fuse(n, p_o)
        sch.parallel(outer)
        sch.compute_at(gather, outer)
        vectorize_innermost(sch, gather)
    else:
        sch.reorder(n, co_o, p_o, rc, ry, rx, co_i, p_v, p_i)
        sch.parallel(sch.fuse(n, co_o, p_o))
    sch.unroll(co_i)
    sch.unroll(p_v)
    sch.vectorize(p_i)
    sch.decompose_reduction(conv, rc)
    for b in sch.get_child_blocks(sch.get_sblock("root")):  # the gather, the crop and the epilogue
        if not sch.get(b).same_as(sch.get(conv)) and not sch.get(b).name_hint.endswith("_init") \
                and (gather is None or not sch.get(b).same_as(sch.get(gather))):
            parallel_root(sch, b)


def _pads_output(sch: object, block: object, conv: object) -> bool:
    """Whether the block writes a buffer of the conv output's rank whose map is larger than the conv's: the
    padding of the next conv's input, fused into this kernel's epilogue."""
    written = [int(x) for x in sch.get(block).writes[0].source.shape]
    produced = [int(x) for x in sch.get(conv).writes[0].source.shape]
    return len(written) == len(produced) in (4, 5) and written[:2] == produced[:2] and written[2:] != produced[2:] \
        and all(a >= b for a, b in zip(written[2:], produced[2:]))


def is_copy(sch: object, block: object) -> bool:
    """Whether the block copies one buffer into another of the same shape, its body a bare store of a load (no
    padding condition, no arithmetic): the pad_temp of a conv without padding (a 1x1 conv's), which the conv then
    reads in place instead of from a copy made at the root."""
    b = sch.get(block)
    if len(b.reads) != 1 or len(b.writes) != 1:
        return False
    value = getattr(b.body, "value", None)
    if (type(b.body).__name__ not in ("BufferStore", "TensorStore")  # TVM 0.27 prints them as Tensor*
            or type(value).__name__ not in ("BufferLoad", "TensorLoad")):
        return False
    return [int(x) for x in b.reads[0].source.shape] == [int(x) for x in b.writes[0].source.shape]
