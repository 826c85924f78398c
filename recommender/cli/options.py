"""Every option of the `schedrec` command line, defined once: argument types that check their text, and
helpers that add one option (or a set that always travels together) to a command's parser."""
from __future__ import annotations

import argparse
import sys
from typing import Callable


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


# --- argument types -------------------------------------------------------------------------------------

def int_at_least(low: int, what: str, too_low: str) -> Callable[[str], int]:
    """An argparse type: an integer >= `low`; `what` names it when the text is not a number."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {too_low}, got {value}")
        return value
    return parse


positive_int = int_at_least(1, "a positive integer", "a positive integer")
measurement_count = int_at_least(0, "a whole number of measurements", "0 or more measurements")


def statuses(text: str) -> tuple[str, ...]:
    """Comma-separated failure statuses of candidate rows."""
    from ..core.rows import FAILURE_STATUSES
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    unknown = [n for n in names if n not in FAILURE_STATUSES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown status {', '.join(unknown) or repr(text)}; "
                                         f"one or more of {', '.join(FAILURE_STATUSES)}")
    return names


def share(text: str) -> float:
    """A fraction in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction between 0 and 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction between 0 and 1, got {value}")
    return value


def budgets(text: str) -> tuple[int, ...]:
    """Comma-separated per-kernel budgets, each 1 or more."""
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected per-kernel budgets like 1,2,3,5, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"budgets must be 1 or more, got {text!r}")
    return values


def fractions(text: str) -> tuple[float, ...]:
    """Comma-separated fractions in (0, 1]."""
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected fractions like 0.25,0.5,1, got {text!r}") from None
    if not values or any(not 0.0 < v <= 1.0 for v in values):
        raise argparse.ArgumentTypeError(f"fractions must be in (0, 1], got {text!r}")
    return values


def ranker_names(text: str) -> list[str]:
    """Registered ranker names (training.registry), comma-separated, or `all` (the learned ones)."""
    from training.registry import BASELINES, LEARNED
    names = list(LEARNED) if text == "all" else [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in LEARNED + BASELINES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown ranker {', '.join(unknown) or repr(text)}; "
                                         f"one or more of {', '.join(LEARNED + BASELINES)}, or all")
    return names


def selector_names(text: str) -> tuple[str, ...]:
    """Registered selector names (training.registry.SELECTORS), comma-separated; `random@S` is the random
    selector seeded S."""
    from training.registry import SELECTORS, random_seed
    names = tuple(s.strip() for s in text.split(",") if s.strip())
    bad = [s for s in names if s not in SELECTORS and random_seed(s) == -1]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown selector {', '.join(bad) or repr(text)}; "
                                         f"use {', '.join(SELECTORS[:-1])} or {SELECTORS[-1]}")
    return names


def cluster_address(text: str) -> object:
    """`local:N` or a Dask scheduler address, parsed (recommender.measure.cluster; Dask is not imported)."""
    from ..core.errors import ClusterError
    from ..measure.cluster import parse_cluster
    try:
        return parse_cluster(text)
    except ClusterError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--cluster: ")) from None


def names_list(text: str | None) -> tuple[str, ...]:
    """A comma-separated option's names, blanks dropped."""
    return tuple(m.strip() for m in (text or "").split(",") if m.strip())


# --- options --------------------------------------------------------------------------------------------

def model(sp: argparse.ArgumentParser, required: bool = True) -> None:
    sp.add_argument("--model", required=required, help="zoo:NAME, a .onnx or a .pt2 file")


def models(sp: argparse.ArgumentParser, what: str, required: bool = False) -> None:
    """--models: a comma-separated list of `what` (model specs to tune, bank models to restrict a run to)."""
    sp.add_argument("--models", required=required, help=what)


def rankers(sp: argparse.ArgumentParser, default: list[str] | None, what: str) -> None:
    sp.add_argument("--ranker", type=ranker_names, default=default, help=what)


def target(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--target", default="native",
                    help="'native' (detect the host CPU), a JSON object, or a JSON file (default: native)")


def target_key(sp: argparse.ArgumentParser) -> None:
    target(sp)
    sp.add_argument("--target-key", metavar="KEY", help="the target folder models/KEY/ (default: the key of --target)")


def exact_math(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--exact-math", action="store_true",
                    help="build with libm's scalar exp/erf, as stock TVM does, instead of schedrec's vectorized "
                         "float32 polynomials (within 2e-6 of libm; several times faster softmax, GELU, tanh, sigmoid)")


def input_shape(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--input-shape", action="append", metavar="NAME=D0,D1,...",
                    help="bind an ONNX input's dynamic dims, e.g. x=1,3,224,224, or a named dim wherever it "
                         "appears, e.g. seq=128 (repeat per input or dim; a named dim bound in one input holds "
                         "in the others; an unbound dynamic batch dim is taken as 1)")


