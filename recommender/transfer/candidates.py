"""Candidates for a kernel: bank schedules of kernels of the same class, replayed onto it.

`BankIndex` groups the bank's valid records by kernel class: through the bank's index file where it has one
(`recommender/bank/index.py`: a lookup reads only its classes' index shards, up to the cap, and a donor's trace
and TIR module are read when it is replayed), else by reading every bank model once (plain JSON, plus one TIR
module per workload), as before the index existed. Both give the same sources in the same order. For a target kernel, the candidates are the best `top_n` records of each
source kernel of its class (top_n=1 is the original transfer-tuning), optionally leaving out whole source
models (leave-one-model-out), capped and spread across source models; replaying them drops duplicates.
Where a class has no donor, sources of the same anchor op with another epilogue (equal anchor key) can be
replayed with MetaSchedule's anchor-trace application instead (`match="anchor"`).
"""
from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Callable

from featurize.tir_structure import anchor_key, class_key

from ..bank.groups import record_groups
from ..bank.index import IndexedBank, has_index
from ..bank.location import bank_files, bank_location
from ..bank.store import bank_models, read_meta, read_records
# CLASS, ANCHOR: how a source matches the target kernel (also imported from here)
from ..core.rows import ANCHOR, CLASS, OK
from ..frontend.kernels import Kernel
from ..target.folders import other_cpu_note
from .replay import ReplayFailure, Replayed, replay_anchor_trace, replay_isolated_many, replay_trace


@dataclass
class SourceSchedule:
    """One bank record that can be replayed onto kernels of its class."""

    model: str
    kernel: str  # task name of the source kernel in its model ("workload_<i>" if not found in meta)
    rank: int  # 0 = the source kernel's fastest record
    latency_s: float
    trace_json: list
    source_mod: object  # the source kernel's TIR module (for block renaming)
    class_key: str = ""
    match: str = CLASS  # set per query: CLASS, or ANCHOR for an anchor-only donor
    # an indexed source's (trace_json, source_mod), read on first use; None: they are set
    load: Callable[[], tuple[list, object]] | None = field(default=None, compare=False, repr=False)

    def loaded(self) -> "SourceSchedule":
        """This source with its trace and TIR module (an indexed source reads them from its model's files); a
        trace or module set on it already (`replace(source, trace_json=...)`) is kept."""
        if self.load is None:
            return self
        trace, mod = self.load()
        return replace(self, trace_json=trace if self.trace_json is None else self.trace_json,
                       source_mod=mod if self.source_mod is None else self.source_mod, load=None)


@dataclass
class BankKernel:
    """One tuned kernel of a bank model with its valid records, fastest first."""

    model: str
    name: str
    mod: object
    class_key: str
    weight: int
    sources: list[SourceSchedule]

    @property
    def best_s(self) -> float | None:
        return self.sources[0].latency_s if self.sources else None


@dataclass
class Candidate:
    source: SourceSchedule
    replayed: Replayed | None
    status: str  # OK or a replay failure reason (recommender.core.rows)
    error: str = ""


