"""The bank's index: what a pool lookup needs to know about every record group, without reading the records.

Layout, beside the model folders (a dot folder, so no model name can collide with it):
- `.index/models.json`: the format, per model folder its model name, target key, the stamp of its bank files
  when it was indexed (`location.BankFiles.model_stamps`) and its classes; per class key its anchor key, its
  two files and its group count. Written last, so it names only files that were written before it.
- `.index/classes/<sha1 of the class key>.jsonl.gz`: a line per record group of the class (model, folder,
  workload, kernel, weight, FLOPs, arguments, the group's valid records fastest first and their latencies),
  sorted by (model, folder, workload): what the anchor fallback and a refresh read.
- `.index/classes/<sha1>.order.jsonl.gz`: a line per valid record of the class, in the order of the pool's
  round-robin over donor models (`class_files`).

Why: a pool takes its class's donors round-robin over donor models and stops at the cap, so a lookup reads the
head of its class's order file (the cap's sources; anchors: the first cap donor models of the group files) and
its cost does not grow with the bank. The records are read only for the donors a transfer replays
(`IndexedBank.donor`).

A stale index (a model folder added, removed or rewritten since: its stamp differs) is refreshed, re-reading
only the changed models; a damaged one is rebuilt from the model folders. The index is derived data: losing
it loses nothing, and nothing but this module writes it.
"""
from __future__ import annotations

import gzip
import hashlib
import heapq
import io
import json
import sys
import zlib
from dataclasses import dataclass
from typing import Callable, Iterator

from featurize.tir_structure import anchor_key

from ..core.errors import BankError, SchedrecError
from .groups import RecordGroup, record_groups, workload_mod
from .location import BankFiles
from .store import RECORD_FILE, WORKLOAD_FILE, parse_record, read_meta, read_records

INDEX_DIR = ".index"
MODELS_FILE = f"{INDEX_DIR}/models.json"
FORMAT = 1


class IndexDamaged(BankError):
    """An index file that cannot be read as written (it is rebuilt, never trusted)."""


@dataclass(frozen=True)
class IndexedGroup:
    """A record group as the index holds it: which model folder it is in, and the group."""

    model: str
    folder: str
    group: RecordGroup

    def to_json(self) -> dict:
        g = self.group
        return {"model": self.model, "folder": self.folder, "workload": g.workload, "kernel": g.kernel,
                "class_key": g.class_key, "weight": g.weight, "flops": g.flops, "args": g.args,
                "records": list(g.records), "latencies": list(g.latencies)}

    @classmethod
    def from_json(cls, d: dict) -> "IndexedGroup":
        return cls(str(d["model"]), str(d["folder"]),
                   RecordGroup(int(d["workload"]), str(d["kernel"]), str(d["class_key"]), int(d["weight"]),
                               None if d["flops"] is None else float(d["flops"]), list(d["args"]),
                               tuple(int(i) for i in d["records"]), tuple(float(x) for x in d["latencies"])))

    @property
    def order(self) -> tuple[str, str, int]:
        return self.model, self.folder, self.group.workload


def shard_name(class_key: str) -> str:
    """The class's groups, by (model, folder, workload)."""
    return f"{INDEX_DIR}/classes/{hashlib.sha1(class_key.encode()).hexdigest()[:20]}.jsonl.gz"


def order_name(class_key: str) -> str:
    """The class's sources in round-robin order (`class_files`)."""
    return shard_name(class_key).replace(".jsonl.gz", ".order.jsonl.gz")


@dataclass(frozen=True)
class IndexedSource:
    """One valid record of a class, as a line of its order file: `[model, folder, workload, kernel, rank,
    latency_s, record, pos]` (`pos`: its place in its model's list of the class's sources)."""

    model: str
    folder: str
    workload: int
    kernel: str
    rank: int
    latency_s: float
    record: int
    pos: int


def class_bound(groups: list[IndexedGroup]) -> int:
    """The most groups one model has in the class: a source of rank < top_n is at a place < top_n x this."""
    per_model: dict[str, int] = {}
    for g in groups:
        per_model[g.model] = per_model.get(g.model, 0) + 1
    return max(per_model.values(), default=0)


