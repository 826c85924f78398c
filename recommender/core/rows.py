"""Candidate rows: one (target kernel, candidate schedule) pair with its measurement, the unit of the
transfer matrix, of replay runs and of every ranker's training and evaluation data.

On disk a row is one JSON object a line (docs/DATA.md); `CandidateRow.from_json` / `to_json` are the only
places that know the field names. The kernel's own default (unscheduled) version is a row too, with
`match == DEFAULT`.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

# how a candidate's source matches the target kernel (SAMPLED: no donor replayed; drawn from the kernel's own
# MetaSchedule design space, the fallback that keeps a kernel from running as plain loops)
CLASS, ANCHOR, DEFAULT, SAMPLED = "class", "anchor", "default", "sampled"

# what kind of schedule a candidate is (`source_kind`): a bank record replayed from another kernel, an instance
# of a hand-written rule's template, or a schedule of the kernel's own MetaSchedule design space
DONOR, RULE, SPACE = "donor", "rule", "space"
SOURCE_KINDS = (DONOR, RULE, SPACE)
DESIGN_SPACE = "(design space)"  # the source model of candidates drawn from MetaSchedule's design space

# statuses: OK, or why a candidate has no latency
OK = "ok"
# before measurement (replay): known before a ranker sees the candidate
CLASS_MISMATCH = "class_mismatch"
REPLAY_ERROR = "replay_error"
POSTPROC_FAILURE = "postproc_failure"
REPLAY_TIMEOUT = "replay_timeout"
REPLAY_CRASH = "replay_crash"
REPLAY_FAILURES = (CLASS_MISMATCH, REPLAY_ERROR, POSTPROC_FAILURE, REPLAY_TIMEOUT, REPLAY_CRASH)
# during measurement: a selected candidate that wastes its measurement
BUILD_ERROR = "build_error"
RUNTIME_ERROR = "runtime_error"
TIMEOUT = "timeout"
CRASH = "crash"
WRONG_RESULT = "wrong_result"
MEASURE_FAILURES = (BUILD_ERROR, RUNTIME_ERROR, TIMEOUT, CRASH, WRONG_RESULT)
FAILURE_STATUSES = REPLAY_FAILURES + MEASURE_FAILURES
# a replayed candidate that a budgeted run chose not to measure (not a failure: nothing is known of it)
NOT_MEASURED = "not_measured"

REQUIRED = ("target_model", "target_kernel", "class_key", "match", "status")


@dataclass(frozen=True)
class CandidateRow:
    """One measured candidate (or the kernel's default schedule, `match == DEFAULT`)."""

    # the target kernel
    target_model: str
    target_kernel: str
    class_key: str
    match: str
    status: str
    weight: int = 1
    flops: float = 0.0
    target_args: tuple = ()  # ((shape tuple, dtype), ...)
    target_tuned_s: float | None = None  # the kernel's own best bank latency (None outside the bank)
    # the source schedule (None for the default row)
    source_model: str | None = None
    source_kernel: str | None = None
    source_class_key: str | None = None
    source_rank: int | None = None
    source_latency_s: float | None = None
    trace: list | None = field(default=None, compare=False)  # replayed trace on the target kernel
    knobs: dict | None = field(default=None, compare=False)  # a rule instance's knob values (+ "fixed")
    # the outcome
    error: str = ""
    costs: tuple = ()
    latency_s: float | None = None
    # default row only
    workload: list | None = field(default=None, compare=False)
    seconds: dict | None = field(default=None, compare=False)

    @property
    def kernel_key(self) -> tuple[str, str]:
        return (self.target_model, self.target_kernel)

    @property
    def is_default(self) -> bool:
        return self.match == DEFAULT

    @property
    def ok(self) -> bool:
        return self.status == OK and self.latency_s is not None

    @property
    def replayed(self) -> bool:
        """The candidate replayed onto the target kernel (so a ranker can see its trace)."""
        return not self.is_default and self.trace is not None

    @property
    def source_kind(self) -> str | None:
        """DONOR, RULE or SPACE (None for the default row). Rule sources are named "(<rule> rule)" and the
        design space DESIGN_SPACE (recommender.rules, transfer.kernel); a bank record's own row has no
        source model and is a design-space schedule."""
        if self.is_default:
            return None
        model = self.source_model
        if model is None or model == DESIGN_SPACE:
            return SPACE
        return RULE if model.startswith("(") and model.endswith(" rule)") else DONOR

    @property
    def fixed_rule(self) -> bool:
        """One of its rule's fixed instances (today's tiles), not a point of the wider space. Rows written
        before knobs were recorded count every rule row as fixed: only fixed tiles were measured then."""
        return self.source_kind == RULE and (self.knobs or {}).get("fixed", True)

    @property
    def key(self) -> tuple:
        """The target kernel, the source record and, for a rule instance, its knob values: unique within a matrix
        (rule instances that `matrix --add-instances` added restart their ranks, so the rank alone is not)."""
        return (self.target_model, self.target_kernel, self.source_model, self.source_kernel, self.source_rank,
                self.match, knob_key(self.knobs))

    @classmethod
    def from_json(cls, obj: dict) -> "CandidateRow":
        missing = [f for f in REQUIRED if f not in obj]
        if missing:
            raise ValueError(f"a row needs {', '.join(REQUIRED)}; missing {', '.join(missing)}")
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in obj.items() if k in known}
        kw["target_args"] = tuple((tuple(a["shape"]), a["dtype"]) for a in obj.get("target_args") or ())
        kw["costs"] = tuple(obj.get("costs") or ())
        kw["weight"] = int(obj.get("weight") or 1)
        kw["flops"] = float(obj.get("flops") or 0.0)
        kw["error"] = obj.get("error") or ""
        return cls(**kw)

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["target_args"] = [{"shape": list(s), "dtype": d} for s, d in self.target_args]
        out["costs"] = list(self.costs)
        for opt in ("workload", "seconds", "knobs"):
            if out[opt] is None:
                del out[opt]
        return out


def knob_key(knobs: dict | None) -> tuple:
    """A rule instance's identity: its knob values, whether or not it is one of the rule's fixed instances."""
    return tuple(sorted((k, v) for k, v in (knobs or {}).items() if k != "fixed"))


KEY_FIELDS = ("target_model", "target_kernel", "source_model", "source_kernel", "source_rank", "match", "knobs")


def key_from_json(obj: list) -> tuple:
    """A `CandidateRow.key` read back from JSON (lists where it had tuples). A key saved before the knob values
    joined it (six fields) gets none: the rows it was saved for were not rule instances added apart."""
    return tuple(obj[:6]) + (tuple(tuple(pair) for pair in obj[6]) if len(obj) > 6 else (),)
