"""The physical anchor: this CPU's measured FMA peak, against the GFLOP/s of the largest conv and matmul kernels
of the held-out models under their exhaustive-replay schedules and PyTorch's on the same shapes.

Peak: an FMA loop (12 independent accumulator vectors, AVX2 or AVX-512 by what the CPU has), compiled with
the system C compiler and run on one thread and on every core at once (threads through ctypes, which releases
the GIL); the best of 5 runs each, since interference only slows the loop (the committed 2026-11-30 figure was
the median of runs in which 4 of 5 ran at one core's speed: 101.8 against 194.3 GFLOP/s). Kernels: the heaviest conv2d and matmul kernels (weight x FLOPs) of each held-out model in
models/<key>/heldout/, with the latency their chosen schedule had in that run; PyTorch runs the same op
(conv2d with the stride and padding its shapes imply, or a linear layer) with the target's thread count.

    python benchmarks/peak_gflops.py      (keep the machine otherwise idle)
writes benchmarks/results/<target-key>/peak_gflops.json and .md.
"""
from __future__ import annotations

import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from recommender.core.fileio import atomic_write_json, atomic_write_text  # noqa: E402
from results_dir import results_dir  # noqa: E402

ITERS = 20_000_000
CHAINS = 12

C_SOURCE = r"""
#include <immintrin.h>
float fma_loop(long iters) {
#ifdef __AVX512F__
  __m512 a[CHAINS], b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int j = 0; j < CHAINS; j++) a[j] = _mm512_set1_ps((float)j);
  for (long i = 0; i < iters; i++) {
#pragma GCC unroll 16
    for (int j = 0; j < CHAINS; j++) a[j] = _mm512_fmadd_ps(a[j], b, c);
  }
  float s = 0; for (int j = 0; j < CHAINS; j++) s += _mm512_reduce_add_ps(a[j]); return s;
#else
  __m256 a[CHAINS], b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int j = 0; j < CHAINS; j++) a[j] = _mm256_set1_ps((float)j);
  for (long i = 0; i < iters; i++) {
#pragma GCC unroll 16
    for (int j = 0; j < CHAINS; j++) a[j] = _mm256_fmadd_ps(a[j], b, c);
  }
  float out[8], s = 0;
  for (int j = 0; j < CHAINS; j++) { _mm256_storeu_ps(out, a[j]); for (int l = 0; l < 8; l++) s += out[l]; }
  return s;
#endif
}
int lanes(void) {
#ifdef __AVX512F__
  return 16;
#else
  return 8;
#endif
}
"""


def _fma_runs(so: object, threads: int, n_lanes: int, runs: int = 5) -> list[float]:
    """GFLOP/s of `runs` runs of `threads` threads each running the FMA loop (2 FLOPs per lane per FMA)."""
    out = []
    for _ in range(runs):
        workers = [threading.Thread(target=so.fma_loop, args=(ITERS,)) for _ in range(threads)]
        t0 = time.perf_counter()
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        out.append(round(threads * ITERS * CHAINS * n_lanes * 2 / (time.perf_counter() - t0) / 1e9, 1))
    return out


def fma_peak(cores: int, avx512: bool) -> dict:
    """The FMA loop's GFLOP/s on one thread and on `cores` threads. Interference (another process, the host
    moving a vCPU) only ever slows the loop, so the peak is the best run; the median is kept beside it."""
    with tempfile.TemporaryDirectory() as tmp:
        src, lib = Path(tmp) / "fma.c", Path(tmp) / "fma.so"
        src.write_text(C_SOURCE)
        flags = ["-mavx512f", "-mfma"] if avx512 else ["-mavx2", "-mfma"]
        subprocess.run(["cc", "-O3", "-funroll-loops", "-shared", "-fPIC", f"-DCHAINS={CHAINS}", *flags, str(src), "-o", str(lib)],
                       check=True)
        so = ctypes.CDLL(str(lib))
        so.fma_loop.argtypes, so.fma_loop.restype = [ctypes.c_long], ctypes.c_float
        n_lanes = so.lanes()
        from recommender.measure.host_lock import exclusive
        with exclusive("the FMA peak loop"):
            one, all_cores = _fma_runs(so, 1, n_lanes), _fma_runs(so, cores, n_lanes)
    return {"gflops": max(all_cores), "median_gflops": statistics.median(all_cores), "runs": all_cores,
            "one_thread_gflops": max(one), "one_thread_runs": one, "lanes": n_lanes, "threads": cores}


def measured_peak(target_key: str) -> float | None:
    """The FMA peak (GFLOP/s, all cores) that benchmarks/results/<target_key>/peak_gflops.json holds;
    None if the peak was not measured on that target."""
    path = results_dir(target_key, create=False) / "peak_gflops.json"
    if not path.exists():
        return None
    peak = json.loads(path.read_text())
    return peak["peak"]["gflops"] if peak["target_key"] == target_key else None


def heaviest(report: dict, kind: str) -> dict | None:
    ks = [k for k in report["kernels"] if k["class_key"].startswith(kind + "/") and k.get("latency_s")]
    return max(ks, key=lambda k: k["flops"] * k["weight"], default=None)