def class_files(class_key: str, groups: list[IndexedGroup]) -> dict[str, bytes]:
    """The two files of a class: its groups by (model, folder, workload), and its sources in the order of a
    round-robin over donor models: each model's sources sorted by (rank, latency) as `BankIndex` sorts them
    (ties by folder and workload), then by (place in its model's list, model). Leaving out models or ranks
    >= top_n drops entries without reordering the rest, so a capped class pool is a prefix of this file. A
    model's ranks below top_n sit at places below top_n x its group count, which bounds how far a lookup reads
    (`class_bound`)."""
    rows = sorted(groups, key=lambda g: g.order)
    per_model: dict[str, list[tuple]] = {}
    for g in rows:
        for rank, (record, latency) in enumerate(zip(g.group.records, g.group.latencies)):
            per_model.setdefault(g.model, []).append((rank, latency, g.folder, g.group.workload, g.group.kernel, record))
    order = sorted((pos, model, s) for model, sources in per_model.items()
                   for pos, s in enumerate(sorted(sources, key=lambda s: s[:4])))
    pack = lambda lines: gzip.compress(b"".join(json.dumps(x).encode() + b"\n" for x in lines), mtime=0)  # noqa: E731
    return {shard_name(class_key): pack(g.to_json() for g in rows),
            order_name(class_key): pack([model, folder, wi, kernel, rank, latency, record, pos]
                                        for pos, model, (rank, latency, folder, wi, kernel, record) in order)}


def has_index(files: BankFiles) -> bool:
    return files.exists(MODELS_FILE)


def _say(line: str) -> None:
    print(f"bank index: {line}", file=sys.stderr)


