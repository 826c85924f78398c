"""Features of the hardware target beside those of the candidate, so that one ranker can learn across CPUs.

A `Hardware` is the target's recorded spec (`recommender/target/hardware.py` fills it in from its CPU's
published figures, never from the host that trains or runs), and `hardware_features` turns it, with a
candidate's kernel, source and schedule features, into numbers that mean the same on every CPU: the raw spec
(float32 vector lanes, cores, caches, peak float32 FLOPs per cycle) and ratios of what the schedule chose to
what the CPU has (vector loop against lanes, tile footprint against L1 and L2, parallel extent against
cores, kernel bytes against the caches). Within one target the raw spec is constant and every ratio is a
shift of a feature the ranker already has; across targets the ratios let a split learned on one CPU hold on
another.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

HARDWARE_VERSION = "1"
_FLOAT_BYTES = 4.0  # the ratios take float32 data: every shipped bank is float32


@dataclass(frozen=True)
class Hardware:
    """A CPU as the ranker sees it: per core, except `l3_mib` (the L3 one core's cluster shares)."""

    mcpu: str
    cores: int
    lanes: int  # float32 lanes of the widest vector register the target compiles for
    l1d_kib: float
    l2_kib: float
    l3_mib: float
    flops_per_cycle: int  # peak float32 FLOPs per cycle and core (FMA pipes x their lanes x 2)
    published: bool = True  # False: the CPU is not in the table, defaults for its vector width were used

    def __post_init__(self) -> None:
        for name in ("cores", "lanes", "l1d_kib", "l2_kib", "l3_mib", "flops_per_cycle"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"hardware {self.mcpu}: {name} must be a positive number, got {value!r}")


def _log2(x: float) -> float:
    return math.log2(max(float(x), 1e-9))


def hardware_features(hw: Hardware, kernel: dict[str, float], source: dict[str, float],
                      schedule: dict[str, float]) -> dict[str, float]:
    """The spec and the schedule-to-CPU ratios (log2) of one candidate. `kernel`, `source` and `schedule` are
    `candidate_features.kernel_features`, `source_features` and `trace_tokens.schedule_summary` of it."""
    lanes, cores = _log2(hw.lanes), _log2(hw.cores)
    l1, l2, l3 = _log2(hw.l1d_kib * 1024), _log2(hw.l2_kib * 1024), _log2(hw.l3_mib * 2 ** 20)
    inner = schedule["spatial_tile_l2"] + schedule["spatial_tile_l3"] + schedule["reduce_tile_l1"]
    middle = inner + schedule["spatial_tile_l1"]
    # summaries hold log2(1 + x) for the bytes and FLOPs of a kernel: back to log2(x) where it is large
    kernel_bytes = kernel["log_bytes"]
    return {
        "hw_lanes": lanes, "hw_cores": cores, "hw_l1": l1, "hw_l2": l2, "hw_l3": l3,
        "hw_flops_per_cycle": _log2(hw.flops_per_cycle),
        # the vector loop: the last spatial tile's innermost factor, against the lanes; full registers or not
        "vec_over_lanes": schedule["innermost_spatial"] - lanes if schedule["innermost_spatial"] else 0.0,
        "vec_full_lanes": float(schedule["innermost_spatial"] >= lanes and
                                round(2 ** schedule["innermost_spatial"]) % hw.lanes == 0),
        # a rule instance's register tile: its channel block against the lanes, its outputs against the
        # registers (16 vector registers with AVX2, 32 with AVX-512)
        "knob_channels_over_lanes": source["knob_channels"] - lanes if source["knob_known"] else 0.0,
        "knob_tile_over_registers": (source["knob_tile"] - lanes - (5.0 if hw.lanes >= 16 else 4.0)
                                     if source["knob_known"] else 0.0),
        # tiles below the outer level: what one pass of the inner loops touches (an upper bound), in bytes
        "inner_tile_over_l1": inner + _log2(_FLOAT_BYTES) - l1 if inner else 0.0,
        "middle_tile_over_l2": middle + _log2(_FLOAT_BYTES) - l2 if middle else 0.0,
        "outer_tile_over_cores": schedule["spatial_outer"] - cores if schedule["spatial_outer"] else 0.0,
        "parallel_limit_over_cores": schedule["parallel_limit"] - cores if schedule["parallel_limit"] else 0.0,
        "kernel_bytes_over_l2": kernel_bytes - l2,
        "kernel_bytes_over_l3": kernel_bytes - l3,
        # the kernel's FLOPs at the CPU's peak: log2 of the fewest cycles it can take on all cores
        "peak_cycles": kernel["log_flops"] - _log2(hw.flops_per_cycle) - cores,
    }


HARDWARE_NAMES = tuple(hardware_features(
    Hardware("probe", 1, 8, 32, 512, 16, 32),
    {"log_bytes": 0.0, "log_flops": 0.0}, {"knob_channels": 0.0, "knob_tile": 0.0, "knob_known": 0.0},
    {k: 0.0 for k in ("spatial_tile_l1", "spatial_tile_l2", "spatial_tile_l3", "reduce_tile_l1",
                      "innermost_spatial", "spatial_outer", "parallel_limit")}))
