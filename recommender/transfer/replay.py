"""Replaying a schedule of one kernel onto another kernel of the same class (the transfer step).

The trace is cut before its postprocessing part, its block lookups are renamed from the source
kernel's block names to the target's (blocks correspond by position within a class), it is applied to
the target kernel, and then the target kernel's own postprocessors run (parallel, vectorize, unroll,
reduction rewriting), as MetaSchedule does for its own candidates.
"""
from __future__ import annotations

import json
from functools import lru_cache

from featurize.tir_structure import all_blocks, anchor_index, block_infos
from featurize.trace_json import rename_blocks, strip_postproc
from featurize.trace_schema import MalformedTrace, check_trace

# failure reasons: defined once with the rows that record them; importable from here too
from ..core.rows import CLASS_MISMATCH, POSTPROC_FAILURE, REPLAY_CRASH, REPLAY_ERROR, REPLAY_TIMEOUT  # noqa: F401
from ..core.tvm_setup import new_schedule
from ..rules import RULES, TILE_RULES
from ..target.spec import float32_lanes


class ReplayFailure(Exception):
    """A candidate that could not be replayed; `reason` is one of the constants above."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


class Replayed:
    """A schedule replayed onto a target kernel: the postprocessed module, the replayed trace (target block names,
    no postproc part), the tvm.s_tir.Schedule itself where it was replayed in this process, and a rule
    instance's knob values (+ "fixed": one of the rule's fixed instances). A schedule replayed in a worker
    comes back as its module's JSON, loaded on first use of `mod`: a ranked pool's modules are mostly never
    measured (loading 64 conv instances took 0.23 s of the main process, llvm-rocketlake-2c), and a build sends
    the JSON on as it came (`to_build`)."""

    def __init__(self, mod: object = None, trace_json: list | None = None, sch: object = None,
                 knobs: dict | None = None, mod_json: str | None = None) -> None:
        if mod is None and mod_json is None:
            raise ValueError("a replayed schedule needs its module or the module's JSON")
        self._mod, self.mod_json = mod, mod_json
        self.trace_json, self.sch, self.knobs = trace_json, sch, knobs

    @property
    def mod(self) -> object:
        if self._mod is None:
            import tvm
            self._mod = tvm.ir.load_json(self.mod_json)
        return self._mod

    @property
    def to_build(self) -> object:
        """What `Measurer.measure` takes for it: the module's JSON where it came as JSON, else the module."""
        return self.mod_json if self.mod_json is not None else self._mod

    def with_knobs(self, knobs: dict | None) -> "Replayed":
        return Replayed(self._mod, self.trace_json, self.sch, knobs, self.mod_json)


def block_mapping(source_mod: object, target_mod: object) -> dict[str, str]:
    """Source block name -> target block name, by position; raises if the block lists differ in shape."""
    src, dst = block_infos(source_mod), block_infos(target_mod)
    if len(src) != len(dst) or any(a.op != b.op or a.axis_kinds != b.axis_kinds for a, b in zip(src, dst)):
        raise ReplayFailure(CLASS_MISMATCH, "source and target kernels have different block structures")
    return {a.name: b.name for a, b in zip(src, dst)}


def anchor_block_mapping(source_mod: object, target_mod: object) -> dict[str, str]:
    """Source -> target names of the prologue and anchor blocks (by position); the source's epilogue
    blocks map to names the target lacks, so anchor-trace application skips their instructions."""
    src, dst = block_infos(source_mod), block_infos(target_mod)
    ia, ib = anchor_index(src), anchor_index(dst)
    if ia != ib or any(a.op != b.op or a.axis_kinds != b.axis_kinds for a, b in zip(src[:ia + 1], dst[:ib + 1])):
        raise ReplayFailure(CLASS_MISMATCH, "source and target kernels have different anchor blocks")
    mapping = {a.name: b.name for a, b in zip(src[:ia + 1], dst[:ib + 1])}
    mapping.update({a.name: f"__source_only__{a.name}" for a in src[ia + 1:]})
    return mapping


