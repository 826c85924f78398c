"""Does a pool lookup stay flat as the bank grows? Synthetic banks of 1x, 10x and 100x the shipped bank's records
(every model copied under new names, `<model>_x<i>`, records hard-linked, in a temporary folder, never under
models/), and the pools of a held-out model's kernels looked up with the bank's index and, where asked, by reading
every model as before the index.

    python benchmarks/bank_lookup.py [--target-key KEY] [--heldout resnet50] [--scales 1,10,100] [--scan-scales 1,10]

The kernels are the ones recorded in `models/<key>/heldout/<model>/candidates.jsonl.gz` (their class keys are all a
lookup reads), so no model is imported. Per scale: `open_s` (open the index: models.json and the stamp of every
model folder), `lookup_s` (the pools of all the kernels: `BankIndex.pool_for` with transfer's defaults, top 3,
cap 48, the held-out model left out), `load_s` (the pools' donors read: traces and TIR modules, which a transfer
pays when it replays them), `scan_s` (the same pools from reading every model, no index) and whether both ways give
the same sources. The synthetic index is the 1x index's groups filed under the copies' names (`bank.index.class_files`,
as the index writes them), with the copies' real stamps (opening it re-reads nothing, checked), and is checked
against the full read wherever the scan runs.
Writes benchmarks/results/<target-key>/bank_lookup.json.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from recommender.core.errors import SchedrecError, run_script  # noqa: E402
from recommender.core.fileio import atomic_write_json, display_path  # noqa: E402
from results_dir import results_dir  # noqa: E402

POOL = {"top_n": 3, "cap": 48}  # transfer's defaults (recommender/cli/options.py: pool)


def heldout_kernels(target_dir: Path, model: str) -> list[types.SimpleNamespace]:
    """The held-out model's kernels (name and class key) as its recorded replay has them."""
    from recommender.core.row_files import read_rows
    path = target_dir / "heldout" / model / "candidates.jsonl.gz"
    if not path.exists():
        raise SchedrecError(f"no recorded held-out run at {display_path(path)}: choose --heldout from "
                            f"{sorted(p.name for p in (target_dir / 'heldout').iterdir())}")
    seen: dict[str, str] = {}
    for r in read_rows(path):
        seen.setdefault(r.target_kernel, r.class_key)
    return [types.SimpleNamespace(name=n, class_key=c) for n, c in seen.items()]


def link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def grow(bank: Path, base: list[Path], copies: range) -> None:
    """File every base model again as `<model>_x<i>` for i in `copies` (records hard-linked, meta renamed)."""
    for i in copies:
        for src in base:
            name = f"{src.name}_x{i:03d}"
            (bank / name).mkdir()
            for f in src.iterdir():
                if f.name == "meta.json":
                    meta = json.loads(f.read_text())
                    (bank / name / f.name).write_text(json.dumps(dict(meta, model=name)))
                elif f.is_file() and not f.name.startswith("."):
                    link_or_copy(f, bank / name / f.name)


def synthesize_index(bank: Path, base_index: dict, base_shards: dict[str, list[dict]]) -> None:
    """The index of the grown bank: the base index's groups under every copy's name, stamps from the folders."""
    from recommender.bank.index import FORMAT, MODELS_FILE, IndexedGroup, class_bound, class_files
    from recommender.bank.location import bank_files
    stamps = bank_files(bank).model_stamps()
    base_models = base_index["models"]
    copies: dict[str, list[str]] = {}  # base folder -> its folder and its copies' folders
    models = {}
    for folder, stamp in stamps.items():
        origin = folder if folder in base_models else folder.rsplit("_x", 1)[0]
        copies.setdefault(origin, []).append(folder)
        models[folder] = dict(base_models[origin], stamp=stamp,
                              model=base_models[folder]["model"] if folder in base_models else folder)
    for c, info in base_index["classes"].items():
        groups = [IndexedGroup.from_json(dict(g, model=models[f]["model"], folder=f))
                  for g in base_shards[c] for f in copies[g["folder"]]]
        for name, data in class_files(c, groups).items():
            (bank / name).write_bytes(data)
        info.update(groups=len(groups), most_groups=class_bound(groups))
    (bank / MODELS_FILE).write_text(json.dumps({"format": FORMAT, "models": models,
                                                "classes": base_index["classes"]}, indent=1) + "\n")


def timed(fn, repeats: int) -> tuple[float, float, object]:
    """(median wall s, median CPU s, the last result) of `repeats` calls."""
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus), out


def pools(index, kernels: list, exclude: tuple[str, ...]) -> list[list]:
    return [index.pool_for(k, exclude_models=exclude, **POOL) for k in kernels]


def key(s) -> tuple:
    return s.model, s.kernel, s.rank, s.latency_s, s.class_key, s.match