def fallback(sp: argparse.ArgumentParser) -> None:
    """What a kernel gets where no donor replays: design-space samples and a short search."""
    sp.add_argument("--fallback-samples", type=int_at_least(0, "a sample count", "0 or more"), default=4,
                    metavar="N", help="where no donor replays on a kernel, or none of those measured beats its "
                                      "default, draw N schedules from its own design space as candidates, "
                                      "so that no kernel is left as plain loops (default 4; 0: off)")
    sp.add_argument("--tune-missing", type=int_at_least(0, "a trial count", "0 or more"), default=32,
                    metavar="TRIALS", help="where no donor replays on a kernel that holds 1%% or more of the "
                                           "model's FLOPs (0.25%% for a conv or matmul), search its design space "
                                           "for TRIALS measured trials (MetaSchedule, cost model on) before any "
                                           "random draw; its best records are the candidates (default 32; 0: off)")


def bank(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--bank", metavar="PATH_OR_URL",
                    help="bank folder, or a URL: file://PATH, or through fsspec (schedrec[cluster]) memory://, s3://, "
                         "...; transfer, replay, compare and bank index take a URL, the commands that add to a bank "
                         "or read all of it a folder (default: models/<target-key>/bank)")


def recommender(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--recommender", metavar="DIR",
                    help="target folder with the trained rankers (default: models/<target-key>)")


def exclude_models(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--exclude-models", default="", help="comma-separated bank models to leave out")


def pool(sp: argparse.ArgumentParser, top_n: int | None = 3, cap: int | None = 48, anchor_fallback: bool = True,
         top_n_note: str = "", cap_note: str = "") -> None:
    """The candidate pool: best records per donor kernel, the cap per kernel, the anchor fallback."""
    sp.add_argument("--top-n", type=positive_int, default=top_n,
                    help=f"best records per source kernel in the pool ({top_n_note or top_n})")
    sp.add_argument("--cap", type=positive_int, default=cap,
                    help=f"at most this many candidates per kernel ({cap_note or cap})")
    if anchor_fallback:
        sp.add_argument("--no-anchor-fallback", action="store_true",
                        help="do not fall back to same-anchor donors with another epilogue where a class has none")


def repeat(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--repeat", type=positive_int, default=5, help="timing repeats per measurement (5)")


def matrix_resume(sp: argparse.ArgumentParser) -> None:
    """How a resumed transfer matrix treats what it measured before."""
    sp.add_argument("--remeasure", type=statuses, default=(), metavar="STATUS[,STATUS]",
                    help="when resuming, measure again the kernels with a candidate of these statuses "
                         "(e.g. wrong_result after a fix to the check)")
    sp.add_argument("--add-donors", action="store_true",
                    help="measure the candidates of bank models added since the matrix's finished kernels were "
                         "measured, and add their rows")
    sp.add_argument("--add-instances", action="store_true",
                    help="with --rule-space: measure the instances of each finished kernel's rule space that its "
                         "rows lack (a template that gained a knob), and add their rows")


RULE_SPACE = 32  # a pool's rule-space instances per kernel, fixed before any run that ranks them


def rule_space(sp: argparse.ArgumentParser, use: str = "pool") -> None:
    """The rule space: in a matrix ("matrix"), which kernels and how many instances to measure; in a pool
    ("pool"), its size; "replay" takes both (the matrix's with --all-pairs, else the pool's)."""
    matrix = ("only the kernels a tile rule applies to, each with up to N instances of the rule's template measured "
              "beside its donors, the fixed tiles first (default folder: models/<target-key>/space); 0: donors only")
    pool = ("up to N instances of the kernel's tile-rule template join its pool, the rule's fixed tiles first; 0: the "
            "fixed tiles alone, on kernels of 2 MFLOP or more")
    default, text = {"matrix": (0, f"{matrix} (default)"), "pool": (RULE_SPACE, f"{pool} ({RULE_SPACE})"),
                     "replay": (None, f"with --all-pairs: {matrix} (default); else: {pool} ({RULE_SPACE})")}[use]
    sp.add_argument("--rule-space", type=int_at_least(0, "an instance count", "0 or more"), default=default,
                    metavar="N", help=text)


def bank_name(sp: argparse.ArgumentParser, required: bool) -> None:
    sp.add_argument("--name", required=required,
                    help="the model name to file it under" + ("" if required else " (default: the run's model)"))


def out(sp: argparse.ArgumentParser, default: str, what: str = "output folder", metavar: str = "DIR") -> None:
    sp.add_argument("--out", metavar=metavar, help=f"{what} (default: {default})")


def bank_records(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--no-bank-records", action="store_true",
                    help="train on the transfer matrix alone, without the bank's own tuning records")


def cluster(sp: argparse.ArgumentParser, what: str) -> None:
    """--cluster: run `what` on a Dask cluster (docs/scale.md)."""
    sp.add_argument("--cluster", type=cluster_address, metavar="ADDRESS",
                    help=f"{what} on a Dask cluster: a scheduler address (tcp://HOST:8786) or local:N (N worker "
                         f"processes started on this machine); needs schedrec[cluster] (docs/scale.md)")


def runner(sp: argparse.ArgumentParser, what: str = "") -> None:
    """--runner: where candidates are timed (builds stay on this machine or the Dask workers)."""
    sp.add_argument("--runner", default="local",
                    help=f"local, or rpc://HOST:PORT/KEY: time on the boards a TVM RPC tracker serves under KEY{what}")