def postprocs_for(mod: object, target: object) -> list:
    """The postprocessors MetaSchedule's default CPU design space uses for this kernel."""
    from tvm.s_tir import meta_schedule as ms

    from ..core.tvm_setup import load_tensor_intrinsics
    load_tensor_intrinsics()
    ctx = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply", num_threads=1)
    return list(ctx.space_generator.postprocs)


def replay_trace(trace_json: list, source_mod: object, target_mod: object, target: object,
                 postprocs: list | None = None) -> Replayed:
    """Apply a source kernel's trace (JSON form) to `target_mod`; raises ReplayFailure with the reason."""
    _check(trace_json)
    try:
        body = rename_blocks(strip_postproc(trace_json), block_mapping(source_mod, target_mod))
    except ReplayFailure:
        raise
    except Exception as err:  # malformed trace JSON
        raise ReplayFailure(REPLAY_ERROR, f"malformed trace: {type(err).__name__}: {err}") from err
    return _apply_checked(body, target_mod, target, postprocs)


def _check(trace_json: object) -> None:
    """Refuse trace JSON that TVM would misread (it may crash the process rather than raise)."""
    try:
        check_trace(trace_json)
    except MalformedTrace as err:
        raise ReplayFailure(REPLAY_ERROR, f"malformed trace: {err}") from None


def postprocess(sch: object, target_mod: object, target: object, postprocs: list | None) -> Replayed:
    """Run the target kernel's postprocessors on a replayed schedule."""
    replayed_json = _trace_json_of(sch)
    sch.enter_postproc()
    for p in postprocs if postprocs is not None else postprocs_for(target_mod, target):
        try:
            ok = p.apply(sch)
        except Exception as err:
            raise ReplayFailure(POSTPROC_FAILURE, f"{p}: {_one_line(err)}") from err
        if not ok:
            raise ReplayFailure(POSTPROC_FAILURE, f"{p} rejected the replayed schedule")
    gap = unwritten_output(sch)
    if gap:
        raise ReplayFailure(REPLAY_ERROR, gap)
    return Replayed(mod=sch.mod, trace_json=replayed_json, sch=sch)


def unwritten_output(sch: object) -> str:
    """Why the schedule leaves part of an output buffer unwritten ('' when every block writing an output
    iterates over at least all of it). TVM 0.27's anchor-trace application computes a fused padding epilogue
    at the anchor's loops over the anchor's extent only, so the padded border is never written: such a
    schedule gives a wrong result, found here without building it."""
    blocks = [sch.get_sblock("root"), *all_blocks(sch)]
    internal = [b for rv in blocks for b in sch.get(rv).alloc_buffers]
    for rv in blocks[1:]:
        block = sch.get(rv)
        for w in block.writes:
            if any(w.source.same_as(b) for b in internal):  # an intermediate, not a kernel argument
                continue
            numel = _product(w.source.shape)
            per_iter = _product(r.extent for r in w.region)
            iters = _product(sch.get(loop).extent for loop in sch.get_loops(rv))
            if numel is not None and per_iter is not None and iters is not None and iters * per_iter < numel:
                return (f"block {block.name_hint} writes {iters * per_iter} of the {numel} elements of output "
                        f"{w.source.name} (a padded border left unwritten)")
    return ""


def _product(values: object) -> int | None:
    """The product of integer extents; None if one is symbolic."""
    n = 1
    for v in values:
        if not hasattr(v, "value"):
            return None
        n *= int(v.value)
    return n