def measure_scale(bank: Path, scale: int, kernels: list, exclude: tuple[str, ...], repeats: int,
                  scan: bool) -> dict:
    from recommender.bank.index import IndexedBank
    from recommender.bank.location import bank_files
    from recommender.transfer.candidates import BankIndex
    opened = IndexedBank(bank_files(bank))
    if opened.reread:
        raise SchedrecError(f"the synthetic index of scale {scale} was stale: {opened.reread[:3]}")
    open_s, open_cpu, _ = timed(lambda: BankIndex(bank), repeats)
    index = BankIndex(bank)
    lookup_s, lookup_cpu, found = timed(lambda: pools(index, kernels, exclude), repeats)
    sources = [s for p in found for s in p]
    load_s, load_cpu, _ = timed(lambda: [s.loaded() for s in sources], 1)
    shards = sum((bank / info[f]).stat().st_size for info in index._indexed.classes.values() for f in ("shard", "order"))
    out = {"scale": scale, "models": len(index.models),
           "record_groups": sum(c["groups"] for c in index._indexed.classes.values()),
           "index_bytes": (bank / ".index" / "models.json").stat().st_size + shards, "pool_sources": len(sources), "donor_models": len({s.model for s in sources}),
           "donor_kernels": len({(s.model, s.kernel) for s in sources}),
           "open_s": round(open_s, 5), "open_cpu_s": round(open_cpu, 5),
           "lookup_s": round(lookup_s, 5), "lookup_cpu_s": round(lookup_cpu, 5),
           "lookup_per_kernel_ms": round(lookup_s / len(kernels) * 1e3, 3),
           "load_s": round(load_s, 3), "load_cpu_s": round(load_cpu, 3)}
    if scan:
        scan_s, scan_cpu, full = timed(lambda: (lambda b: (b, pools(b, kernels, exclude)))(
            BankIndex(bank, use_index=False)), 1)
        out.update(scan_s=round(scan_s, 3), scan_cpu_s=round(scan_cpu, 3),
                   same_as_scan=[[key(s) for s in p] for p in full[1]] == [[key(s) for s in p] for p in found])
        if not out["same_as_scan"]:
            raise SchedrecError(f"scale {scale}: the index's pools differ from the full read's")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target-key", help="the bank models/KEY/bank and its held-out runs (default: this host's)")
    p.add_argument("--heldout", default="resnet50", help="held-out model whose kernels are looked up (resnet50)")
    p.add_argument("--scales", default="1,10,100", help="bank sizes, in copies of the shipped bank (1,10,100)")
    p.add_argument("--scan-scales", default="1,10", help="the scales also read without the index (1,10)")
    p.add_argument("--repeats", type=int, default=5, help="timings per figure, median kept (5; the load: 1)")
    args = p.parse_args()
    if args.target_key:
        key_ = args.target_key
    else:
        from recommender.target.spec import native_target
        key_ = native_target().key
    target_dir = ROOT / "models" / key_
    kernels = heldout_kernels(target_dir, args.heldout)
    scales = sorted({int(s) for s in args.scales.split(",") if s})
    scan_scales = {int(s) for s in args.scan_scales.split(",") if s}
    from recommender.bank.index import MODELS_FILE, index_bank
    from recommender.bank.store import bank_models
    rows = []
    with tempfile.TemporaryDirectory(prefix="bank-lookup-") as tmp:
        bank = Path(tmp) / "bank"
        bank.mkdir()
        for src in bank_models(target_dir / "bank"):
            shutil.copytree(src, bank / src.name, ignore=shutil.ignore_patterns(".*"))
        base = bank_models(bank)
        t0 = time.perf_counter()
        index_bank(bank)  # the real builder, at 1x
        build_s = time.perf_counter() - t0
        base_index = json.loads((bank / MODELS_FILE).read_text())
        base_shards = {c: [json.loads(line) for line in gzip.decompress((bank / info["shard"]).read_bytes())
                           .splitlines()] for c, info in base_index["classes"].items()}
        have = 1
        for scale in scales:
            grow(bank, base, range(have, scale))
            have = max(have, scale)
            if scale > 1:
                synthesize_index(bank, base_index, base_shards)
            rows.append(measure_scale(bank, scale, kernels, (args.heldout,), args.repeats, scale in scan_scales))
            r = rows[-1]
            print(f"{scale:>4}x: {r['models']} models, {r['record_groups']} groups; open {r['open_s'] * 1e3:.1f} ms, "
                  f"lookup {r['lookup_s'] * 1e3:.1f} ms ({len(kernels)} kernels, {r['pool_sources']} sources from "
                  f"{r['donor_models']} models), load {r['load_s']:.2f} s"
                  + (f", full read {r['scan_s']:.2f} s, same: {r['same_as_scan']}" if "scan_s" in r else ""),
                  flush=True)
    first = rows[0]
    result = {"target_key": key_, "date": time.strftime("%Y-%m-%d"), "heldout": args.heldout,
              "kernels": len(kernels), "classes": len({k.class_key for k in kernels}), "pool": POOL,
              "index_build_1x_s": round(build_s, 2), "repeats": args.repeats,
              "command": "python benchmarks/bank_lookup.py " + " ".join(sys.argv[1:]), "scales": rows,
              "lookup_over_1x": {str(r["scale"]): round(r["lookup_s"] / first["lookup_s"], 2) for r in rows},
              "open_over_1x": {str(r["scale"]): round(r["open_s"] / first["open_s"], 2) for r in rows},
              "open_and_lookup_over_1x": {str(r["scale"]): round((r["open_s"] + r["lookup_s"])
                                                                 / (first["open_s"] + first["lookup_s"]), 2) for r in rows}}
    path = results_dir(key_) / "bank_lookup.json"
    atomic_write_json(str(path), result)
    print(f"lookup over 1x: {result['lookup_over_1x']}; open over 1x: {result['open_over_1x']}; both: "
          f"{result['open_and_lookup_over_1x']} -> {display_path(path)}")


if __name__ == "__main__":
    run_script(main)
