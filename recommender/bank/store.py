"""The bank: per hardware target, the MetaSchedule tuning records of the models tuned there.

Layout (one folder per model, `models/<target-key>/bank/<model>/`):
- `database_workload.json.gz`, `database_tuning_record.json.gz`: a MetaSchedule JSONDatabase, gzipped
  (one JSON value a line, exactly as `ms.database.JSONDatabase` writes them),
- `meta.json`: the model spec, target, kernels (name, weight, FLOPs, class, FLOP share), which kernels are
  tuned, trials and time spent per kernel, and the measurer settings.

Tuning works in a scratch MetaSchedule work dir (`.work/`, restored from the bank at every start) and packs
it into the bank after every kernel, so a killed run loses at most the kernel it was tuning and resumes
from the last kernel it finished; the bank files are only ever replaced whole, by rename.
"""
from __future__ import annotations

import fcntl
import gzip
import os
import shutil
import time
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..core.errors import BankError
from ..core.fileio import atomic_write_json, gzip_writer, open_text, read_json, read_json_lines, read_lines, replacing

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
META_FILE = "meta.json"
FAILED_RUN_SECS = 1e9  # MetaSchedule stores failed candidates with 1e10 s


@contextmanager
def locked(folder: Path, what: str) -> Iterator[None]:
    """Hold an exclusive lock on `folder` (another run writing it is refused with a clear message). A folder this
    lock made is taken away again when the body fails before writing anything into it (a model that does not
    import leaves no empty output folder behind)."""
    made = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ".lock"
    failed = False
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as err:
            raise BankError(f"{folder} is in use by another schedrec run ({what}); wait for it or stop it") from err
        try:
            yield
        except BaseException:
            failed = True
            raise
        finally:
            if failed and made and [p.name for p in folder.iterdir()] == [".lock"]:
                path.unlink()
                folder.rmdir()
            fcntl.flock(f, fcntl.LOCK_UN)


# -- reading --------------------------------------------------------------------------------------
def _db_file(folder: Path, name: str) -> Path:
    gz = folder / (name + ".gz")
    return gz if gz.exists() else folder / name


@dataclass
class BankRecord:
    """One tuning record in plain Python form (no TVM objects)."""

    workload_index: int
    trace_json: list
    run_secs: list[float]
    target: dict | str
    args_info: list

    @property
    def ok(self) -> bool:
        return bool(self.run_secs) and max(self.run_secs) < FAILED_RUN_SECS

    @property
    def latency(self) -> float:
        return sorted(self.run_secs)[len(self.run_secs) // 2] if self.ok else float("inf")


def read_records(folder: Path) -> tuple[list, list[BankRecord]]:
    """(workload JSON values, records) of a bank model folder, validated for shape."""
    workloads = read_json_lines(_db_file(folder, WORKLOAD_FILE))
    raw = read_json_lines(_db_file(folder, RECORD_FILE))
    return workloads, [parse_record(r, n, len(workloads), folder) for n, r in enumerate(raw, 1)]


def parse_record(value: object, n: int, workloads: int, where: object) -> BankRecord:
    """Record line `n` (from 1) of a model whose workload file has `workloads` lines, validated for shape."""
    try:
        wi, body = int(value[0]), value[1]
        trace, run_secs, target, args_info = body[0], body[1], body[2], body[3]
        if not (0 <= wi < workloads) or not isinstance(trace, list) or len(trace) != 2:
            raise ValueError("bad workload index or trace")
        return BankRecord(wi, trace, [float(x) for x in (run_secs or [])], target, args_info)
    except (TypeError, ValueError, IndexError, KeyError) as err:
        raise BankError(f"corrupt record {n} in {where}: {err}") from err


def count_records(folder: Path) -> int:
    """How many tuning records a bank model folder holds: its record file's lines, none of them parsed."""
    return sum(1 for line in read_lines(_db_file(folder, RECORD_FILE), "bank file") if line.strip())


def read_meta(folder: Path) -> dict:
    path = folder / META_FILE
    if not path.exists():
        raise BankError(f"missing {path}: not a bank model folder")
    meta = read_json(path, error=BankError)
    if not isinstance(meta, dict) or "model" not in meta or "target_key" not in meta:
        raise BankError(f"corrupt {path}: missing model or target_key")
    return meta


def bank_models(bank_dir: Path) -> list[Path]:
    if not bank_dir.is_dir():
        raise BankError(f"no bank at {bank_dir}")
    return sorted(p for p in bank_dir.iterdir() if p.is_dir() and (p / META_FILE).exists())


# -- writing --------------------------------------------------------------------------------------
def pack(work_dir: str, folder: Path) -> None:
    """Gzip a MetaSchedule work dir's database files into the bank folder (atomic per file)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in (WORKLOAD_FILE, RECORD_FILE):
        src = os.path.join(work_dir, name)
        if not os.path.exists(src):
            continue
        with replacing(str(folder / (name + ".gz"))) as tmp, open(src, "rb") as fin, gzip_writer(tmp) as fout:
            shutil.copyfileobj(fin, fout)


def unpack(folder: Path, work_dir: str) -> None:
    """Restore a MetaSchedule work dir from the bank folder (to resume tuning)."""
    os.makedirs(work_dir, exist_ok=True)
    for name in (WORKLOAD_FILE, RECORD_FILE):
        src = _db_file(folder, name)
        if src.exists():
            try:
                with open_text(src) as fin, open(os.path.join(work_dir, name), "w", encoding="utf-8") as fout:
                    shutil.copyfileobj(fin, fout)
            except (EOFError, UnicodeDecodeError, zlib.error, gzip.BadGzipFile) as err:
                raise BankError(f"corrupt or truncated bank file {src}: {err}") from err


def write_meta(folder: Path, meta: dict) -> None:
    atomic_write_json(str(folder / META_FILE), meta)


def is_url(bank: str | os.PathLike) -> bool:
    """True for `<protocol>://...` other than `file://` (those need fsspec: `location.py`)."""
    text = str(bank)
    return "://" in text and not text.startswith("file://")


def wait_while_paused(bank_dir: Path | str, log) -> None:
    """Between kernels, wait while `<bank>/PAUSE` exists (lets a benchmark or a test run have the machine
    to itself); the bank tuner, replay and the transfer matrix all honour it. A bank at a URL is shared by
    machines, so it holds none: nothing waits on it."""
    if is_url(bank_dir):
        return
    pause = Path(bank_dir) / "PAUSE"
    if pause.exists():
        log(f"paused: {pause} exists; remove it to continue")
        while pause.exists():
            time.sleep(5)
        log("resumed")


def now() -> float:
    return time.time()
