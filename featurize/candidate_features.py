"""Features of a candidate: its target kernel's shape, its source, and its replayed trace.

Four parts, each a pure function of plain values (no TVM):
- kernel: op kind, axes, epilogue length, FLOPs, bytes moved, arithmetic intensity, output extents, dtype;
- pair: how the source kernel relates to the target (FLOP ratio, output-shape distance, whether the
  target's output extents are multiples of the source's, same class or anchor fallback, the source record's
  rank and the GFLOP/s it reached on its own kernel);
- source: the candidate's kind (donor, rule instance, design-space schedule), whether it is one of its rule's
  fixed tiles, and a rule instance's knob values (the register tile);
- schedule: the trace as tokens (`trace_tokens`), aggregated for tree models (token counts and the
  tile / unroll / parallel summary) or kept as a sequence for the TLP-style model;
- hardware (only for a featurizer given a `Hardware`, as rankers trained across CPUs are): the target's
  recorded spec and the schedule's choices against it (`hardware_features`).

`Featurizer.tabular(rows)` gives one vector per candidate (LightGBM); `Featurizer.sequences(rows)` gives
one (1 + SEQUENCE_TOKENS, 1 + width) array per candidate whose first token carries the kernel and pair features
(the TLP-style model). The feature version names the schema, the hardware block where there is one, and the
vocabulary: a ranker saved for another version is refused.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Protocol

import numpy as np

from recommender.core.rows import DONOR, RULE, SPACE

from .hardware_features import HARDWARE_NAMES, HARDWARE_VERSION, Hardware, hardware_features
from .trace_tokens import N_NUMERIC, Vocabulary, schedule_summary, trace_tokens

SCHEMA_VERSION = "3"  # 2: the source kind and the rule knobs; 3: a conv tile's footprint (`source_features`)
SCHEMAS = ("2", "3")  # what a Featurizer can still make: a ranker saved on an older schema keeps ranking
KERNEL_KINDS = ("conv2d", "depthwise_conv2d", "group_conv2d", "matmul", "batch_matmul", "pool", "reduction",
                "elementwise")
_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4, "int8": 1,
                "uint8": 1, "bool": 1}
_MAX_OUT_DIMS = 4
# instructions that only look blocks and loops up: left out of the sequences (not of the counts)
LOOKUP_WORDS = ("GetSBlock", "GetLoops", "GetProducers", "GetConsumers", "GetChildBlocks")
SEQUENCE_TOKENS = 64


class CandidateLike(Protocol):
    """What the featurizer reads from a candidate row (recommender.core.rows.CandidateRow has it)."""

    class_key: str
    flops: float
    target_args: tuple
    match: str
    source_model: str | None
    source_kernel: str | None
    source_rank: int | None
    source_latency_s: float | None
    trace: list | None
    knobs: dict | None
    source_kind: str | None  # DONOR, RULE or SPACE (recommender.core.rows)
    fixed_rule: bool


@dataclass(frozen=True)
class SourceKernel:
    """What the featurizer knows of a source kernel: its FLOPs and arguments (from the bank's meta.json)."""

    flops: float
    args: tuple  # ((shape, dtype), ...), the output last


def _log(x: float) -> float:
    return math.log2(1.0 + max(0.0, float(x)))


def kernel_features(class_key: str, args: tuple, flops: float) -> dict[str, float]:
    """Shape features of a kernel from its class key, argument shapes and FLOPs."""
    head, _, blocks = class_key.partition(":")
    kind, _, axes = head.partition("/")
    out: dict[str, float] = {f"kind_{k}": float(kind == k) for k in KERNEL_KINDS}
    m = axes.replace("s", " ").replace("r", " ").split()
    out["n_spatial_axes"] = float(m[0]) if len(m) > 0 and m[0].isdigit() else 0.0
    out["n_reduce_axes"] = float(m[1]) if len(m) > 1 and m[1].isdigit() else 0.0
    names = blocks.split("+") if blocks else []
    anchor = next((i for i, b in enumerate(names) if b.startswith("@")), 0)
    out["n_prologue"] = float(anchor)
    out["n_epilogue"] = float(max(0, len(names) - anchor - 1))
    out["has_pad"] = float(any("pad" in b for b in names[:anchor]))
    nbytes = sum(int(np.prod(s or (1,))) * _DTYPE_BYTES.get(d, 4) for s, d in args)
    out["log_flops"] = _log(flops)
    out["log_bytes"] = _log(nbytes)
    out["intensity"] = _log(flops / nbytes) if nbytes else 0.0
    out["n_args"] = float(len(args))
    shape = list(args[-1][0]) if args else []
    dims = [d for d in shape if d != 1] or [1]
    dims = ([1] * _MAX_OUT_DIMS + dims)[-_MAX_OUT_DIMS:]
    for j, d in enumerate(dims):
        out[f"out_dim{j}"] = _log(d)
    out["log_out_size"] = _log(np.prod(shape or (1,)))
    out["innermost_mod8"] = float(shape[-1] % 8 == 0) if shape else 0.0
    out["innermost_mod16"] = float(shape[-1] % 16 == 0) if shape else 0.0
    out["float32"] = float(bool(args) and args[-1][1] == "float32")
    return out


def pair_features(row: CandidateLike, source: SourceKernel | None) -> dict[str, float]:
    """How the candidate's source relates to its target kernel."""
    out = {"match_anchor": float(row.match == "anchor"), "source_rank": float(row.source_rank or 0),
           "log_source_latency": _log((row.source_latency_s or 0.0) * 1e6)}
    if source is None or not source.args:
        out.update(source_known=0.0, log_flop_ratio=0.0, abs_log_flop_ratio=0.0, source_gflops=0.0,
                   shape_distance=0.0, dims_multiple=0.0, dims_equal=0.0, expected_latency=0.0)
        return out
    t_shape = list(row.target_args[-1][0]) if row.target_args else []
    s_shape = list(source.args[-1][0])
    ratio = math.log2(max(row.flops, 1.0) / max(source.flops, 1.0))
    gflops = source.flops / row.source_latency_s / 1e9 if row.source_latency_s else 0.0
    same_rank = len(t_shape) == len(s_shape)
    pairs = list(zip(t_shape, s_shape)) if same_rank else []
    out.update(
        source_known=1.0, log_flop_ratio=ratio, abs_log_flop_ratio=abs(ratio), source_gflops=_log(gflops),
        shape_distance=sum(abs(math.log2(max(t, 1) / max(s, 1))) for t, s in pairs) if same_rank else 16.0,
        dims_multiple=float(sum(1 for t, s in pairs if s and t % s == 0) / len(pairs)) if pairs else 0.0,
        dims_equal=float(sum(1 for t, s in pairs if t == s) / len(pairs)) if pairs else 0.0,
        # the source's latency scaled to the target's FLOPs: what the heuristic of transfer-tuning assumes
        expected_latency=_log((row.source_latency_s or 0.0) * 1e6 * max(row.flops, 1.0) / max(source.flops, 1.0)),
    )
    return out


RULE_KNOBS = ("channels", "rows", "columns")  # the conv template's register tile, in its trace's split order


def rule_knobs(row: CandidateLike) -> list[float]:
    """A rule instance's register tile (channels, rows, columns): its recorded knobs, else the inner factors of
    the first three two-way SamplePerfectTile decisions of its trace (the conv template's splits); zeros where
    neither says (a flat tile, a literal split of an older row, a donor)."""
    knobs = row.knobs or {}
    if all(isinstance(knobs.get(k), int) for k in RULE_KNOBS):
        return [float(knobs[k]) for k in RULE_KNOBS]
    if row.source_kind != RULE or not row.trace:
        return [0.0] * len(RULE_KNOBS)
    insts, decisions = row.trace
    decided = {int(i): v for i, v in decisions}
    inner = [float(decided[n][1]) for n, inst in enumerate(insts)
             if inst[0] == "SamplePerfectTile" and len(decided.get(n) or []) == 2][:len(RULE_KNOBS)]
    return inner if len(inner) == len(RULE_KNOBS) else [0.0] * len(RULE_KNOBS)


def source_features(row: CandidateLike, schema: str = SCHEMA_VERSION) -> dict[str, float]:
    """What kind of schedule the candidate is (a donor, a rule instance, one of the kernel's design space),
    whether it is one of its rule's fixed tiles, and a rule instance's tile: each knob (log2) and how many
    output values the tile holds (log2 of their product) against the kernel's output width. From schema 3,
    whether the tile is packed (`rules.conv.PackedTile`) or flat, and a conv tile's footprint per reduction
    block (log2): the block's input channels (the whole reduction where the instance has no block), the bytes
    of weights and of input window one register tile reads in it (the window as at stride 1)."""
    kind = row.source_kind
    c, h, w = rule_knobs(row)
    out = {"kind_donor": float(kind == DONOR), "kind_rule": float(kind == RULE),
           "kind_space": float(kind == SPACE), "fixed_rule": float(bool(row.fixed_rule)),
           "knob_known": float(c > 0)}
    for name, v in zip(RULE_KNOBS, (c, h, w)):
        out[f"knob_{name}"] = _log(v)
    out["knob_tile"] = _log(c * h * w)
    width = row.target_args[-1][0][-1] if row.target_args and row.target_args[-1][0] else 0
    out["knob_columns_share"] = w / width if w and width else 0.0
    if int(schema) >= 3:
        knobs = row.knobs or {}
        out["knob_packed"] = float(bool(knobs.get("packed")))  # channel vectors over packed weights
        out["knob_flat"] = float(bool(knobs.get("flat")))
        weight = row.target_args[1][0] if row.target_args and len(row.target_args) > 1 else ()
        conv = c > 0 and len(weight) == 4
        block = float(knobs.get("reduction") or (weight[1] if conv else 0))
        out["knob_reduction"] = _log(block) if conv else 0.0
        out["knob_weight_bytes"] = _log(c * block * weight[2] * weight[3] * 4) if conv else 0.0
        out["knob_input_bytes"] = _log((h + weight[2] - 1) * (w + weight[3] - 1) * block * 4) if conv else 0.0
    return out


def schema_of(feature_version: str) -> str:
    """The schema a feature version names (`Featurizer.version`: "schema3+hw1-vocab..." gives "3")."""
    head = feature_version.split("-", 1)[0].split("+", 1)[0]
    return head[len("schema"):] if head.startswith("schema") else ""


class Featurizer:
    """Turns candidate rows into ranker input. `sources` maps (model, kernel) to its SourceKernel; with
    `hardware`, every row also gets the hardware block (`hardware_features`) of that target."""

    def __init__(self, vocab: Vocabulary, sources: dict[tuple[str, str], SourceKernel] | None = None,
                 hardware: Hardware | None = None, schema: str = SCHEMA_VERSION) -> None:
        if schema not in SCHEMAS:
            raise ValueError(f"feature schema {schema!r} is not one this schedrec makes ({', '.join(SCHEMAS)})")
        self.schema = schema
        self.vocab = vocab
        self.sources = sources or {}
        self.hardware = hardware
        probe = _ProbeRow()
        self._kernel_names = list(kernel_features(probe.class_key, probe.target_args, 1.0))
        self._pair_names = list(pair_features(probe, None))
        self._source_names = list(source_features(probe, schema))
        self._sched_names = list(schedule_summary([[], []]))
        self._hardware_names = list(HARDWARE_NAMES) if hardware is not None else []
        self.context_names = self._kernel_names + self._pair_names + self._source_names + self._hardware_names
        self.tabular_names = (self.context_names + self._sched_names +
                              [f"count_{w}" for w in vocab.words[1:]] + ["n_instructions"])
        self.token_width = 1 + max(N_NUMERIC, len(self.context_names))
        self._lookup_ids = {vocab.id(w) for w in LOOKUP_WORDS} - {vocab.id("<unk>")}

    @property
    def version(self) -> str:
        hw = f"+hw{HARDWARE_VERSION}" if self.hardware is not None else ""
        return f"schema{self.schema}{hw}-vocab{self.vocab.version}.{self.vocab.digest}"

    def _source(self, row: CandidateLike) -> SourceKernel | None:
        return self.sources.get((row.source_model, row.source_kernel))

    def _context(self, row: CandidateLike) -> list[float]:
        k = kernel_features(row.class_key, row.target_args, row.flops)
        p = pair_features(row, self._source(row))
        src = source_features(row, self.schema)
        out = [k[n] for n in self._kernel_names] + [p[n] for n in self._pair_names] + [src[n] for n in self._source_names]
        if self.hardware is not None:
            hw = hardware_features(self.hardware, k, src, schedule_summary(_trace_of(row)))
            out += [hw[n] for n in self._hardware_names]
        return out

    def tabular(self, rows: Iterable[CandidateLike]) -> np.ndarray:
        """One vector per candidate: kernel, pair, schedule summary and token counts. (Values relative to
        the kernel's other candidates, minus their median, were tried: they lowered the leave-one-model-out
        score, so they are not here.)"""
        rows = list(rows)
        out = []
        n_words = len(self.vocab)
        for row in rows:
            ids, _ = trace_tokens(_trace_of(row), self.vocab)
            counts = np.bincount(np.asarray(ids, dtype=np.int64), minlength=n_words)[1:].astype(np.float32)
            s = schedule_summary(row.trace)
            out.append(np.concatenate([np.asarray(self._context(row), dtype=np.float32),
                                       np.asarray([s[n] for n in self._sched_names], dtype=np.float32),
                                       counts, np.asarray([len(ids)], dtype=np.float32)]))
        return np.stack(out) if out else np.zeros((0, len(self.tabular_names)), dtype=np.float32)

    def sequences(self, rows: Iterable[CandidateLike], max_tokens: int = SEQUENCE_TOKENS) -> np.ndarray:
        """(n, 1 + max_tokens, token_width): a context token (id = len(vocab), the kernel and pair
        features), then the trace's tokens without the lookups (`LOOKUP_WORDS`: they name blocks and loops
        and decide nothing; the attention cost grows with the square of the length): column 0 the token id
        (0 = padding), then its numeric values."""
        rows = list(rows)
        out = np.zeros((len(rows), 1 + max_tokens, self.token_width), dtype=np.float32)
        for i, row in enumerate(rows):
            ctx = self._context(row)
            out[i, 0, 0] = len(self.vocab)
            out[i, 0, 1:1 + len(ctx)] = ctx
            ids, nums = trace_tokens(_trace_of(row), self.vocab)
            keep = [j for j, t in enumerate(ids) if t not in self._lookup_ids]
            ids, nums = [ids[j] for j in keep], nums[keep]
            n = min(len(ids), max_tokens)
            out[i, 1:1 + n, 0] = ids[:n]
            out[i, 1:1 + n, 1:1 + N_NUMERIC] = nums[:n]
        return out


def _trace_of(row: CandidateLike) -> list:
    if row.trace is None:
        from .trace_tokens import TraceFeatureError
        raise TraceFeatureError(f"candidate {row.source_model}/{row.source_kernel} has no replayed trace "
                                f"(status {getattr(row, 'status', '?')}): only replayed candidates are ranked")
    return row.trace


@dataclass(frozen=True)
class _ProbeRow:
    """A minimal row for deriving feature names."""

    class_key: str = "matmul/s2r1:@matmul"
    flops: float = 1.0
    target_args: tuple = (((1, 1), "float32"),)
    match: str = "class"
    source_model: str | None = None
    source_kernel: str | None = None
    source_rank: int | None = 0
    source_latency_s: float | None = None
    trace: list | None = None
    knobs: dict | None = None
    source_kind: str | None = DONOR
    fixed_rule: bool = False
