"""The interface every schedule rule implements, in the shape of MetaSchedule's ScheduleRule: a rule proposes
schedules of a kernel, the measurer disposes.

A rule lists its instances for a kernel: each is one TIR schedule (before postprocessing) with the knob
values that made it (a register tile, a loop placement), so a rule's choices can be enumerated, recorded
beside the candidate and compared. `recommender.rules.RULES` maps each rule's name to its one instance.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar


@dataclass(frozen=True)
class RuleInstance:
    """One schedule a rule built for a kernel: `knobs` are the values that chose it (JSON-able); `fixed`: one of
    the rule's fixed instances (`ScheduleRule.instances`), not only a point of its wider space."""

    rule: str
    knobs: dict = field(default_factory=dict)
    schedule: object = None  # tvm.s_tir.Schedule, before postprocessing
    fixed: bool = True


class ScheduleRule(ABC):
    """A family of hand-written schedules. Subclasses set `name` (the registry key), `source` (the source
    model of their candidates in rows and reports) and `classes` (the kernel class prefixes they apply to;
    empty: any kernel without a donor), and implement `instances`. `structural`: the knobs that change the
    loop nest's shape rather than a tile size (a reduction block, a packed layout): instances with and without
    one are different families of schedule (`transfer.selection.candidate_family`)."""

    name: ClassVar[str]
    source: ClassVar[str]
    classes: ClassVar[tuple[str, ...]] = ()
    structural: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def instances(self, mod: object, lanes: int = 8) -> list[RuleInstance]:
        """The rule's schedules of the one-kernel module `mod` for a target with `lanes` float32 lanes, each
        with its knob values; [] where the rule does not apply."""

    def space(self, mod: object, lanes: int = 8, limit: int = 64, seed: int = 0) -> list[RuleInstance]:
        """Up to `limit` instances of the rule's template for `mod`, its fixed `instances` first; a rule whose
        template has no knobs beyond them gives those."""
        return self.instances(mod, lanes)[:limit]

    def applies_to(self, class_key: str) -> bool:
        """Whether kernels of this class get the rule's instances beside their donors."""
        return any(class_key.startswith(prefix) for prefix in self.classes)

    def schedules(self, mod: object, lanes: int = 8) -> list[object]:
        """The instances' schedules alone."""
        return [i.schedule for i in self.instances(mod, lanes)]