def replay_anchor_trace(trace_json: list, source_mod: object, target_mod: object, target: object,
                        postprocs: list | None = None) -> Replayed:
    """Apply the anchor-block part of a source kernel's trace to a kernel whose anchor is the same op but
    whose fused epilogue differs (MetaSchedule's anchor-trace application inlines or parallelises the
    rest), then the target's postprocessors. Raises ReplayFailure with the reason."""
    from tvm.s_tir.meta_schedule.trace_apply import schedule_using_anchor_trace
    _check(trace_json)
    try:
        mapping = anchor_block_mapping(source_mod, target_mod)
        anchor_trace = renamed_trace(strip_postproc(trace_json), source_mod, mapping)
    except ReplayFailure:
        raise
    except Exception as err:
        raise ReplayFailure(REPLAY_ERROR, f"source trace does not replay on its own kernel: {_one_line(err)}") from err
    sch = new_schedule(target_mod)
    try:
        schedule_using_anchor_trace(sch, anchor_trace, target)
    except Exception as err:
        # MetaSchedule inlines the epilogue with its default rule, which keeps an exp block and a block read
        # twice (ELU, softplus, Mish): the anchor is then left with two consumers where the donor's trace
        # expects one. Retry on the epilogue folded into the output block first.
        sch = new_schedule(target_mod)
        if not fold_epilogue(sch, target_mod):
            raise ReplayFailure(REPLAY_ERROR, f"anchor trace: {_one_line(err)}") from err
        try:
            schedule_using_anchor_trace(sch, anchor_trace, target)
        except Exception as again:
            raise ReplayFailure(REPLAY_ERROR, f"anchor trace: {_one_line(err)}; on the folded epilogue: "
                                              f"{_one_line(again)}") from again
    return postprocess(sch, target_mod, target, postprocs)


def fold_epilogue(sch: object, target_mod: object) -> bool:
    """Inline every intermediate spatial block after the kernel's anchor into its consumers, so that the
    epilogue is one block, the output's (an intermediate read twice is computed twice: elementwise work
    beside the anchor's reduction). False when there is no such block or one does not inline. On unseen_onnx's
    activations net (llvm-znver5-2c), of the first 12 anchor donors (of 113) of each of its ELU, softplus
    and Mish convs, none replayed before and all after; the net went from 83.9% to 98.9% of its FLOPs
    transferred."""
    blocks = block_infos(target_mod)
    after = [b.name for b in blocks[anchor_index(blocks) + 1:]]
    folded = False
    for name in after:
        block = sch.get_sblock(name)
        if not sch.get_consumers(block):  # the output block: what the epilogue folds into
            continue
        try:
            sch.compute_inline(block)
        except Exception:  # a reduction or a block that does not inline: the retry would fail the same way
            return False
        folded = True
    return folded


def apply_replayed(trace_json: list, target_mod: object, target: object, postprocs: list | None = None) -> Replayed:
    """Apply a trace written for `target_mod` (its block names, no postprocessing part), then the target's
    postprocessors; also rebuilds a recorded candidate's schedule without measuring it again."""
    _check(trace_json)
    return _apply_checked(trace_json, target_mod, target, postprocs)


def _apply_checked(trace_json: list, target_mod: object, target: object, postprocs: list | None) -> Replayed:
    """apply_replayed for a trace already shape-checked (strip_postproc and rename_blocks keep the shape)."""
    from tvm.s_tir import Trace
    sch = new_schedule(target_mod)
    try:
        Trace.apply_json_to_schedule(trace_json, sch)
    except Exception as err:
        raise ReplayFailure(REPLAY_ERROR, _one_line(err)) from err
    return postprocess(sch, target_mod, target, postprocs)


