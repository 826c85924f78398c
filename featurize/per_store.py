"""MetaSchedule's own schedule features (PerStoreFeature), for the "MetaSchedule XGBoost" baseline ranker.

`per_store_features` runs `ms.feature_extractor.PerStoreFeature` on postprocessed schedules: it lowers each
schedule and gives one row per BufferStore statement (a (n_stores, 164) float32 matrix with the default
settings: 57 loop/compute features, 18 x 5 buffer-access features, 10 arithmetic-intensity-curve samples and
7 allocation/outer-loop features; the values are already log-scaled by TVM, `slog(x) = sign(x) log2(|x|+1)`).

Tree models need one fixed-length vector per candidate; `summarize` reduces the store axis to
`[sum | max | mean | log2(1 + n_stores)]`, 3 * 164 + 1 = 493 values (SUMMARY_DIM):
- sum: MetaSchedule's XGBModel predicts a candidate's score as the *sum* of its per-store predictions
  ("PackSum"), so the total over stores is the closest fixed-length view of what it sees;
- max: the dominant store (the anchor block: conv/matmul) without dilution by cheap epilogue stores;
- mean: a size-free average, so kernels with different numbers of fused epilogue stores stay comparable;
- log2(1 + n_stores): how many stores there are (the mean and the sum differ by that factor).
A schedule with no stores gives zeros. This is a deviation from MetaSchedule's XGBModel, which trains on the
per-store rows themselves with its pack-sum objective; the summary keeps the stored data small and lets any
tabular ranker use it.
"""
from __future__ import annotations

import time
from typing import Iterable, Sequence

import numpy as np

# extractor settings (MetaSchedule's defaults); changing any of them changes FEATURE_VERSION
BUFFERS_PER_STORE = 5
ARITH_INTENSITY_SAMPLES = 10
CACHE_LINE_BYTES = 64
N_PER_STORE = 57 + 18 * BUFFERS_PER_STORE + ARITH_INTENSITY_SAMPLES + 7  # 164
SUMMARY_PARTS = ("sum", "max", "mean")
SUMMARY_DIM = len(SUMMARY_PARTS) * N_PER_STORE + 1  # 493
FEATURE_VERSION = (f"per_store-v1:tvm0.27:bps{BUFFERS_PER_STORE}-ai{ARITH_INTENSITY_SAMPLES}-cl{CACHE_LINE_BYTES}"
                   f":{','.join(SUMMARY_PARTS)},log2_1p_n_stores")


def extractor() -> object:
    """A PerStoreFeature extractor with this module's settings (workload features off, as in ms's XGBModel)."""
    from tvm.s_tir import meta_schedule as ms
    return ms.feature_extractor.PerStoreFeature(buffers_per_store=BUFFERS_PER_STORE,
                                                arith_intensity_curve_num_samples=ARITH_INTENSITY_SAMPLES,
                                                cache_line_bytes=CACHE_LINE_BYTES, extract_workload=False)


def _schedule(sch_or_mod: object) -> object:
    from tvm.s_tir import Schedule
    return sch_or_mod if isinstance(sch_or_mod, Schedule) else Schedule(sch_or_mod)


def per_store_features(sch_mods: Sequence[object], target: object, workload_mod: object | None = None,
                       extractor_obj: object | None = None, timings: list | None = None) -> list[np.ndarray]:
    """PerStoreFeature matrices, one (n_stores, N_PER_STORE) float32 array per candidate, in order.

    `sch_mods`: postprocessed `tvm.s_tir.Schedule`s, or IRModules (wrapped in a Schedule as they are: pass the
    postprocessed module, e.g. `apply_replayed(...).mod`). `target`: a tvm Target. `workload_mod`: the
    unscheduled kernel for the TuneContext (defaults to the first candidate's module; PerStoreFeature only
    reads it when workload features are on). Candidates are extracted one at a time on one thread; when
    `timings` is a list, the seconds each one took are appended to it (extraction lowers the schedule).
    """
    from recommender.core.tvm_setup import load_tensor_intrinsics
    load_tensor_intrinsics()  # TuneContext imports them, slowly without this
    from tvm.s_tir import meta_schedule as ms
    schs = [_schedule(s) for s in sch_mods]
    if not schs:
        return []
    ext = extractor_obj if extractor_obj is not None else extractor()
    ctx = ms.TuneContext(mod=workload_mod if workload_mod is not None else schs[0].mod, target=target,
                         num_threads=1)
    out = []
    for sch in schs:
        t0 = time.perf_counter()
        cand = ms.MeasureCandidate(sch, ms.arg_info.ArgInfo.from_entry_func(sch.mod, remove_preproc=True))
        (feat,) = ext.extract_from(ctx, [cand])
        arr = np.asarray(feat.numpy(), dtype=np.float32).reshape(-1, N_PER_STORE)
        if timings is not None:
            timings.append(time.perf_counter() - t0)
        out.append(arr)
    return out


def summarize(per_store: np.ndarray) -> np.ndarray:
    """One candidate's (n_stores, N_PER_STORE) matrix -> its SUMMARY_DIM float32 vector (see module doc)."""
    m = np.asarray(per_store, dtype=np.float64).reshape(-1, N_PER_STORE)
    if m.shape[0] == 0:
        return np.zeros(SUMMARY_DIM, dtype=np.float32)
    v = np.concatenate([m.sum(axis=0), m.max(axis=0), m.mean(axis=0), [np.log2(1.0 + m.shape[0])]])
    return v.astype(np.float32)


def summarize_all(mats: Iterable[np.ndarray]) -> np.ndarray:
    """Stack of `summarize` for many candidates: (n, SUMMARY_DIM) float32."""
    rows = [summarize(m) for m in mats]
    return np.stack(rows) if rows else np.zeros((0, SUMMARY_DIM), dtype=np.float32)


def summary_names() -> list[str]:
    """Column names of the summary vector: `<part>:f<index>` and `log2_1p_n_stores`."""
    return [f"{part}:f{i}" for part in SUMMARY_PARTS for i in range(N_PER_STORE)] + ["log2_1p_n_stores"]