class BankIndex:
    """Valid bank records grouped by kernel class.

    `use_index`: None reads the bank's index where it has one (a URL bank always: its index is built if
    missing), True builds the index if missing, False reads every model as before the index. A stale index is
    refreshed first (`bank.index`). `kernels` (every kernel with its loaded records: the matrix's needs) reads the
    whole bank either way."""

    _indexed: IndexedBank | None = None
    _kernels: dict | None = None

    def __init__(self, bank_dir: Path | str, use_index: bool | None = None) -> None:
        where = bank_location(bank_dir)
        self.models: list[str] = []
        self.target_keys: dict[str, str] = {}
        if use_index is None:
            use_index = not isinstance(where, Path) or has_index(bank_files(where))
        if use_index:
            self._indexed = IndexedBank(bank_files(where))
            for m in self._indexed.models.values():
                self.models.append(m["model"])
                self.target_keys[m["model"]] = m["target_key"]
        else:
            self._scan([*bank_models(where)])

    def _scan(self, folders: list[Path]) -> None:
        """Read every model folder: its records, fastest first per kernel, grouped by class and anchor."""
        self.by_class: dict[str, list[SourceSchedule]] = defaultdict(list)
        self.by_anchor: dict[str, list[SourceSchedule]] = defaultdict(list)
        self._kernels = {}  # by model
        self.models, self.target_keys = [], {}
        for folder in folders:
            meta = read_meta(folder)
            workloads, records = read_records(folder)
            model = meta["model"]
            self.models.append(model)
            self.target_keys[model] = meta["target_key"]
            self._kernels[model] = []
            for g, mod in record_groups(folder, meta, workloads, records):
                sources = [SourceSchedule(model, g.kernel, rank, latency, records[i].trace_json, mod, g.class_key)
                           for rank, (i, latency) in enumerate(zip(g.records, g.latencies))]
                self._kernels[model].append(BankKernel(model, g.kernel, mod, g.class_key, g.weight, sources))
                self.by_class[g.class_key].extend(sources)
                self.by_anchor[anchor_key(g.class_key)].extend(sources)

    @property
    def kernels(self) -> Mapping[str, list[BankKernel]]:
        """Every bank kernel with its records, by model (an indexed bank reads a model when first asked for it,
        so a matrix worker reads its target model only)."""
        if self._kernels is None:
            self._kernels = _ModelKernels(self._indexed)
        return self._kernels

    def warnings(self, target_key: str) -> list[str]:
        """At most one line: which bank models were measured on another target than `target_key`."""
        return other_cpu_note(self.target_keys, target_key)

    def sources_for(self, kernel: Kernel, top_n: int = 1, exclude_models: tuple[str, ...] = (),
                    cap: int | None = None, match: str = CLASS) -> list[SourceSchedule]:
        """The best `top_n` records of every same-class source kernel outside `exclude_models`, in a
        round-robin over source models (so a cap keeps every model represented), best ranks first.
        With match=ANCHOR: the sources of the same anchor key but another class (other epilogue)."""
        return self._sources(kernel, top_n, exclude_models, cap, match, cap or None)

    def _sources(self, kernel: Kernel, top_n: int, exclude_models: tuple[str, ...], cap: int | None, match: str,
                 limit: int | None) -> list[SourceSchedule]:
        """`sources_for`; an indexed bank reads only as far as the first `limit` sources of the round-robin
        (all: None): the head of the class's order file, or the anchor classes' groups of `limit` donor models."""
        if match not in (CLASS, ANCHOR):
            raise ValueError(f"unknown match {match!r}")
        if self._indexed is not None:
            return _round_robin(self._indexed_pool(kernel, top_n, tuple(exclude_models), match, limit), cap)
        if match == CLASS:
            found = self.by_class.get(kernel.class_key, [])
        else:
            found = [s for s in self.by_anchor.get(anchor_key(kernel.class_key), []) if s.class_key != kernel.class_key]
        pool = [replace(s, match=match) for s in found if s.rank < top_n and s.model not in exclude_models]
        return _round_robin(pool, cap)

    def _indexed_pool(self, kernel: Kernel, top_n: int, exclude: tuple[str, ...], match: str,
                      limit: int | None) -> list[SourceSchedule]:
        ix = self._indexed
        if match == CLASS:
            return [SourceSchedule(s.model, s.kernel, s.rank, s.latency_s, None, None, kernel.class_key, match,
                                   load=partial(ix.donor, s.folder, s.workload, s.record))
                    for s in ix.ordered(kernel.class_key, exclude, top_n, limit)]
        keys = [c for c in ix.classes_of_anchor(anchor_key(kernel.class_key)) if c != kernel.class_key]
        return [SourceSchedule(g.model, g.group.kernel, rank, latency, None, None, g.group.class_key, match,
                               load=partial(ix.donor, g.folder, g.group.workload, i))
                for g in ix.groups(keys, exclude, limit)
                for rank, (i, latency) in enumerate(zip(g.group.records[:max(top_n, 0)], g.group.latencies))]

    def pool_for(self, kernel: Kernel, top_n: int = 1, exclude_models: tuple[str, ...] = (),
                 cap: int | None = None, min_class_models: int = 2) -> list[SourceSchedule]:
        """The donors to replay first: the same-class sources, joined by the same-anchor ones (another
        epilogue) when the class sources come from fewer than `min_class_models` models, since one model's
        schedules of a shape can all be poor ones (ResNet-18's residual 3x3 convs had only RegNet's, 3-5x
        slower than its own). Round-robin over models, class models first, so that a cap keeps each one."""
        # a capped pool holds the class round-robin's first `cap` sources at most (in their order, anchors or
        # not), and its first round has one per model: the first `min_class_models` tell whether that many
        # models have the class
        limit = max(cap, min_class_models) if cap else None
        same = self._sources(kernel, top_n, exclude_models, None, CLASS, limit)
        if len({s.model for s in same}) >= min_class_models:
            return same[:cap] if cap else same
        return _round_robin(same, cap, then=self._sources(kernel, top_n, exclude_models, None, ANCHOR, cap or None))