def replay_isolated_many(measurer: object, sources: list[tuple[list, object, bool]], target_mod: object,
                         timeout_s: float = 120.0) -> list:
    """replay_trace (or, with anchor set, replay_anchor_trace) of each (trace_json, source_mod, anchor) onto
    `target_mod`, run in `measurer`'s build workers, spread over them (Measurer.call_isolated_many); in
    order, each a Replayed or the ReplayFailure it ended with. A replay that kills TVM or runs past
    `timeout_s` is a failure (replay_crash, replay_timeout) and costs only its worker. A Replayed holds
    the module, not a Schedule: apply_replayed(r.trace_json, ...) rebuilds the Schedule where needed."""
    from ..measure.pool import WorkerCrash, WorkerTimeout
    target_json = _saved_json(target_mod)
    jobs = [{"trace_json": trace_json, "source_mod_json": _saved_json(source_mod), "target_mod_json": target_json,
             "target_config": measurer.target_config, "anchor": anchor} for trace_json, source_mod, anchor in sources]
    outs = measurer.call_isolated_many("recommender.transfer.replay:replay_serialized", jobs, timeout_s)
    results = []
    for out in outs:
        if isinstance(out, WorkerTimeout):
            results.append(ReplayFailure(REPLAY_TIMEOUT, f"replay hung: {out}"))
        elif isinstance(out, WorkerCrash):
            results.append(ReplayFailure(REPLAY_CRASH, f"replay killed its process ({out})"))
        elif isinstance(out, BaseException):
            results.append(ReplayFailure(REPLAY_ERROR, (str(out).splitlines() or [type(out).__name__])[0]))
        elif "reason" in out:
            results.append(ReplayFailure(out["reason"], out["message"]))
        else:
            results.append(Replayed(mod_json=out["mod_json"], trace_json=out["trace_json"]))
    return results


def replay_serialized(trace_json: list, source_mod_json: str, target_mod_json: str, target_config: dict,
                      anchor: bool) -> dict:
    """The worker side of replay_isolated_many, on serialized inputs: {"trace_json", "mod_json"} or
    {"reason", "message"}. Modules and postprocessors are cached, as one kernel's sources come in a row."""
    import tvm
    source_mod, target_mod = _load_mod(source_mod_json), _load_mod(target_mod_json)
    config_json = json.dumps(target_config, sort_keys=True)
    target, postprocs = _target(config_json), _postprocs(target_mod_json, config_json)
    try:
        r = (replay_anchor_trace if anchor else replay_trace)(trace_json, source_mod, target_mod, target, postprocs)
    except ReplayFailure as err:
        return {"reason": err.reason, "message": err.message}
    return {"trace_json": r.trace_json, "mod_json": tvm.ir.save_json(r.mod)}


def sample_schedules(mod: object, target: object, n: int, seed: int = 0) -> list[Replayed]:
    """Up to `n` schedules of `mod` drawn from MetaSchedule's own design space for it (each design space's
    sampling instructions decided afresh), postprocessed and checked like a replayed candidate; no cost
    model, no measurement. Draws that a postprocessor rejects are skipped (at most 4n draws)."""
    from tvm.s_tir import Trace
    from tvm.s_tir import meta_schedule as ms

    from ..core.tvm_setup import load_tensor_intrinsics
    load_tensor_intrinsics()
    ctx = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply", num_threads=1,
                         rand_state=seed + 1)
    spaces = ctx.space_generator.generate_design_space(mod)
    postprocs = list(ctx.space_generator.postprocs)
    out, seen = [], set()
    for draw in range(4 * n):
        if len(out) == n or not spaces:
            break
        sch = new_schedule(mod, seed=seed * 7919 + draw + 1)
        try:
            Trace(list(spaces[draw % len(spaces)].trace.insts), {}).apply_to_schedule(sch, remove_postproc=True)
            r = postprocess(sch, mod, target, postprocs)
        except Exception:  # a draw that does not apply or that a postprocessor rejects
            continue
        key = json.dumps(r.trace_json)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def rule_schedules(mod: object, target: object) -> list[Replayed]:
    """The loop rule's schedules for `mod` (`recommender.rules.loop`), postprocessed and checked like a
    replayed candidate (the ones a postprocessor rejects are left out)."""
    return [r for _, r in _postprocessed(RULES["loop"].schedules(mod), mod, target)]


