"""Import every zoo model and list its kernel count, classes and import time (a check, not a test).

Usage: python scripts/zoo_check.py [--out zoo_check.json] [NAME ...]
"""
from __future__ import annotations

import argparse
import json
import time

from recommender.core.errors import SchedrecError
from recommender.frontend.kernels import extract_kernels
from recommender.frontend.model_import import import_model
from recommender.target.spec import native_target
from recommender.frontend.zoo import zoo_names


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*")
    ap.add_argument("--out", default="zoo_check.json")
    args = ap.parse_args()
    target = native_target()
    results = {}
    for name in args.names or zoo_names():
        t0 = time.time()
        try:
            model = import_model(f"zoo:{name}", target.tvm())
            kernels = extract_kernels(model, target.tvm())
            results[name] = {"ok": True, "kernels": len(kernels),
                             "classes": len({k.class_key for k in kernels}),
                             "gflops": sum(k.total_flops for k in kernels) / 1e9,
                             "seconds": round(time.time() - t0, 1)}
        except SchedrecError as err:
            results[name] = {"ok": False, "error": str(err), "seconds": round(time.time() - t0, 1)}
        print(name, json.dumps(results[name]), flush=True)
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
