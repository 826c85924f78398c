"""TLP-style token sequences of a MetaSchedule trace: one token per schedule instruction.

A token is a vocabulary id (the instruction kind, refined by what makes kinds differ: the annotation key,
the tile count, a cache's scope) and a fixed-length numeric vector: the instruction's decisions (tile
factors, the unroll value chosen, the compute location), its integer attributes, and the extents of the
loops it touches, as far as the trace itself tells them (a sampled tile fixes the extent of the loop it
splits, a split fixes its outputs' extents, a fuse multiplies them). Values are log2(1 + x) so that
factors of 1 and 512 land in one range. Sequences are cropped or padded to a fixed length with a mask.

Nothing here builds or lowers anything: a token sequence is a pure function of the trace JSON.
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

PAD, UNK = "<pad>", "<unk>"
N_NUMERIC = 10  # numeric values per token
MAX_TOKENS = 96  # longest trace in the shipped matrix: 89 instructions
VOCAB_FILE = Path(__file__).with_name("vocab.json")

# the tile levels of the largest tiling MetaSchedule's CPU rules sample (SSRSRS: 4 spatial, 2 reduction)
_MAX_FACTORS = 4


class TraceFeatureError(ValueError):
    """A trace that cannot be featurized (malformed JSON); the message says where."""


def token_name(inst: list) -> str:
    """The vocabulary word of one instruction."""
    kind, _, attrs, _ = inst
    if kind in ("Annotate", "Unannotate") and attrs:
        return f"{kind}:{attrs[0]}"
    if kind == "SamplePerfectTile" and attrs:
        return f"{kind}:{attrs[0]}"
    if kind in ("CacheRead", "CacheWrite") and len(attrs) > 1:
        return f"{kind}:{attrs[1]}"
    return kind


class Vocabulary:
    """Token words to ids; id 0 pads, id 1 is any word not in the vocabulary (never an error)."""

    def __init__(self, words: list[str], version: str = "1") -> None:
        self.words = [PAD, UNK] + [w for w in words if w not in (PAD, UNK)]
        self.version = version
        self._ids = {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def id(self, word: str) -> int:
        return self._ids.get(word, 1)

    @property
    def digest(self) -> str:
        """Short hash of the words: part of the feature version, so a changed vocabulary is noticed."""
        return hashlib.sha256("\n".join(self.words).encode()).hexdigest()[:8]

    @classmethod
    def build(cls, traces: list[list], version: str = "1") -> "Vocabulary":
        """A vocabulary of every word in `traces`, sorted (deterministic for the same traces)."""
        return cls(sorted({token_name(i) for t in traces for i in t[0]}), version)

    def save(self, path: Path) -> None:
        from recommender.core.fileio import atomic_write_json
        atomic_write_json(str(path), {"version": self.version, "words": self.words[2:]})

    @classmethod
    def load(cls, path: Path = VOCAB_FILE) -> "Vocabulary":
        data = json.loads(Path(path).read_text())
        return cls(list(data["words"]), str(data["version"]))


def _log(x: float) -> float:
    return math.log2(1.0 + abs(float(x)))


def check_shape(trace: Any) -> None:
    """Raise TraceFeatureError unless `trace` is `[[kind, inputs, attrs, outputs], ...], [[index, value], ...]]`.

    Lighter than trace_schema.check_trace (which guards TVM against traces that would crash it): the
    featurizer only needs the shape, and must accept instruction kinds it has never seen."""
    if not (isinstance(trace, (list, tuple)) and len(trace) == 2 and all(isinstance(x, (list, tuple)) for x in trace)):
        raise TraceFeatureError("malformed trace: expected [instructions, decisions]")
    insts, decisions = trace
    for i, inst in enumerate(insts):
        if not (isinstance(inst, (list, tuple)) and len(inst) == 4 and isinstance(inst[0], str)
                and all(isinstance(x, (list, tuple)) for x in inst[1:])):
            raise TraceFeatureError(f"malformed trace: instruction {i} is not [kind, inputs, attrs, outputs]")
    for d in decisions:
        if not (isinstance(d, (list, tuple)) and len(d) == 2 and isinstance(d[0], int)
                and 0 <= d[0] < len(insts)):
            raise TraceFeatureError(f"malformed trace: decision {str(d)[:40]} is not [instruction index, value]")


def trace_tokens(trace: Any, vocab: Vocabulary, check: bool = True) -> tuple[list[int], np.ndarray]:
    """Token ids and an (n_instructions, N_NUMERIC) float32 matrix of a trace; uncropped.

    An instruction kind outside the vocabulary becomes the unknown token (a newer MetaSchedule may add
    kinds); a trace that is not `[instructions, decisions]` of the right shape raises TraceFeatureError."""
    if check:
        check_shape(trace)
    try:
        return _trace_tokens(trace, vocab)
    except (TypeError, ValueError, IndexError, KeyError, OverflowError) as err:
        raise TraceFeatureError(f"malformed trace: {type(err).__name__}: {str(err)[:80]}") from None


def _trace_tokens(trace: Any, vocab: Vocabulary) -> tuple[list[int], np.ndarray]:
    insts, decisions = trace
    decided = {int(i): v for i, v in decisions}
    extent: dict[str, float] = {}  # loop RV -> extent, where the trace fixes it
    value: dict[str, float] = {}  # variable RV -> its sampled value
    ids: list[int] = []
    nums = np.zeros((len(insts), N_NUMERIC), dtype=np.float32)
    for n, inst in enumerate(insts):
        kind, inputs, attrs, outputs = inst
        ids.append(vocab.id(token_name(inst)))
        row = nums[n]
        if kind == "SamplePerfectTile":
            tile = decided.get(n) or []
            for j, f in enumerate(tile[:_MAX_FACTORS]):
                row[j] = _log(f)
            total = float(np.prod(tile)) if tile else 0.0
            row[4] = _log(total)
            row[5] = _log(attrs[1]) if len(attrs) > 1 else 0.0  # max innermost factor
            if inputs and total:
                extent[inputs[0]] = total
            for out, f in zip(outputs, tile):
                value[out] = float(f)
        elif kind == "Split":
            fs = [value.get(x) if isinstance(x, str) else (float(x) if isinstance(x, (int, float)) else None)
                  for x in inputs[1:]]
            for j, f in enumerate(fs[:_MAX_FACTORS]):
                row[j] = _log(f or 0)
            row[4] = _log(extent.get(inputs[0], 0.0))
            row[6] = len(fs)
            for out, f in zip(outputs, fs):
                if f:
                    extent[out] = f
        elif kind == "SampleCategorical":
            cands = attrs[0] if attrs else []
            choice = decided.get(n, 0)
            if not (isinstance(choice, int) and 0 <= choice < len(cands)):
                raise ValueError(f"SampleCategorical decision {str(choice)[:20]} is not an index into {len(cands)}")
            v = cands[choice]
            row[0] = _log(v)
            row[1] = _log(max(cands)) if cands else 0.0
            row[6] = len(cands)
            if outputs:
                value[outputs[0]] = float(v)
        elif kind == "SampleComputeLocation":
            loc = decided.get(n, -1)
            row[0] = float(loc)  # -2 inline, -1 root, else a loop index
            row[1] = 1.0 if loc == -2 else 0.0
            row[2] = 1.0 if loc == -1 else 0.0
        elif kind in ("Annotate",):
            v = inputs[1] if len(inputs) > 1 else 0
            v = value.get(v, 0.0) if isinstance(v, str) and not v.startswith('"') else v
            row[0] = _log(v) if isinstance(v, (int, float)) else 1.0
        elif kind == "Fuse":
            exts = [extent.get(x) for x in inputs]
            row[4] = _log(float(np.prod([e for e in exts if e])) if any(exts) else 0.0)
            row[6] = len(inputs)
            if outputs and all(exts):
                extent[outputs[0]] = float(np.prod(exts))
        elif kind in ("Parallel", "Vectorize", "Unroll"):
            row[4] = _log(extent.get(inputs[0], 0.0)) if inputs else 0.0
        elif kind in ("Reorder", "GetLoops", "GetProducers", "GetConsumers", "GetChildBlocks"):
            row[6] = len(inputs) if kind == "Reorder" else len(outputs)
        elif kind in ("ComputeAt", "ReverseComputeAt", "CacheRead", "CacheWrite", "RFactor"):
            for j, a in enumerate(a for a in attrs if isinstance(a, int)):
                if j < 3:
                    row[7 + j] = float(a)
        row[9] = n / max(1, len(insts))  # position in the trace
    return ids, nums


def token_sequence(trace: Any, vocab: Vocabulary, max_tokens: int = MAX_TOKENS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids[max_tokens] int64, numeric[max_tokens, N_NUMERIC] float32, mask[max_tokens] bool): the trace's
    tokens cropped (keeping the first ones) or padded (id 0, zeros, mask False)."""
    ids, nums = trace_tokens(trace, vocab)
    n = min(len(ids), max_tokens)
    out_ids = np.zeros(max_tokens, dtype=np.int64)
    out_nums = np.zeros((max_tokens, N_NUMERIC), dtype=np.float32)
    mask = np.zeros(max_tokens, dtype=bool)
    out_ids[:n] = ids[:n]
    out_nums[:n] = nums[:n]
    mask[:n] = True
    return out_ids, out_nums, mask