def tile_rule_schedules(mod: object, target: object, rule: str = "conv", space: int = 0,
                        part: tuple[int, int] = (0, 1)) -> list[Replayed]:
    """The register-tile schedules of the tile rule `rule` (`recommender.rules.TILE_RULES`) for `mod` ([] if
    it is not a kernel they apply to), postprocessed and checked like a replayed candidate; the tiles fit
    `target`'s vectors. `space`: up to that many instances of the rule's template (`ScheduleRule.space`, the
    fixed ones first) instead of its fixed instances alone. `part` (i, n): only the instances i, i + n, ...
    (the list is seeded, so n workers that each take a part build it all between them)."""
    return [r for _, r in _tile_rule_parts(mod, target, rule, space, part)]


def _tile_rule_parts(mod: object, target: object, rule: str, space: int,
                     part: tuple[int, int]) -> list[tuple[int, Replayed]]:
    """tile_rule_schedules with each schedule's index in the rule's list."""
    if rule not in TILE_RULES:
        raise ValueError(f"unknown tile rule {rule!r}; one of {', '.join(TILE_RULES)}")
    lanes = float32_lanes(target)
    instances = RULES[rule].space(mod, lanes, limit=space) if space else RULES[rule].instances(mod, lanes)
    at, parts = part
    mine = list(range(at, len(instances), parts))
    built = _postprocessed([instances[i].schedule for i in mine], mod, target,
                           [{**instances[i].knobs, "fixed": instances[i].fixed} for i in mine])
    return [(mine[n], r) for n, r in built]


def _postprocessed(schedules: list[object], mod: object, target: object,
                   knobs: list[dict] | None = None) -> list[tuple[int, Replayed]]:
    """Each schedule postprocessed, with its index; the ones a postprocessor rejects are left out. The
    kernel's postprocessors are made once (a TuneContext each time was a fifth of a rule space's build)."""
    out = []
    postprocs = postprocs_for(mod, target) if schedules else None
    for n, sch in enumerate(schedules):
        try:
            r = postprocess(sch, mod, target, postprocs)
        except ReplayFailure:  # a postprocessor rejected it: left out
            continue
        out.append((n, r.with_knobs(knobs[n]) if knobs else r))
    return out


def tile_rules_isolated(measurer: object, mod: object, rule: str = "conv", timeout_s: float = 300.0,
                        space: int = 0) -> list[Replayed]:
    """tile_rule_schedules, in `measurer`'s build workers: a rule space's instances are postprocessed in
    parts, one per worker (a 32-instance conv space takes seconds in one); the rule's order is kept, and a
    worker that dies loses its part only."""

    from ..measure.pool import WorkerCrash, WorkerError, WorkerTimeout
    parts = max(1, measurer.settings.build_workers) if space else 1
    jobs = [{"mod_json": _saved_json(mod), "target_config": measurer.target_config, "rule": rule, "space": space,
             "part": [i, parts]} for i in range(parts)]
    outs = measurer.call_isolated_many("recommender.transfer.replay:tile_rules_serialized", jobs, timeout_s)
    found = sorted((o for out in outs if not isinstance(out, (WorkerTimeout, WorkerCrash, WorkerError))
                    for o in out), key=lambda o: o["index"])
    return [Replayed(mod_json=o["mod_json"], trace_json=o["trace_json"], knobs=o.get("knobs"))
            for o in found]


def _in_worker(measurer: object, function: str, kwargs: dict, timeout_s: float) -> list[dict]:
    """measurer.call_isolated(function, kwargs): what it returns, [] where the worker dies, hangs or raises."""
    from ..measure.pool import WorkerCrash, WorkerError, WorkerTimeout
    try:
        return measurer.call_isolated(function, kwargs, timeout_s)
    except (WorkerTimeout, WorkerCrash, WorkerError):
        return []


def tile_rules_serialized(mod_json: str, target_config: dict, rule: str = "conv", space: int = 0,
                          part: tuple[int, int] = (0, 1)) -> list[dict]:
    """The worker side of tile_rules_isolated: its part of the instances, each with its index in the rule's list."""
    import tvm
    built = _tile_rule_parts(_load_mod(mod_json), _target(json.dumps(target_config, sort_keys=True)), rule, space,
                             tuple(part))
    return [{"index": i, "trace_json": r.trace_json, "mod_json": tvm.ir.save_json(r.mod), "knobs": r.knobs}
            for i, r in built]


