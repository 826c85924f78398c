"""Keep the figures of a test-suite run for the README: parse the output of `pytest -q [--durations=N] tests`
(or `-m "not slow"`) and write tests/suite_timing.json, which `python scripts/readme_results.py` turns into
the README's test-suite line.

Usage: python -m pytest -q -m "not bench" tests --durations=10 | tee out/full.log
       python scripts/record_suite.py full out/full.log
       python -m pytest -q -m "not slow" tests | tee out/fast.log; python scripts/record_suite.py fast out/fast.log
       python -m pytest -q -m bench tests --durations=5 | tee out/bench.log; python scripts/record_suite.py bench out/bench.log
"""
from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = re.compile(r"=*\s*(?:(\d+) failed, )?(\d+) passed(?:, (\d+) skipped)?.* in ([\d.]+)s")
LIMIT_S = {"full": 20 * 60, "fast": 3 * 60, "bench": 10 * 60}  # `make test`, `make test-fast`, `make test-bench`
SLOW = re.compile(r"^([\d.]+)s (call|setup)\s+(\S+)")  # a fixture's setup counts as its first test's


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[1] not in LIMIT_S:
        print(__doc__, file=sys.stderr)
        return 2
    tier, log = sys.argv[1], Path(sys.argv[2]).read_text(errors="replace")
    found = [m for m in map(SUMMARY.search, log.splitlines()) if m]
    if not found:
        print(f"record_suite.py: error: no pytest summary line in {sys.argv[2]}", file=sys.stderr)
        return 2
    failed, passed, skipped, seconds = found[-1].groups()
    if int(failed or 0):
        print(f"record_suite.py: error: {failed} tests failed in {sys.argv[2]}: fix them and record a clean run "
              "(a record with failures fails the README's check)", file=sys.stderr)
        return 1
    if float(seconds) > LIMIT_S[tier]:
        print(f"record_suite.py: error: the {tier} tier took {float(seconds) / 60:.1f} min, over the "
              f"{LIMIT_S[tier] // 60} min the README promises: make it faster before recording it", file=sys.stderr)
        return 1
    sys.path.insert(0, str(ROOT))
    from recommender.target.spec import native_target
    path = ROOT / "tests" / "suite_timing.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[tier] = {"passed": int(passed), "failed": int(failed or 0), "skipped": int(skipped or 0),
                  "seconds": float(seconds), "date": time.strftime("%Y-%m-%d"), "target_key": native_target().key,
                  "slowest": [[name + (" (setup)" if phase == "setup" else ""), float(s)]
                              for s, phase, name in (m.groups() for m in map(SLOW.match, log.splitlines()) if m)][:5]}
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {path}: {tier} {passed} passed in {seconds} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
