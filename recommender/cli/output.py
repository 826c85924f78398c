"""What the commands print: plain tables and short figures, and the notes on which folders a run reads."""
from __future__ import annotations

import sys
from pathlib import Path


def fmt_flops(f: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if f >= scale:
            return f"{f / scale:.2f}{unit}"
    return f"{f:.0f}"


def print_table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))


def say(lines: list[str]) -> None:
    """Notes for the user, on stderr (stdout keeps the results)."""
    for line in lines:
        print(line, file=sys.stderr)


def donor_folders(args: object, target_key: str, with_recommender: bool = True) -> tuple[Path, Path | None]:
    """(bank, recommender folder) of a run from --bank / --recommender, this target's or the nearest
    target's (`bank.info.donor_folders`), with its notes said."""
    from ..bank.info import donor_folders as resolve
    bank, rec, notes = resolve(target_key, getattr(args, "bank", None), getattr(args, "recommender", None),
                               with_recommender)
    say(notes)
    return bank, rec


def own_folder(args: object, target_key: str, kind: str = "bank") -> Path:
    """--bank, else this target's own folder of `kind` (where tuning writes, and what matrix/info read): a
    local folder (a path or file://), since these commands write a bank or read all of it."""
    from ..bank.location import local_bank
    from ..target.folders import repo_models_dir
    if getattr(args, "bank", None):
        return local_bank(args.bank, f"schedrec {getattr(args, 'command', '')} {getattr(args, 'bank_command', '')}"
                          .strip().replace("  ", " "))
    return repo_models_dir() / target_key / kind
