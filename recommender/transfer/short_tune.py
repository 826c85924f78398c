"""A short MetaSchedule search of one kernel's own design space: the fallback of a heavy kernel without donors.

Random design-space samples stand in well for small kernels, poorly for convolutions: RegNet's grouped 3x3
convs (no donor of their class or anchor in the bank) ran at 20 ms with the best of 4 samples and 2.3 ms with
64 tuned trials. For a kernel that holds a real share of the model's FLOPs and has no donor, a few dozen
trials of evolutionary search (cost model on, measured by schedrec's measurer) are worth their minute.

The search's fastest records become the kernel's candidates, as if a bank model named SHORT_TUNE had given
them: they are replayed onto the kernel, output-checked and measured like any other candidate.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from ..core.rows import SAMPLED
from ..frontend.kernels import Kernel
from ..measure import Measurer
from .candidates import SourceSchedule

SHORT_TUNE = "(short tune)"  # the source model of a short search's candidates
MIN_FLOP_SHARE = 0.01  # the kernels worth a search: as the bank tunes those holding 1% of the model's FLOPs
# convs and matmuls are worth one from a quarter of that: samples and loop rules run them at a few GFLOP/s
# (RegNet's last 1088-channel grouped convs, 0.8% of its FLOPs each: 14 ms in loop-rule loops, 34% of its time)
DENSE_KINDS = ("conv2d", "group_conv2d", "depthwise_conv2d", "matmul", "batch_matmul")
MIN_DENSE_FLOP_SHARE = 0.0025


def short_tune(kernel: Kernel, measurer: Measurer, target: object, trials: int, keep: int = 4,
               population_size: int = 128) -> list[SourceSchedule]:
    """Search the kernel's design space for `trials` measured trials; its `keep` fastest valid records, best
    first, as sources (model SHORT_TUNE, match SAMPLED). Empty if nothing valid was found."""
    from tvm.s_tir import meta_schedule as ms

    from ..bank.tune import quiet_metaschedule, search_kernel
    quiet_metaschedule()
    with tempfile.TemporaryDirectory(prefix="schedrec-short-tune-") as work:
        # a stop signal in the search ends the process; the kernels finished before are saved
        search_kernel(kernel, target, measurer, work, ms.database.JSONDatabase(work_dir=work), trials,
                      trials_per_iter=16, population_size=population_size)
        records = _valid_records(Path(work) / "database_tuning_record.json")
    return [SourceSchedule(SHORT_TUNE, kernel.name, rank, latency, trace, kernel.mod, kernel.class_key,
                           match=SAMPLED)
            for rank, (latency, trace) in enumerate(records[:keep])]


def _valid_records(path: Path) -> list[tuple[float, list]]:
    """(median seconds, trace JSON) of a MetaSchedule JSON database's valid records, fastest first."""
    out = []
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        trace, run_secs = json.loads(line)[1][:2]
        secs = sorted(float(x) for x in run_secs or [])
        if secs and secs[-1] < 1e9:  # MetaSchedule writes 1e10 for a failed run
            out.append((secs[len(secs) // 2], trace))
    return sorted(out, key=lambda r: r[0])


def trials_per_kernel(kernels: list[Kernel], trials: int) -> dict[str, int]:
    """`trials` for each kernel holding at least MIN_FLOP_SHARE of the model's FLOPs (MIN_DENSE_FLOP_SHARE for
    a conv or matmul), 0 for the others (a search where no donor replays is worth it there; small kernels do
    well with random samples)."""
    from ..frontend.kernels import flop_shares
    return {k.name: trials if share >= (MIN_DENSE_FLOP_SHARE if k.kind in DENSE_KINDS else MIN_FLOP_SHARE) else 0
            for k, share in zip(kernels, flop_shares(kernels))}
