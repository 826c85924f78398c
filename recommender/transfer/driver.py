"""The one resumable per-kernel loop that exhaustive replay, the transfer matrix and budgeted transfer share.

A run's rows live in one gzipped JSON-lines file, rewritten atomically after each kernel, so a killed run
loses at most the kernel it was measuring. `RowFile` keeps them; `drive` walks the kernels: a kernel with
rows is rebuilt from them (`resume`), the others wait while the bank is PAUSEd and go through `step`,
whose rows are saved at once. Progress is a tqdm bar on stderr.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Iterable, Iterator, TypeVar

from ..bank.store import wait_while_paused
from ..core.row_files import kernel_rows, rows_to_resume, write_rows
from ..core.rows import CandidateRow
from .choice import KernelChoice

T = TypeVar("T")
Log = Callable[[str], None]


def stderr_log(msg: str) -> None:
    print(msg, file=sys.stderr)


class RowFile:
    """The rows of one run, grouped by target kernel; `add` appends a kernel's rows and saves the file."""

    def __init__(self, path: Path, remeasure: tuple[str, ...] = (), log: Log = stderr_log) -> None:
        self.path = Path(path)
        self.rows: list[CandidateRow] = rows_to_resume(self.path, remeasure, log)
        self.by_kernel: dict[str, list[CandidateRow]] = {}
        for r in self.rows:
            self.by_kernel.setdefault(r.target_kernel, []).append(r)

    def add(self, choice: KernelChoice, model: str, tuned_best_s: float | None = None) -> None:
        rows = kernel_rows(choice, model, tuned_best_s=tuned_best_s)
        self.rows += rows
        self.by_kernel[choice.kernel.name] = rows
        write_rows(self.path, self.rows)

    def put(self, kernel: str, rows: list[CandidateRow], order: list[str]) -> None:
        """Save a kernel's rows that came back from elsewhere (a cluster worker) in any order: they go before
        the rows of the first kernel that follows it in `order`, so a run whose kernels finish out of order
        writes the file a run in order writes."""
        at = {name: i for i, name in enumerate(order)}
        mine = at[kernel]
        pos = next((i for i, r in enumerate(self.rows) if at.get(r.target_kernel, -1) > mine), len(self.rows))
        self.rows[pos:pos] = rows
        self.by_kernel[kernel] = list(rows)
        write_rows(self.path, self.rows)

    def extend(self, choice: KernelChoice, model: str, tuned_best_s: float | None = None) -> int:
        """Add the candidate rows of `choice` (its default row left out) after the rows its kernel has, and
        save the file; returns how many were added."""
        name = choice.kernel.name
        new = [r for r in kernel_rows(choice, model, tuned_best_s=tuned_best_s) if not r.is_default]
        last = max(i for i, r in enumerate(self.rows) if r.target_kernel == name)
        self.rows[last + 1:last + 1] = new
        self.by_kernel[name] = self.by_kernel[name] + new
        write_rows(self.path, self.rows)
        return len(new)


def drive(items: Iterable[T], rows: RowFile, model: str, name: Callable[[T], str],
          step: Callable[[T], KernelChoice], resume: Callable[[T, list[CandidateRow]], KernelChoice | None],
          pause_dir: Path, desc: str, tuned_best_s: Callable[[T], float | None] = lambda item: None,
          log: Log = stderr_log) -> Iterator[KernelChoice]:
    """Yield each item's choice: rebuilt from its saved rows if it has some (`resume` may return None to
    skip it), else measured by `step` and saved before it is yielded."""
    from tqdm import tqdm
    items = list(items)
    for item in tqdm(items, desc=desc, unit="kernel", file=sys.stderr, disable=not items):
        saved = rows.by_kernel.get(name(item))
        if saved is not None:
            choice = resume(item, saved)
            if choice is not None:
                yield choice
            continue
        wait_while_paused(pause_dir, log)
        choice = step(item)
        rows.add(choice, model, tuned_best_s(item))
        yield choice
