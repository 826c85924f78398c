"""Does denormal arithmetic slow a zoo model on this CPU? PyTorch eager, timed with denormals kept, then
flushed to zero (torch.set_flush_denormal), then kept again, in one run.

    python benchmarks/denormal_probe.py [--models efficientnet_b0] [--threads 2]
writes benchmarks/results/<target-key>/denormal_probe.json; keep the machine otherwise idle.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from recommender.core.fileio import atomic_write_json  # noqa: E402


def median_ms(model, inputs, repeat: int = 5) -> float:
    import torch
    with torch.no_grad():
        for _ in range(2):
            model(*inputs)
        runs = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            model(*inputs)
            runs.append(time.perf_counter() - t0)
    return round(statistics.median(runs) * 1e3, 2)


def main() -> None:
    import torch
    from results_dir import results_dir

    from recommender.target.spec import cpu_name, native_target
    from recommender.frontend.zoo import build_zoo_model
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="efficientnet_b0")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    key = native_target().key
    out = {"target_key": key, "cpu": cpu_name(), "date": time.strftime("%Y-%m-%d"), "threads": args.threads,
           "models": {}}
    for name in args.models.split(","):
        model, inputs = build_zoo_model(name)
        kept = median_ms(model, inputs)
        torch.set_flush_denormal(True)
        flushed = median_ms(model, inputs)
        torch.set_flush_denormal(False)
        out["models"][name] = {"kept_ms": kept, "flushed_ms": flushed, "kept_again_ms": median_ms(model, inputs)}
        print(name, out["models"][name], flush=True)
    path = results_dir(key, create=True) / "denormal_probe.json"
    atomic_write_json(str(path), out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
