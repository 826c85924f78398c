"""Candidates for a kernel: bank schedules of kernels of the same class, replayed onto it.

The bank index reads every bank model once (plain JSON, plus one TIR module per workload) and groups the
valid records by kernel class. For a target kernel, the candidates are the best `top_n` records of each
source kernel of its class (top_n=1 is the original transfer-tuning), optionally leaving out whole source
models (leave-one-model-out), capped and spread across source models; replaying them drops duplicates.
Where a class has no donor, sources of the same anchor op with another epilogue (equal anchor key) can be
replayed with MetaSchedule's anchor-trace application instead (`match="anchor"`).
"""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

from featurize.tir_structure import anchor_key, class_key

from ..bank.store import bank_models, read_meta, read_records
from ..core.errors import BankError
# CLASS, ANCHOR: how a source matches the target kernel (also imported from here)
from ..core.rows import ANCHOR, CLASS, OK
from ..frontend.kernels import Kernel
from ..measure.args import kernel_args
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
    """Valid bank records grouped by kernel class."""

    def __init__(self, bank_dir: Path) -> None:
        from tvm.s_tir import meta_schedule as ms
        self.by_class: dict[str, list[SourceSchedule]] = defaultdict(list)
        self.by_anchor: dict[str, list[SourceSchedule]] = defaultdict(list)
        self.kernels: dict[str, list[BankKernel]] = {}  # by model
        self.models: list[str] = []
        self.target_keys: dict[str, str] = {}
        for folder in bank_models(bank_dir):
            meta = read_meta(folder)
            workloads, records = read_records(folder)
            model = meta["model"]
            self.models.append(model)
            self.target_keys[model] = meta["target_key"]
            entries = meta.get("kernels", {})
            names = {(k["class_key"], json.dumps(k["args"])): name for name, k in entries.items()}
            best: dict[int, list] = defaultdict(list)
            for r in records:
                if r.ok:
                    best[r.workload_index].append(r)
            self.kernels[model] = []
            for wi, recs in sorted(best.items()):
                try:
                    mod = ms.database.Workload.from_json(workloads[wi]).mod
                except Exception as err:
                    raise BankError(f"{folder}: workload {wi} is not a valid MetaSchedule workload: "
                                    f"{str(err).strip().splitlines()[-1] if str(err).strip() else err}") from err
                key = class_key(mod)
                args = json.dumps([{"shape": list(s), "dtype": d} for s, d in kernel_args(mod)])
                name = names.get((key, args), f"workload_{wi}")
                sources = [SourceSchedule(model, name, rank, r.latency, r.trace_json, mod, key)
                           for rank, r in enumerate(sorted(recs, key=lambda r: r.latency))]
                self.kernels[model].append(BankKernel(model, name, mod, key,
                                                      int(entries.get(name, {}).get("weight", 1)), sources))
                self.by_class[key].extend(sources)
                self.by_anchor[anchor_key(key)].extend(sources)

    def warnings(self, target_key: str) -> list[str]:
        """At most one line: which bank models were measured on another target than `target_key`."""
        return other_cpu_note(self.target_keys, target_key)

    def sources_for(self, kernel: Kernel, top_n: int = 1, exclude_models: tuple[str, ...] = (),
                    cap: int | None = None, match: str = CLASS) -> list[SourceSchedule]:
        """The best `top_n` records of every same-class source kernel outside `exclude_models`, in a
        round-robin over source models (so a cap keeps every model represented), best ranks first.
        With match=ANCHOR: the sources of the same anchor key but another class (other epilogue)."""
        if match == CLASS:
            found = self.by_class.get(kernel.class_key, [])
        elif match == ANCHOR:
            found = [s for s in self.by_anchor.get(anchor_key(kernel.class_key), []) if s.class_key != kernel.class_key]
        else:
            raise ValueError(f"unknown match {match!r}")
        pool = [replace(s, match=match) for s in found if s.rank < top_n and s.model not in exclude_models]
        return _round_robin(pool, cap)

    def pool_for(self, kernel: Kernel, top_n: int = 1, exclude_models: tuple[str, ...] = (),
                 cap: int | None = None, min_class_models: int = 2) -> list[SourceSchedule]:
        """The donors to replay first: the same-class sources, joined by the same-anchor ones (another
        epilogue) when the class sources come from fewer than `min_class_models` models, since one model's
        schedules of a shape can all be poor ones (ResNet-18's residual 3x3 convs had only RegNet's, 3-5x
        slower than its own). Round-robin over models, class models first, so that a cap keeps each one."""
        same = self.sources_for(kernel, top_n, exclude_models, match=CLASS)
        if len({s.model for s in same}) >= min_class_models:
            return same[:cap] if cap else same
        return _round_robin(same, cap, then=self.sources_for(kernel, top_n, exclude_models, match=ANCHOR))


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