def sample_isolated(measurer: object, mod: object, n: int, seed: int = 0, timeout_s: float = 300.0,
                    rules: bool = False) -> tuple[list[Replayed], list[Replayed]]:
    """(rule_schedules if `rules`, sample_schedules), run in one of `measurer`'s build workers; a draw that
    kills TVM costs only its worker (none of either then)."""
    kwargs = {"mod_json": _saved_json(mod), "target_config": measurer.target_config, "n": n, "seed": seed,
              "rules": rules}
    out = _in_worker(measurer, "recommender.transfer.replay:sample_serialized", kwargs, timeout_s)
    drawn = [(o.get("rule", False), Replayed(mod_json=o["mod_json"], trace_json=o["trace_json"]))
             for o in out]
    return [r for rule, r in drawn if rule], [r for rule, r in drawn if not rule]


def sample_serialized(mod_json: str, target_config: dict, n: int, seed: int, rules: bool = False) -> list[dict]:
    """The worker side of sample_isolated: rule schedules (marked) first, then the draws."""
    import tvm
    target = _target(json.dumps(target_config, sort_keys=True))
    mod = _load_mod(mod_json)
    built = [(True, r) for r in (rule_schedules(mod, target) if rules else [])]
    built += [(False, r) for r in sample_schedules(mod, target, n, seed)]
    return [{"trace_json": r.trace_json, "mod_json": tvm.ir.save_json(r.mod), "rule": rule} for rule, r in built]


_SAVED: dict[int, tuple[object, str]] = {}  # id(mod) -> (mod, its JSON); the mod is kept so its id stays its own


def _saved_json(mod: object) -> str:
    """tvm.ir.save_json(mod), cached: one kernel's many candidates send the same few modules."""
    import tvm
    hit = _SAVED.get(id(mod))
    if hit is None or hit[0] is not mod:
        if len(_SAVED) >= 64:
            _SAVED.pop(next(iter(_SAVED)))
        hit = _SAVED[id(mod)] = (mod, tvm.ir.save_json(mod))
    return hit[1]


@lru_cache(maxsize=64)
def _load_mod(mod_json: str) -> object:
    import tvm
    return tvm.ir.load_json(mod_json)


@lru_cache(maxsize=4)
def _target(config_json: str) -> object:
    import tvm
    return tvm.target.Target(json.loads(config_json))


@lru_cache(maxsize=4)
def _postprocs(target_mod_json: str, config_json: str) -> list:
    return postprocs_for(_load_mod(target_mod_json), _target(config_json))


def renamed_trace(trace_json: list, source_mod: object, mapping: dict[str, str]) -> object:
    """The source trace as a Trace object whose block lookups use `mapping`."""
    from tvm.s_tir import Schedule, Trace
    from tvm.s_tir.schedule import Instruction
    sch = Schedule(source_mod)
    Trace.apply_json_to_schedule(trace_json, sch)
    trace = sch.trace
    insts, decisions = [], {}
    for inst in trace.insts:
        new = inst
        if inst.kind.name == "GetSBlock":
            name = str(inst.attrs[0])
            new = Instruction(inst.kind, list(inst.inputs), [mapping.get(name, name), *list(inst.attrs)[1:]],
                              list(inst.outputs))
        insts.append(new)
        if inst in trace.decisions:
            decisions[new] = trace.decisions[inst]
    return Trace(insts, decisions)


def _trace_json_of(sch: object) -> list:
    from featurize.trace_json import trace_to_json
    return trace_to_json(sch.trace)


def _one_line(err: BaseException) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "Error" in ln or "error" in ln:
            return ln[:300]
    return (lines[-1] if lines else type(err).__name__)[:300]
