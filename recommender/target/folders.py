"""Which `models/<target-key>/` folder serves a CPU: its own, else the nearest one that has what is needed.

Each CPU family is a target of its own (its own bank, matrix and rankers). A CPU with no folder of its own
still gets transfer from the nearest: the same vector width first (AVX-512 schedules vectorise for 16
floats, AVX2 ones for 8), then the same vendor line (Zen, Intel client, Intel server), then the nearest
generation, then the nearest core count. The choice is named in one line.
"""
from __future__ import annotations

import os
import re
from collections import defaultdict
from pathlib import Path

from ..core.errors import SchedrecError

# LLVM CPU names with 512-bit vectors (AVX-512F); the rest of x86-64 is taken as AVX2 or narrower
AVX512_CPUS = ("znver4", "znver5", "skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "icelake-client",
               "icelake-server", "tigerlake", "rocketlake", "sapphirerapids", "emeraldrapids", "graniterapids",
               "graniterapids-d", "diamondrapids", "knl", "knm", "x86-64-v4")
INTEL_CLIENT = ("haswell", "broadwell", "skylake", "alderlake", "raptorlake", "meteorlake", "arrowlake",
                "lunarlake", "icelake-client", "tigerlake", "rocketlake", "cannonlake")
INTEL_SERVER = ("skylake-avx512", "cascadelake", "cooperlake", "icelake-server", "sapphirerapids",
                "emeraldrapids", "graniterapids", "graniterapids-d", "diamondrapids")
_KEY = re.compile(r"^llvm-(?P<mcpu>.+?)(?:-(?P<cores>\d+)c)?$")


def parse_key(key: str) -> tuple[str, int]:
    """(mcpu, cores) of a target key `llvm-<mcpu>-<cores>c` (cores 0 when absent)."""
    m = _KEY.match(key)
    if not m:
        return key, 0
    return m["mcpu"], int(m["cores"] or 0)


def vector_bits(mcpu: str) -> int:
    return 512 if mcpu in AVX512_CPUS else 256


def vendor_line(mcpu: str) -> str:
    if mcpu.startswith("znver"):
        return "zen"
    if mcpu in INTEL_SERVER:
        return "intel-server"
    if mcpu in INTEL_CLIENT:
        return "intel-client"
    return mcpu


def _generation(mcpu: str) -> int:
    m = re.search(r"(\d+)$", mcpu)
    return int(m.group(1)) if m and mcpu.startswith("znver") else 0


def distance(key: str, other: str) -> tuple:
    """How far target `other` is from `key`, as a sortable tuple (smaller is nearer)."""
    a, ca = parse_key(key)
    b, cb = parse_key(other)
    return (vector_bits(a) != vector_bits(b), vendor_line(a) != vendor_line(b),
            abs(_generation(a) - _generation(b)), abs(ca - cb), other)


SHARED = "shared"  # models/shared/: what is trained across targets (not a target of its own)


def resolve(models_dir: Path, key: str, need: str = "bank") -> tuple[Path, str | None]:
    """The folder `models_dir/<key>` if it has `need` (a subfolder such as bank or rankers), else the nearest
    target folder that has one, with a one-line note saying so. Raises SchedrecError if no folder has one."""
    own = models_dir / key
    if (own / need).is_dir():
        return own, None
    have = sorted(p.name for p in models_dir.iterdir()
                  if p.name != SHARED and (p / need).is_dir()) if models_dir.is_dir() else []
    if not have:
        raise SchedrecError(f"no {need} for {key}, and no other target has one under {models_dir}; "
                            f"tune one with `schedrec bank tune` or pass --bank DIR")
    best = min(have, key=lambda other: distance(key, other))
    a, b = parse_key(key)[0], parse_key(best)[0]
    why = [f"{vector_bits(b)}-bit vectors" + (" as here" if vector_bits(a) == vector_bits(b) else
                                              f", not this CPU's {vector_bits(a)}"),
           "same vendor line" if vendor_line(a) == vendor_line(b) else f"another vendor line ({vendor_line(b)})"]
    note = (f"note: no {need} for this CPU ({key}); using the nearest, {best} ({'; '.join(why)}): its schedules "
            f"replay and are checked here, but were ranked by latencies measured there")
    return models_dir / best, note


def repo_models_dir() -> Path:
    """`models/` beside the packages (the embedded defaults), or $SCHEDREC_MODELS_DIR."""
    env = os.environ.get("SCHEDREC_MODELS_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "models"


def shared_dir() -> Path:
    """models/shared/: the rankers trained across targets."""
    return repo_models_dir() / SHARED


def rankers_for(models_dir: Path, key: str) -> tuple[Path, str | None]:
    """The recommender folder a transfer on target `key` uses: its own `rankers/`, else the rankers trained
    across targets (`shared/`), else the nearest target's; with a one-line note when not its own."""
    own = models_dir / key
    if (own / "rankers").is_dir():
        return own, None
    shared = models_dir / SHARED
    if (shared / "rankers" / "lgbm" / "meta.json").exists():
        return shared, (f"note: no rankers for this CPU ({key}); using the ranker trained across targets "
                        f"({display_targets(shared)}), given this CPU's hardware features")
    return resolve(models_dir, key, "rankers")


def display_targets(shared: Path) -> str:
    import json
    meta = json.loads((shared / "rankers" / "lgbm" / "meta.json").read_text())
    return ", ".join(meta.get("targets", [])) or "?"


def default_bank_dir(target_key: str) -> Path:
    return repo_models_dir() / target_key / "bank"


def target_dir(key: str) -> Path:
    """models/<key>/, refused where it has no transfer matrix (what `schedrec train` and `evaluate` read)."""
    folder = repo_models_dir() / key
    if not (folder / "transfer").is_dir():
        have = sorted(p.name for p in repo_models_dir().iterdir() if (p / "transfer").is_dir())
        raise SchedrecError(f"no transfer matrix for target {key} (looked in {folder / 'transfer'}); "
                            f"targets with one: {', '.join(have) or 'none'} (use --target-key)")
    return folder


def other_cpu_note(target_keys: dict[str, str], target_key: str) -> list[str]:
    """At most one line naming the bank models (model -> the target key it was tuned on) measured on another
    target than `target_key`."""
    other: dict[str, list[str]] = defaultdict(list)
    for m, k in target_keys.items():
        if k != target_key:
            other[k].append(m)
    if not other:
        return []
    where = "; ".join(f"{', '.join(ms)} on {k}" for k, ms in sorted(other.items()))
    n = sum(len(ms) for ms in other.values())
    return [f"note: {n} bank model{'s were' if n > 1 else ' was'} measured on another CPU than {target_key} "
            f"({where}): their schedules replay and are checked here, but their ranking by latency may not "
            f"carry over"]
