"""User-facing errors: the CLI prints them as one line and exits non-zero."""
from __future__ import annotations

from typing import Callable


class SchedrecError(Exception):
    """A problem with the user's input or environment, explained in one line."""


class ModelImportError(SchedrecError):
    """A model spec that cannot be turned into a Relax module."""


class TargetError(SchedrecError):
    """A target spec that cannot be parsed or detected."""


class BankError(SchedrecError):
    """A bank, or a file of rows measured from one, that is missing, corrupt, locked or for another target."""


class ClusterError(SchedrecError):
    """A cluster that cannot be reached or started, or a worker that may not take part (another CPU)."""


def run_script(main: Callable[[], object]) -> None:
    """Run a script's main(): a SchedrecError becomes one line `<script>: error: ...` and exit code 2."""
    import os
    import sys
    try:
        main()
    except SchedrecError as err:
        print(f"{os.path.basename(sys.argv[0])}: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
