"""MetaSchedule PerStoreFeature summaries for every transfer-matrix candidate that has a trace.

Each candidate's replayed trace is applied to its target kernel again (with the kernel's postprocessors,
`recommender.transfer.replay.apply_replayed`), PerStoreFeature is extracted (it lowers the schedule) and summarised
over stores (`featurize.per_store.summarize`: sum | max | mean | log2(1 + n_stores), 493 float32 values).
Output, `<matrix>/../features/per_store.npz` (compressed):
- `X`: (n, 493) float32, one row per candidate;
- `keys`: a JSON string, the list of row keys in the order of `X`:
  [target_model, target_kernel, source_model, source_kernel, source_rank, match];
- `n_stores`: (n,) int32, stores per candidate;
- `failed`: a JSON string, [{"key": [...], "error": "..."}] for candidates whose features could not be made;
- `meta`: a JSON string: feature_version, target, columns, timing totals (seconds per candidate).
Load it with `featurize`-free code:
    z = np.load(path); X = z["X"]; keys = json.loads(str(z["keys"]))
The file is rewritten atomically every few kernels; a killed run resumes with the kernels it lacks. The
bank's PAUSE file (`<matrix>/../bank/PAUSE`) is honoured between kernels.

    python scripts/per_store_features.py                     # all matrix files (resumable)
    python scripts/per_store_features.py --max-kernels 2 --out /tmp/check.npz   # a quick check
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from featurize.per_store import FEATURE_VERSION, N_PER_STORE, SUMMARY_DIM, extractor, per_store_features, summarize, summary_names
from recommender.bank.store import wait_while_paused  # noqa: E402
from recommender.core.errors import SchedrecError, run_script  # noqa: E402
from recommender.core.fileio import replacing  # noqa: E402
from recommender.core.rows import KEY_FIELDS, CandidateRow, key_from_json  # noqa: E402
from recommender.target.spec import parse_target  # noqa: E402
from recommender.core.row_files import read_rows  # noqa: E402


class Store:
    """What has been computed so far: summary rows by key, failures, timing totals; saved atomically."""

    def __init__(self, path: Path, feature_version: str, target_config: dict) -> None:
        self.path = path
        self.rows: dict[tuple, np.ndarray] = {}
        self.n_stores: dict[tuple, int] = {}
        self.failed: dict[tuple, str] = {}
        self.timing = {"candidates": 0, "replay_s": 0.0, "extract_s": 0.0, "wall_s": 0.0}
        self.meta = {"feature_version": feature_version, "target": target_config}
        if path.exists():
            self._load(feature_version)

    def _load(self, feature_version: str) -> None:
        try:
            with np.load(self.path, allow_pickle=False) as z:
                meta = json.loads(str(z["meta"]))
                keys = [key_from_json(k) for k in json.loads(str(z["keys"]))]
                X, n = np.asarray(z["X"]), np.asarray(z["n_stores"])
                failed = json.loads(str(z["failed"]))
        except (OSError, ValueError, KeyError) as err:
            raise SchedrecError(f"cannot resume from {self.path} ({err}); move it away to start again") from err
        if meta.get("feature_version") != feature_version:
            raise SchedrecError(f"{self.path} holds features {meta.get('feature_version')!r}, this code makes "
                                f"{feature_version!r}: move it away to start again")
        self.rows = {k: X[i] for i, k in enumerate(keys)}
        self.n_stores = {k: int(n[i]) for i, k in enumerate(keys)}
        self.failed = {key_from_json(f["key"]): f["error"] for f in failed}
        self.timing.update(meta.get("timing", {}))

    def done(self, key: tuple) -> bool:
        return key in self.rows or key in self.failed

    def save(self) -> None:
        keys = list(self.rows)
        X = np.stack([self.rows[k] for k in keys]) if keys else np.zeros((0, SUMMARY_DIM), np.float32)
        n = self.timing["candidates"]
        meta = dict(self.meta, n_per_store=N_PER_STORE, summary_dim=SUMMARY_DIM, key_fields=list(KEY_FIELDS),
                    columns=summary_names(), timing=self.timing,
                    seconds_per_candidate={"replay": self.timing["replay_s"] / n if n else None,
                                           "extract": self.timing["extract_s"] / n if n else None,
                                           "total": (self.timing["replay_s"] + self.timing["extract_s"]) / n
                                           if n else None})
        failed = [{"key": list(k), "error": e} for k, e in self.failed.items()]
        with replacing(str(self.path)) as tmp, open(tmp, "wb") as f:
            np.savez_compressed(f, X=X.astype(np.float32), keys=np.array(json.dumps([list(k) for k in keys])),
                                n_stores=np.array([self.n_stores[k] for k in keys], dtype=np.int32),
                                failed=np.array(json.dumps(failed)), meta=np.array(json.dumps(meta)))


def kernels_of(matrix_dir: Path, models: list[str] | None) -> list[tuple[tuple, list[CandidateRow]]]:
    """(target_model, target_kernel) -> its rows, in file order, for every matrix file."""
    files = sorted(matrix_dir.glob("*.jsonl.gz"))
    if models:
        files = [f for f in files if f.name[:-len(".jsonl.gz")] in models]
    if not files:
        raise SchedrecError(f"no transfer-matrix files in {matrix_dir}" + (f" for {', '.join(models)}" if models else ""))
    by_kernel: dict = defaultdict(list)
    for f in files:
        for r in read_rows(f):
            r = r if isinstance(r, CandidateRow) else CandidateRow.from_json(r)
            by_kernel[r.kernel_key].append(r)
    return list(by_kernel.items())


def featurize_kernel(rows: list[CandidateRow], todo: list[CandidateRow], target: object, ext: object,
                     store: Store) -> None:
    """Replay and featurize the `todo` candidates of one kernel into `store`."""
    from tvm.s_tir import meta_schedule as ms

    from recommender.transfer.replay import ReplayFailure, apply_replayed, postprocs_for
    default = next((r for r in rows if r.is_default and r.workload is not None), None)
    if default is None:
        for r in todo:
            store.failed[r.key] = "the kernel has no default row with a workload"
        return
    mod = ms.database.Workload.from_json(default.workload).mod
    postprocs = postprocs_for(mod, target)
    for r in todo:
        key = r.key
        t0 = time.perf_counter()
        try:
            sch = apply_replayed(r.trace, mod, target, postprocs).sch
        except ReplayFailure as err:
            store.failed[key] = f"replay: {err}"
            continue
        t1 = time.perf_counter()
        try:
            (mat,) = per_store_features([sch], target, workload_mod=mod, extractor_obj=ext)
        except Exception as err:  # TVM lowering errors surface as Python exceptions
            store.failed[key] = f"extract: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            continue
        t2 = time.perf_counter()
        store.rows[key] = summarize(mat)
        store.n_stores[key] = mat.shape[0]
        store.timing["candidates"] += 1
        store.timing["replay_s"] += t1 - t0
        store.timing["extract_s"] += t2 - t1


def run(a: argparse.Namespace) -> Store:
    from tqdm import tqdm

    from recommender.core.tvm_setup import load_tensor_intrinsics
    load_tensor_intrinsics()
    spec = parse_target(a.target)
    summary_file = a.matrix / "summary.json"
    if summary_file.exists():
        key = json.loads(summary_file.read_text()).get("target_key")
        if key and key != spec.key and not a.any_target:
            raise SchedrecError(f"{a.matrix} was measured on {key}; this target is {spec.key} (--any-target to go on)")
    target = spec.tvm()
    out = a.out or a.matrix.parent / "features" / "per_store.npz"
    store = Store(out, FEATURE_VERSION, spec.config)
    kernels = kernels_of(a.matrix, a.models.split(",") if a.models else None)
    if a.max_kernels:
        kernels = kernels[:a.max_kernels]
    todo = [(k, rows, [r for r in rows if r.replayed and not store.done(r.key)]) for k, rows in kernels]
    todo = [t for t in todo if t[2]]
    n_todo = sum(len(t[2]) for t in todo)
    print(f"{out}: {len(store.rows)} candidates done, {len(store.failed)} failed; {n_todo} to do in "
          f"{len(todo)} kernels", file=sys.stderr, flush=True)
    ext = extractor()
    bank_dir = a.matrix.parent / "bank"
    last_save, since_save = time.time(), 0
    t_start = time.time()
    wall0 = store.timing["wall_s"]
    bar = tqdm(total=n_todo, unit="cand", file=sys.stderr, mininterval=1 if sys.stderr.isatty() else 30)
    try:
        for (model, kernel), rows, cand in todo:
            wait_while_paused(bank_dir, lambda m: print(m, file=sys.stderr, flush=True))
            bar.set_postfix_str(f"{model} {kernel[:40]}", refresh=False)
            featurize_kernel(rows, cand, target, ext, store)
            bar.update(len(cand))
            since_save += 1
            if since_save >= a.save_every or time.time() - last_save > 120:
                store.timing["wall_s"] = wall0 + time.time() - t_start
                store.save()
                last_save, since_save = time.time(), 0
    finally:
        bar.close()
        store.timing["wall_s"] = wall0 + time.time() - t_start
        store.save()
    return store


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--matrix", type=Path, default=Path("models/llvm-znver3-2c/transfer"))
    p.add_argument("--out", type=Path, default=None, help="default: <matrix>/../features/per_store.npz")
    p.add_argument("--target", default="native")
    p.add_argument("--any-target", action="store_true", help="featurize a matrix measured on another target")
    p.add_argument("--models", default="", help="comma-separated target models (default: all files)")
    p.add_argument("--max-kernels", type=int, default=0, help="only the first N kernels (a quick check)")
    p.add_argument("--save-every", type=int, default=5, help="kernels between saves")
    a = p.parse_args()
    signal.signal(signal.SIGTERM, _interrupt)  # a kill saves what is done (the finally in run)
    store = run(a)
    t = store.timing
    n = t["candidates"]
    print(json.dumps({"out": str(a.out or a.matrix.parent / "features" / "per_store.npz"),
                      "candidates": len(store.rows), "failed": len(store.failed), "dim": SUMMARY_DIM,
                      "seconds_per_candidate": {"replay": round(t["replay_s"] / n, 4) if n else None,
                                                "extract": round(t["extract_s"] / n, 4) if n else None,
                                                "total": round((t["replay_s"] + t["extract_s"]) / n, 4) if n else None},
                      "wall_s": round(t["wall_s"], 1)}, indent=1))


if __name__ == "__main__":
    run_script(main)