class _ModelKernels(Mapping):
    """An indexed bank's kernels by model, each model's folders read on first access."""

    def __init__(self, index: IndexedBank) -> None:
        self._index, self._read = index, {}
        self._folders: dict[str, list[str]] = {}
        for folder, m in index.models.items():
            self._folders.setdefault(m["model"], []).append(folder)

    def __getitem__(self, model: str) -> list[BankKernel]:
        if model not in self._read:
            whole = BankIndex.__new__(BankIndex)
            whole._scan([self._index.files.local_folder(f) for f in self._folders[model]])  # KeyError: no model
            self._read[model] = whole._kernels[model]
        return self._read[model]

    def __iter__(self) -> Iterator[str]:
        return iter(self._folders)

    def __len__(self) -> int:
        return len(self._folders)


def _round_robin(pool: list[SourceSchedule], cap: int | None,
                 then: list[SourceSchedule] = ()) -> list[SourceSchedule]:
    """`pool` (and then `then`, whose models queue after the pool's), one record per source model in turn,
    best ranks first, at most `cap`."""
    queues = []
    for part in (pool, then):
        per_model: dict[str, list[SourceSchedule]] = defaultdict(list)
        for s in sorted(part, key=lambda s: (s.rank, s.latency_s)):
            per_model[s.model].append(s)
        queues += [per_model[m] for m in sorted(per_model)]
    ordered: list[SourceSchedule] = []
    while any(queues):
        for q in queues:
            if q:
                ordered.append(q.pop(0))
    return ordered[:cap] if cap else ordered


def replay_candidates(kernel: Kernel, sources: list[SourceSchedule], target: object,
                      isolated: object = None) -> list[Candidate]:
    """Replay each source onto the kernel; identical replayed traces are kept once (the first source).
    With `isolated` (a Measurer), each replay runs in its build worker: one that crashes TVM or hangs
    becomes a failed candidate (replay_crash, replay_timeout) and the next goes on in a fresh worker."""
    sources = [s.loaded() for s in sources]
    if isolated is not None:  # in the build workers, in parallel
        replays = replay_isolated_many(isolated, [(s.trace_json, s.source_mod, s.match == ANCHOR) for s in sources],
                                       kernel.mod)
    else:
        from .replay import postprocs_for
        postprocs = postprocs_for(kernel.mod, target) if sources else None
        replays = [_replay_here(s, kernel, target, postprocs) for s in sources]
    seen: set[str] = set()
    out = []
    for src, r in zip(sources, replays):
        if isinstance(r, ReplayFailure):
            out.append(Candidate(src, None, r.reason, r.message))
            continue
        fingerprint = json.dumps(r.trace_json, sort_keys=True)
        if fingerprint in seen:
            continue
        seen.add(fingerprint)
        out.append(Candidate(src, r, OK))
    return out


def _replay_here(src: SourceSchedule, kernel: Kernel, target: object, postprocs: list | None) -> object:
    """A replay in this process: the Replayed, or the ReplayFailure it ended with."""
    replay = replay_anchor_trace if src.match == ANCHOR else replay_trace
    try:
        return replay(src.trace_json, src.source_mod, kernel.mod, target, postprocs)
    except ReplayFailure as err:
        return err