class IndexedBank:
    """An opened, fresh bank index: models, classes, and the groups of given classes in donor-model order."""

    def __init__(self, files: BankFiles, log: Callable[[str], None] = _say) -> None:
        self.files = files
        self.log = log
        self.models: dict[str, dict] = {}  # folder -> {"model", "target_key", "stamp", "classes"}
        self.classes: dict[str, dict] = {}  # class key -> {"anchor", "shard", "order", "groups"}
        self._unsaved: dict[str, bytes] = {}  # shards refreshed but not writable (a read-only bank)
        self._read_cache: dict[str, tuple[list[bytes], list[bytes]]] = {}  # folder -> (record, workload lines)
        self._mods: dict[tuple[str, int], object] = {}
        self.reread = self.refresh()  # the model folders (re)indexed on opening

    # -- opening and refreshing -------------------------------------------------------------------
    def _read_models(self) -> tuple[dict, dict] | None:
        """(models, classes) of models.json; None when there is none; IndexDamaged when it cannot be read."""
        if not self.files.exists(MODELS_FILE):
            return None
        try:
            data = json.loads(self.files.read(MODELS_FILE))
            if data.get("format") != FORMAT:
                raise ValueError(f"format {data.get('format')!r}, this schedrec reads {FORMAT}")
            models, classes = data["models"], data["classes"]
            for m in models.values():
                m["model"], m["target_key"], m["stamp"], m["classes"]  # noqa: B018 (the keys must be there)
            for c in classes.values():
                c["anchor"], c["shard"], c["order"], c["most_groups"]  # noqa: B018
            return models, classes
        except KeyError as err:
            raise IndexDamaged(f"damaged bank index {self.files}/{MODELS_FILE}: no {err} entry") from err
        except (ValueError, TypeError, AttributeError) as err:
            raise IndexDamaged(f"damaged bank index {self.files}/{MODELS_FILE}: {err}") from err

    def refresh(self, rebuild: bool = False) -> list[str]:
        """Bring the index up to date with the model folders (re-reading only the changed ones; all of them
        with `rebuild` or a damaged models.json); returns the folders re-read."""
        stamps = self.files.model_stamps()
        old = None
        if not rebuild:
            try:
                old = self._read_models()
            except IndexDamaged as err:
                self.log(f"{err}; rebuilding it from the model folders")
        self.models, self.classes = old if old is not None else ({}, {})
        if old is None:
            self._unsaved = {}
        changed = [f for f, s in stamps.items() if self.models.get(f, {}).get("stamp") != s]
        removed = [f for f in self.models if f not in stamps]
        if old is not None and not changed and not removed:
            return []
        with self.files.locked(INDEX_DIR):
            try:
                self._update(stamps, changed, removed, fresh=old is None)
            except IndexDamaged as err:  # a shard it had to rewrite: start again from the folders
                self.log(f"{err}; rebuilding it from the model folders")
                self.models, self.classes, self._unsaved = {}, {}, {}
                changed = list(stamps)
                self._update(stamps, changed, [], fresh=True)
        return changed

    def _update(self, stamps: dict[str, list], changed: list[str], removed: list[str], fresh: bool) -> None:
        gone = set(changed) | set(removed)
        affected = {c for f in gone for c in self.models.get(f, {}).get("classes", ())}  # their old classes
        for f in removed:
            del self.models[f]
        new_groups: dict[str, list[IndexedGroup]] = {}
        for folder in changed:
            local = self.files.local_folder(folder)
            meta = read_meta(local)
            workloads, records = read_records(local)
            groups = [IndexedGroup(meta["model"], folder, g) for g, _ in record_groups(local, meta, workloads, records)]
            for g in groups:
                new_groups.setdefault(g.group.class_key, []).append(g)
            self.models[folder] = {"model": meta["model"], "target_key": meta["target_key"], "stamp": stamps[folder],
                                   "classes": sorted({g.group.class_key for g in groups})}
            self._read_cache.pop(folder, None)
        affected |= set(new_groups)
        shards: dict[str, bytes] = {}
        dropped: list[str] = []
        for c in sorted(affected):
            kept = [] if fresh or c not in self.classes else \
                [g for g in self._read_shard(c) if g.folder not in gone]
            rows = kept + new_groups.get(c, [])
            if rows:
                shards.update(class_files(c, rows))
                self.classes[c] = {"anchor": anchor_key(c), "shard": shard_name(c), "order": order_name(c),
                                   "groups": len(rows), "most_groups": class_bound(rows)}
            elif c in self.classes:
                info = self.classes.pop(c)
                dropped += [info["shard"], info["order"]]
        if self._save(shards):
            for name in dropped:  # after models.json stopped naming them
                self.files.remove(name)

    def _save(self, shards: dict[str, bytes]) -> bool:
        """Shards first, models.json last; a bank that cannot be written keeps the refreshed index in memory."""
        models = json.dumps({"format": FORMAT, "models": dict(sorted(self.models.items())),
                             "classes": dict(sorted(self.classes.items()))}, indent=1).encode() + b"\n"
        try:
            for name, data in shards.items():
                self.files.write(name, data)
            self.files.write(MODELS_FILE, models)
            return True
        except SchedrecError as err:
            self.log(f"could not save the refreshed bank index ({err}); using it for this run only")
            self._unsaved.update(shards)
            return False

    # -- lookups ----------------------------------------------------------------------------------
    def _file_lines(self, name: str) -> Iterator[bytes]:
        """The lines of an index file, decompressed as far as the caller iterates; IndexDamaged if unreadable."""
        try:
            raw = io.BytesIO(self._unsaved[name]) if name in self._unsaved else self.files.open(name)
            with raw, gzip.GzipFile(fileobj=raw) as f:
                yield from f
        except BankError as err:
            raise IndexDamaged(f"damaged bank index file {self.files}/{name}: {err}") from err
        except (OSError, EOFError, zlib.error) as err:
            raise IndexDamaged(f"damaged bank index file {self.files}/{name}: {err}") from err

    def _read_shard(self, class_key: str) -> Iterator[IndexedGroup]:
        """The class's groups in (model, folder, workload) order, read as far as the caller iterates."""
        name = self.classes[class_key]["shard"]
        for line in self._file_lines(name):
            try:
                g = IndexedGroup.from_json(json.loads(line))
            except (ValueError, KeyError, TypeError) as err:
                raise IndexDamaged(f"damaged bank index file {self.files}/{name}: {err}") from err
            if g.group.class_key != class_key:
                raise IndexDamaged(f"damaged bank index file {self.files}/{name}: a group of another class")
            yield g

    def ordered(self, class_key: str, exclude: tuple[str, ...] = (), top_n: int = 1,
                limit: int | None = None) -> list[IndexedSource]:
        """The first `limit` (all: None) sources of the class's round-robin over donor models outside `exclude`,
        ranks below `top_n` only: read from the head of its order file, so the cost follows `limit`, not the
        bank's size. A damaged file: the index is rebuilt and read again."""
        try:
            return self._ordered(class_key, exclude, top_n, limit)
        except IndexDamaged as err:
            self.log(f"{err}; rebuilding the index from the model folders")
            self.refresh(rebuild=True)
            return self._ordered(class_key, exclude, top_n, limit)

    def _ordered(self, class_key: str, exclude: tuple[str, ...], top_n: int, limit: int | None) -> list[IndexedSource]:
        if class_key not in self.classes or top_n < 1 or limit == 0:
            return []
        name, out = self.classes[class_key]["order"], []
        end = top_n * self.classes[class_key]["most_groups"]  # no source of rank < top_n lies at or past it
        lines = self._file_lines(name)
        try:
            for line in lines:
                try:
                    s = IndexedSource(*json.loads(line))
                except (ValueError, TypeError) as err:
                    raise IndexDamaged(f"damaged bank index file {self.files}/{name}: {err}") from err
                if s.pos >= end:
                    break
                if s.rank < top_n and s.model not in exclude:
                    out.append(s)
                    if limit is not None and len(out) >= limit:
                        break
        finally:
            lines.close()
        return out

    def groups(self, class_keys: list[str], exclude: tuple[str, ...] = (),
               model_limit: int | None = None) -> list[IndexedGroup]:
        """The groups of `class_keys` outside the models `exclude`, in (model, folder, workload) order, from
        the first `model_limit` donor models only (all with None). A damaged shard: the index is rebuilt
        from the model folders and read again."""
        try:
            return self._groups(class_keys, exclude, model_limit)
        except IndexDamaged as err:
            self.log(f"{err}; rebuilding the index from the model folders")
            self.refresh(rebuild=True)
            return self._groups(class_keys, exclude, model_limit)

    def _groups(self, class_keys: list[str], exclude: tuple[str, ...], model_limit: int | None) -> list[IndexedGroup]:
        streams = [self._read_shard(c) for c in class_keys if c in self.classes]
        out: list[IndexedGroup] = []
        models: set[str] = set()
        try:
            for g in heapq.merge(*streams, key=lambda g: g.order):
                if g.model in exclude:
                    continue
                if g.model not in models:
                    if model_limit is not None and len(models) >= model_limit:
                        break
                    models.add(g.model)
                out.append(g)
        finally:
            for s in streams:
                s.close()
        return out

    def classes_of_anchor(self, anchor: str) -> list[str]:
        return [c for c, info in self.classes.items() if info["anchor"] == anchor]

    # -- the records of a donor -------------------------------------------------------------------
    def _model_lines(self, folder: str) -> tuple[list[bytes], list[bytes]]:
        """(record lines, workload lines) of a model folder, non-blank, read once per process."""
        if folder not in self._read_cache:
            def lines(name: str) -> list[bytes]:
                rel = f"{folder}/{name}.gz" if self.files.exists(f"{folder}/{name}.gz") else f"{folder}/{name}"
                data = self.files.read(rel)
                try:
                    text = gzip.decompress(data) if rel.endswith(".gz") else data
                except (OSError, EOFError, zlib.error) as err:
                    raise BankError(f"corrupt or truncated bank file {self.files}/{rel}: {err}") from err
                return [line for line in text.splitlines() if line.strip()]
            self._read_cache[folder] = (lines(RECORD_FILE), lines(WORKLOAD_FILE))
        return self._read_cache[folder]

    def donor(self, folder: str, workload: int, record: int) -> tuple[list, object]:
        """(trace JSON, the source kernel's TIR module) of one indexed record, read from its model's files."""
        records, workloads = self._model_lines(folder)
        where = f"{self.files}/{folder}"
        stale = f"the bank index does not match {where} (record {record + 1}); run `schedrec bank index --rebuild`"
        try:
            value = json.loads(records[record])
        except (IndexError, ValueError) as err:
            raise BankError(stale) from err
        r = parse_record(value, record + 1, len(workloads), where)
        if r.workload_index != workload or not r.ok:
            raise BankError(stale)
        if (folder, workload) not in self._mods:
            try:
                wl = json.loads(workloads[workload])
            except ValueError as err:
                raise BankError(f"corrupt workload {workload} in {where}: {err}") from err
            self._mods[(folder, workload)] = workload_mod(wl, where, workload)
        return r.trace_json, self._mods[(folder, workload)]


def index_bank(bank: object, rebuild: bool = False, log: Callable[[str], None] = _say) -> IndexedBank:
    """Create or refresh the index of the bank at `bank` (a Path or URL); what every add to a bank calls."""
    from .location import bank_files
    index = IndexedBank(bank_files(bank), log)
    if rebuild:
        index.reread = index.refresh(rebuild=True)
    return index


def refresh_after_add(bank: object, log: Callable[[str], None] = _say) -> None:
    """What every add to a bank calls last: the index made or refreshed. The model is in the bank already,
    so a failure here only says so (the next reader refreshes a stale index anyway)."""
    try:
        index_bank(bank, log=log)
    except SchedrecError as err:
        log(f"the bank index was not updated ({err}); `schedrec bank index` makes it again")
