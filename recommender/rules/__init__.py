"""Hand-written schedule rules behind one interface (`base.ScheduleRule`: a rule lists its instances for a
kernel, each a schedule with its knob values), one module per rule family, shared helpers in `common`.

- `conv.ConvRule`: register tiles for NCHW conv2d / conv3d (and grouped, depthwise);
- `matmul.MatmulRule`: register tiles for matmuls and batch matmuls with a row-major right operand;
- `loop.LoopRule`: parallel and vectorized loops for kernels without a donor (elementwise, reductions, pools).

`RULES` maps each rule's name to it; `tile_rule_for(class_key)` is the rule a kernel class gets beside its
donors (None: no tile rule, the loop rule stands in only where no donor replays).
"""
from __future__ import annotations

from .base import RuleInstance, ScheduleRule
from .conv import ConvRule
from .loop import LoopRule
from .matmul import MatmulRule

RULES: dict[str, ScheduleRule] = {r.name: r for r in (ConvRule(), MatmulRule(), LoopRule())}
TILE_RULES = tuple(name for name, r in RULES.items() if r.classes)
# every rule's knobs that shape the loop nest (`ScheduleRule.structural`), in registry order
STRUCTURAL_KNOBS = tuple(dict.fromkeys(k for r in RULES.values() for k in r.structural))


def rule_named(name: str) -> ScheduleRule:
    """The registered rule `name`; a ValueError naming the known ones otherwise."""
    if name not in RULES:
        raise ValueError(f"unknown rule {name!r}; one of {', '.join(RULES)}")
    return RULES[name]


def tile_rule_for(class_key: str) -> ScheduleRule | None:
    """The tile rule whose classes the kernel class belongs to, None where none does."""
    return next((r for r in RULES.values() if r.applies_to(class_key)), None)


__all__ = ["RuleInstance", "ScheduleRule", "ConvRule", "MatmulRule", "LoopRule", "RULES", "TILE_RULES", "STRUCTURAL_KNOBS",
           "rule_named", "tile_rule_for"]
