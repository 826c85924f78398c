"""scripts/break_once.py stays runnable as the code changes: each break's text occurs once in its file and
each test it names exists (a renamed test or function would make a break silently test nothing)."""
from __future__ import annotations

from .cli_helpers import ROOT, load_script


def test_every_break_applies_once_and_names_existing_tests():
    script = load_script("break_once")
    names = [b.name for b in script.BREAKS]
    assert len(names) == len(set(names))
    for b in script.BREAKS:
        text = (ROOT / b.path).read_text()
        old, new = (b.old, b.new) if b.old is not None else script._card_break()
        assert text.count(old) == 1 and old != new, b.name
        for test in b.tests:
            path, _, func = test.partition("::")
            assert (ROOT / path).is_file(), test
            assert not func or f"def {func}(" in (ROOT / path).read_text(), test
