"""The `schedrec` command line: the parser (one module per command group registers its commands) and the
entry point, which turns every error into one line and an exit code, and signals into a clean stop."""
from __future__ import annotations

import argparse
import signal
import sys
import traceback

from ..core.errors import SchedrecError
from . import bank, compare, models, options, training, transfer

COMMAND_GROUPS = (models, transfer, compare, bank, training)  # in the order `schedrec --help` lists them


def build_parser() -> argparse.ArgumentParser:
    p = options.Parser(prog="schedrec", description="ML-guided schedule recommender for TVM MetaSchedule.")
    p.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=options.Parser)
    for group in COMMAND_GROUPS:
        group.register(sub)
    return p


class _Terminated(KeyboardInterrupt):
    """SIGTERM, turned into an exception so that workers are closed and locks released on the way out."""


_stopped_by: list[int] = []  # the signal that stopped this run, if any


def on_signal(signum: int, frame: object) -> None:
    """SIGTERM / SIGINT: raise, so that Python unwinds (workers closed, locks released), except inside native
    TVM code that calls back into Python, where an exception would unwind C++ frames: end the run there."""
    from ..core.stopping import hard_stop, in_native_section
    _stopped_by.append(signum)
    if in_native_section():
        hard_stop(signum)  # does not return
    raise _Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def _stopped(signum: int) -> int:
    from ..core.stopping import exit_code, stop_message
    print(stop_message(signum == signal.SIGTERM), file=sys.stderr)
    return exit_code(signum)


def main(argv: list[str] | None = None) -> int:
    import warnings
    warnings.filterwarnings("ignore", category=FutureWarning)  # torch/transformers deprecation chatter
    parser = build_parser()
    args = parser.parse_args(argv)
    _stopped_by.clear()
    previous = signal.signal(signal.SIGTERM, on_signal), signal.signal(signal.SIGINT, on_signal)
    try:
        if getattr(args, "input_shape", None) and getattr(args, "model", None):
            from ..frontend.model_import import parse_input_shape, with_input_shapes
            args.model = with_input_shapes(args.model, dict(map(parse_input_shape, args.input_shape)))
        return args.func(args)
    except SchedrecError as err:
        if _stopped_by:  # a worker or a pool that the signal stopped, reported as an error on the way out
            return _stopped(_stopped_by[0])
        if args.debug:
            traceback.print_exc()
        print(f"schedrec: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:
        return _stopped(signal.SIGTERM if isinstance(err, _Terminated) else signal.SIGINT)
    except OSError as err:  # a folder that cannot be created or written, a full disk
        if _stopped_by:  # e.g. a pipe to a worker that the signal closed
            return _stopped(_stopped_by[0])
        if args.debug:
            traceback.print_exc()
        where = f": {err.filename}" if err.filename else ""
        print(f"schedrec: error: {err.strerror or err}{where}", file=sys.stderr)
        return 2
    except Exception as err:  # an unexpected failure: one line unless --debug
        if _stopped_by:  # the signal's exception came back wrapped by TVM (raised inside a tuning callback)
            return _stopped(_stopped_by[0])
        if args.debug:
            traceback.print_exc()
        msg = str(err).strip().splitlines()
        print(f"schedrec: internal error: {type(err).__name__}: {msg[-1] if msg else ''} "
              f"(rerun with --debug for the traceback)", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])


if __name__ == "__main__":
    sys.exit(main())
