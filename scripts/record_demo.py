"""Run `make demo` afresh, timed, and keep its report as models/<target-key>/demo/<model>.json: the data the
README's demo paragraph is generated from (python scripts/readme_results.py).

Usage: python scripts/record_demo.py [--model zoo:resnet50]   (keep the machine otherwise idle)
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="zoo:resnet50")
    args = ap.parse_args()
    name = args.model.split(":", 1)[-1].rsplit("/", 1)[-1].split(".")[0]
    out = ROOT / "out" / "demo" / name
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    done = subprocess.run(["make", "demo", f"DEMO_MODEL={args.model}"], cwd=ROOT)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        print(f"record_demo.py: error: make demo failed (exit {done.returncode})", file=sys.stderr)
        return 2
    report = json.loads((out / "report.json").read_text())
    report["make_demo_wall_s"] = round(wall, 1)
    report["command"] = f"make demo DEMO_MODEL={args.model}"
    dest = ROOT / "models" / report["target_key"] / "demo" / f"{name}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {dest} ({wall:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