def torch_seconds(kind: str, args: list, threads: int) -> float:
    """Median seconds of PyTorch running the kernel's anchor op on its shapes."""
    import torch
    import torch.nn.functional as F

    from recommender.measure.host_lock import exclusive
    torch.set_num_threads(threads)
    shapes = [tuple(a["shape"]) for a in args]
    with torch.no_grad():
        if kind == "conv2d":
            x, w, out = torch.randn(*shapes[0]), torch.randn(*shapes[1]), shapes[-1]
            stride = max(1, round(shapes[0][2] / out[2]))
            pad = max(0, ((out[2] - 1) * stride + w.shape[2] - shapes[0][2] + 1) // 2)
            groups = shapes[0][1] // shapes[1][1]  # a grouped conv's weight holds its group's input channels
            op = lambda: F.conv2d(x, w, stride=stride, padding=pad, groups=groups)  # noqa: E731
            assert tuple(op().shape) == tuple(out), (op().shape, out)
        else:
            x, w = torch.randn(*shapes[0]), torch.randn(*shapes[1])
            bias = torch.randn(shapes[2][-1]) if len(shapes) > 3 else None
            op = lambda: torch.addmm(bias, x, w) if bias is not None else x @ w  # noqa: E731
        with exclusive("timing PyTorch on a kernel's shapes"):
            for _ in range(3):
                op()
            runs = []
            for _ in range(7):
                t0, n = time.perf_counter(), 0
                while time.perf_counter() - t0 < 0.2:
                    op()
                    n += 1
                runs.append((time.perf_counter() - t0) / n)
    return statistics.median(runs)


def main() -> None:
    from recommender.target.spec import host_cpu_flags, parse_target
    from recommender.core.row_files import read_rows
    target = parse_target("native")
    cores = int(target.config.get("num-cores", 1))
    peak = fma_peak(cores, "avx512f" in host_cpu_flags())
    print(f"FMA peak: {peak['gflops']} GFLOP/s ({cores} threads, {peak['lanes']} lanes; runs {peak['runs']}), "
          f"one thread {peak['one_thread_gflops']}", flush=True)
    out = {"target_key": target.key, "date": time.strftime("%Y-%m-%d"), "peak": peak, "kernels": []}
    for folder in sorted((ROOT / "models" / target.key / "heldout").glob("*")):
        report = json.loads((folder / "report.json").read_text())
        rows = {r.target_kernel: r for r in read_rows(folder / "candidates.jsonl.gz") if r.is_default}
        for kind in ("conv2d", "matmul"):
            k = heaviest(report, kind)
            if k is None:
                continue
            args = [{"shape": list(s), "dtype": d} for s, d in rows[k["kernel"]].target_args]
            t_torch = torch_seconds(kind, args, cores)
            entry = {"model": report["model"], "kernel": k["kernel"], "kind": kind, "flops": k["flops"],
                     "shapes": [a["shape"] for a in args], "schedrec_s": k["latency_s"], "pytorch_s": t_torch,
                     "schedrec_gflops": round(k["flops"] / k["latency_s"] / 1e9, 1),
                     "pytorch_gflops": round(k["flops"] / t_torch / 1e9, 1)}
            out["kernels"].append(entry)
            print(f"{entry['model']} {kind}: schedrec {entry['schedrec_gflops']} GFLOP/s, PyTorch "
                  f"{entry['pytorch_gflops']} GFLOP/s (peak {peak['gflops']})", flush=True)
    res = results_dir(target.key)
    atomic_write_json(str(res / "peak_gflops.json"), out)
    scaling = peak["gflops"] / peak["one_thread_gflops"]
    lines = [f"# GFLOP/s against the measured peak ({out['target_key']}, {cores} threads, {out['date']})", "",
             "`python benchmarks/peak_gflops.py`. Peak: an FMA loop "
             f"({peak['lanes']} float32 lanes), the best of 5 runs: **{peak['gflops']} GFLOP/s** on {cores} threads "
             f"(median {peak['median_gflops']}), {peak['one_thread_gflops']} on one thread ({scaling:.2f}x"
             + ("; the cores do not scale, so they share FMA units or the machine was busy" if scaling < 0.75 * cores
                else "") + "). schedrec: the kernel's latency under "
             "its exhaustive-replay schedule (models/<key>/heldout, that run's measurement); PyTorch: the same op "
             "and shapes, timed here. FLOPs count the fused epilogue too.", "",
             "| model | kernel | shapes | schedrec GFLOP/s | share of peak | PyTorch GFLOP/s | share of peak |",
             "|---|---|---|---|---|---|---|"]
    for e in out["kernels"]:
        lines.append(f"| {e['model']} | {e['kernel'][:40]} | {' '.join('x'.join(map(str, s)) for s in e['shapes'][:2])} "
                     f"| {e['schedrec_gflops']} | {e['schedrec_gflops'] / peak['gflops']:.0%} | {e['pytorch_gflops']} "
                     f"| {e['pytorch_gflops'] / peak['gflops']:.0%} |")
    atomic_write_text(str(res / "peak_gflops.md"), "\n".join(lines) + "\n")
    print(f"wrote {res / 'peak_gflops.json'} and .md")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    main()
