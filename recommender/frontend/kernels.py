"""Kernels of a model: MetaSchedule tasks with their class, weight, FLOPs and argument shapes."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

from featurize.tir_structure import class_key, kernel_flops, kernel_kind

from ..core.errors import SchedrecError
from ..measure.args import kernel_args
from .model_import import ImportedModel


@dataclass
class Kernel:
    """One fused TIR function of a model (a MetaSchedule task)."""

    name: str
    weight: int
    flops: float  # one call
    class_key: str
    args: list[tuple[tuple[int, ...], str]]  # (shape, dtype) per argument
    mod: object = field(repr=False, default=None)  # tvm.IRModule with the PrimFunc as "main"

    @property
    def kind(self) -> str:
        return kernel_kind(self.class_key)

    @property
    def total_flops(self) -> float:
        return self.flops * self.weight

    def to_json(self) -> dict:
        return {"name": self.name, "weight": self.weight, "flops": self.flops, "kind": self.kind,
                "class_key": self.class_key,
                "args": [{"shape": list(s), "dtype": d} for s, d in self.args]}


def kernel_from_mod(name: str, mod: object, weight: int = 1) -> Kernel:
    """Describe one kernel module (an IRModule holding one PrimFunc)."""
    return Kernel(name=name, weight=int(weight), flops=kernel_flops(mod), class_key=class_key(mod),
                  args=kernel_args(mod), mod=mod)


def extract_kernels(model: ImportedModel, target: object) -> list[Kernel]:
    """The model's tunable kernels, heaviest (by total FLOPs) first."""
    from tvm.s_tir import meta_schedule as ms

    from ..measure.host_lock import exclusive
    try:
        with exclusive(f"extracting the kernels of {model.spec}"):
            tasks = ms.relax_integration.extract_tasks(model.mod, target)
    except Exception as err:
        raise SchedrecError(f"{model.spec}: kernel extraction failed: {str(err).splitlines()[-1]}") from err
    dynamic = [t.task_name for t in tasks if not has_static_shapes(t.dispatched[0])]
    if dynamic:  # data-dependent shapes (NonZero, boolean masking): nothing to measure them on
        print(f"note: {model.spec}: {len(dynamic)} kernel(s) with data-dependent shapes run TVM's default code "
              f"({', '.join(dynamic[:3])}{', ...' if len(dynamic) > 3 else ''})", file=sys.stderr)
    tasks = [t for t in tasks if t.task_name not in dynamic]
    if not tasks:
        raise SchedrecError(f"{model.spec}: the model has no tunable kernel"
                            + (" with static shapes" if dynamic else ""))
    kernels = [kernel_from_mod(t.task_name, t.dispatched[0], t.weight) for t in tasks]
    kernels.sort(key=lambda k: (-k.total_flops, k.name))
    return kernels


def has_static_shapes(mod: object) -> bool:
    """Whether every argument of the module's `main` is a buffer of constant shape: no scalar parameter and no
    dim that a variable sizes (a kernel after NonZero has both), so that it can be built and measured alone."""
    try:
        kernel_args(mod)  # MetaSchedule's ArgInfo refuses a scalar parameter; int() refuses a variable dim
    except (ValueError, TypeError):
        return False
    return True


def flop_shares(kernels: list[Kernel]) -> list[float]:
    """Each kernel's share of the model's total FLOPs (0 where the model has no FLOPs)."""
    total = sum(k.total_flops for k in kernels)
    return [k.total_flops / total if total > 0 else 0.0 for k in kernels]
