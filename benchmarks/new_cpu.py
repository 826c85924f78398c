"""A new CPU, simulated on the CPU at hand: its own folder set aside, what would a transfer on it get?

Copies every target folder but this CPU's into a scratch models folder, trains the ranker across those targets
there (`schedrec train --targets`, so no row of this CPU reaches it), then runs `schedrec compare` with the
scratch folder as SCHEDREC_MODELS_DIR: the nearest target's bank, the shared ranker given this CPU's hardware
features, lgbm and random at each budget against the exhaustive replay of the same pool, all measured here.
`benchmarks/retime_compare.py` then times every method's database again in interleaved rounds. Copies
compare.json/.md/.png and retime.json to models/shared/new_cpu/<key>/<model>/.

    python benchmarks/new_cpu.py --model zoo:resnet50        # about 25 minutes on 2 cores

Keep the machine otherwise idle.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recommender.core.fileio import atomic_write_json, read_json  # noqa: E402
from recommender.target.folders import SHARED, repo_models_dir  # noqa: E402


def run(cmd: list[str], env: dict[str, str]) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, env=env, check=True, cwd=ROOT)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="zoo:resnet50")
    ap.add_argument("--budgets", default="1,2,3")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scratch", type=Path, help="scratch models folder (default: a new temporary one)")
    a = ap.parse_args()

    from recommender.target.spec import native_target
    key = native_target().key
    models = repo_models_dir()
    others = sorted(p.name for p in models.iterdir()
                    if p.is_dir() and p.name not in (key, SHARED) and (p / "transfer").is_dir())
    if not others:
        sys.exit(f"new_cpu: no target folder besides {key} to borrow from")
    scratch = a.scratch or Path(tempfile.mkdtemp(prefix="schedrec-newcpu-"))
    for name in others:  # copies: nothing run here may write into another target's folder
        if not (scratch / name).exists():
            shutil.copytree(models / name, scratch / name)
    env = dict(os.environ, SCHEDREC_MODELS_DIR=str(scratch))
    exe = str(Path(sys.executable).with_name("schedrec"))
    model_name = a.model.removeprefix("zoo:").rsplit("/", 1)[-1].removesuffix(".onnx").removesuffix(".pt2")
    out = ROOT / "out" / "new_cpu" / model_name
    commands = [[exe, "train", "--targets", ",".join(others)], [exe, "target"],
                [exe, "compare", "--model", a.model, "--budgets", a.budgets, "--selectors", "lgbm,random",
                 "--exhaustive", "measure", "--scratch-cap-s", "0", "--refine-s", "0", "--no-baselines",
                 "--out", str(out)],
                [sys.executable, "benchmarks/retime_compare.py", str(out), "--rounds", str(a.rounds)]]
    for cmd in commands:
        run(cmd, env)
    dest = models / SHARED / "new_cpu" / key / model_name
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("compare.json", "compare.md", "compare.png", "retime.json"):
        shutil.copy2(out / name, dest / name)
    summary = {"target_key": key, "model": model_name, "borrowed_from": others,
               "commands": [" ".join(Path(c).name if i == 0 else c for i, c in enumerate(cmd)) for cmd in commands],
               **summarize(read_json(str(dest / "retime.json")), read_json(str(dest / "compare.json")))}
    atomic_write_json(str(dest / "summary.json"), summary)
    print(f"-> {dest}")


def summarize(retime: dict, compare: dict) -> dict:
    """Q against exhaustive from the interleaved medians, with each method's measurements and search time."""
    ex = retime["methods"]["exhaustive"]["median_s"]
    rows = {}
    for name, r in retime["methods"].items():
        c = compare["methods"].get(name, {})
        rows[name] = {"median_ms": round(r["median_s"] * 1e3, 2), "q_vs_exhaustive": round(ex / r["median_s"], 3),
                      "measurements": c.get("measurements"), "search_s": c.get("search_s")}
    return {"bank": Path(compare["bank"]).parent.name, "methods": rows}


if __name__ == "__main__":
    main()