def schedule_summary(trace: Any) -> dict[str, float]:
    """What a trace decides that matters most for speed, as named numbers (for tree models): the anchor's
    tile sizes per level (log2 product over spatial and over reduction loops), the innermost spatial factor
    (the vector loop), the unroll value, parallel and vector extent limits, compute locations."""
    check_shape(trace)
    try:
        return _schedule_summary(trace)
    except (TypeError, ValueError, IndexError, KeyError, OverflowError) as err:
        raise TraceFeatureError(f"malformed trace: {type(err).__name__}: {str(err)[:80]}") from None


def _schedule_summary(trace: Any) -> dict[str, float]:
    insts, decisions = trace
    decided = {int(i): v for i, v in decisions}
    value: dict[str, float] = {}
    spatial = np.zeros(_MAX_FACTORS)
    reduce_ = np.zeros(2)
    out = {"n_spatial_tiles": 0.0, "n_reduce_tiles": 0.0, "innermost_spatial": 0.0, "innermost_mod8": 0.0,
           "innermost_mod16": 0.0, "unroll": 0.0,
           "parallel_limit": 0.0, "vectorize_limit": 0.0, "inline_count": 0.0, "compute_at_loop": 0.0,
           "compute_root": 0.0, "cache_write": 0.0, "rfactor": 0.0, "fused_parallel": 0.0}
    for n, (kind, inputs, attrs, outputs) in enumerate(insts):
        if kind == "SamplePerfectTile":
            tile = decided.get(n) or []
            for o, f in zip(outputs, tile):
                value[o] = float(f)
            logs = [math.log2(max(f, 1)) for f in tile]
            if len(tile) == 4:
                spatial += np.array(logs)
                out["n_spatial_tiles"] += 1
                out["innermost_spatial"] = logs[-1]
                # the last spatial loop's innermost factor becomes the vector loop: full AVX2 / AVX-512
                # float32 lanes or not
                out["innermost_mod8"] = float(int(tile[-1]) % 8 == 0)
                out["innermost_mod16"] = float(int(tile[-1]) % 16 == 0)
            elif len(tile) == 2:
                reduce_ += np.array(logs)
                out["n_reduce_tiles"] += 1
        elif kind == "SampleCategorical":
            cands = attrs[0] if attrs else []
            c = decided.get(n, 0)
            if not (isinstance(c, int) and 0 <= c < len(cands)):
                raise ValueError(f"SampleCategorical decision {str(c)[:20]} is not an index into {len(cands)}")
            if outputs:
                value[outputs[0]] = float(cands[c])
        elif kind == "Annotate" and attrs:
            v = inputs[1] if len(inputs) > 1 else 0
            v = value.get(v, 0.0) if isinstance(v, str) else float(v) if isinstance(v, (int, float)) else 0.0
            key = attrs[0]
            if key.endswith("unroll_explicit") or key.endswith("unroll_implicit"):
                out["unroll"] = _log(v)
            elif key.endswith(".parallel"):
                out["parallel_limit"] = _log(v)
            elif key.endswith(".vectorize"):
                out["vectorize_limit"] = _log(v)
        elif kind == "ComputeInline" or kind == "ReverseComputeInline":
            out["inline_count"] += 1
        elif kind == "SampleComputeLocation":
            loc = decided.get(n, -1)
            out["compute_at_loop"] = float(loc) if loc >= 0 else 0.0
            out["compute_root"] += 1.0 if loc == -1 else 0.0
        elif kind == "CacheWrite":
            out["cache_write"] += 1
        elif kind == "RFactor":
            out["rfactor"] += 1
        elif kind == "Parallel":
            out["fused_parallel"] += 1
    for j in range(_MAX_FACTORS):
        out[f"spatial_tile_l{j}"] = float(spatial[j])
    for j in range(2):
        out[f"reduce_tile_l{j}"] = float(reduce_[j])
    out["spatial_inner_two"] = float(spatial[2] + spatial[3])
    out["spatial_outer"] = float(spatial[0])
    return out
