"""The README's generated sections are what the scripts write from the committed JSON (no hand-typed figures)."""
from __future__ import annotations

import importlib.util

from .cli_helpers import ROOT


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_results_section_is_generated_from_the_compare_files():
    results = _script("readme_results")
    readme = (ROOT / "README.md").read_text()
    assert readme == results.splice(readme, results.render()), \
        "README.md results section is stale: run python scripts/readme_results.py"
