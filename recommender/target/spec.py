"""Hardware targets: detect the host CPU, parse JSON targets, and name them with a stable target key.

A target key (``llvm-znver3-2c``) names the per-target folder ``models/<target-key>/``.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from ..core.errors import TargetError


@dataclass(frozen=True)
class TargetSpec:
    """A TVM target as a JSON dict, plus its stable key."""

    config: dict

    @property
    def key(self) -> str:
        return target_key(self.config)

    def tvm(self) -> object:
        """The `tvm.target.Target` for this spec."""
        import tvm
        try:
            return tvm.target.Target(self.config)
        except Exception as err:
            raise TargetError(f"TVM rejects target {json.dumps(self.config)}: {str(err).splitlines()[-1]}") from err


def physical_cores() -> int:
    """Physical cores available to this process (logical cores if that is unknown)."""
    try:
        import psutil
        n = psutil.cpu_count(logical=False)
    except ImportError:
        n = None
    avail = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(n or avail, avail))


def host_mcpu() -> str:
    """LLVM's name for the host CPU (``znver3``, ``skylake-avx512``, ...)."""
    from tvm.target import codegen
    return str(codegen.llvm_get_system_cpu())


# On CPUs with AVX-512, LLVM turns strided loads of transferred schedules into vgather (a ResNet-50 3x3
# conv ran 7.9x slower on Zen 5); these attributes keep it to plain loads and shuffles.
NO_GATHER = ["+prefer-no-gather", "+prefer-no-scatter"]


def float32_lanes(target: object) -> int:
    """float32 lanes of the widest vector register a `tvm.target.Target` compiles for: 16 with AVX-512F, else 8.
    (LLVM's own `llvm_get_vector_width` answers 512 for znver3, an AVX2 CPU, so the feature is asked instead.)"""
    from tvm.target import codegen
    return 16 if codegen.llvm_cpu_has_features("avx512f", target) else 8


def cpu_name() -> str:
    """The host CPU's model name (from /proc/cpuinfo), for tables that say where they were measured."""
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or "unknown"


def host_cpu_flags() -> set[str]:
    """The host's CPU feature flags (from /proc/cpuinfo; empty where it cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def native_config(mcpu: str, cores: int, flags: set[str]) -> dict:
    """The LLVM target for a CPU: its name, its cores, and no gathers where it has AVX-512."""
    config = {"kind": "llvm", "mcpu": mcpu, "num-cores": cores}
    if "avx512f" in flags:
        config["mattr"] = list(NO_GATHER)
    return config


def native_target() -> TargetSpec:
    """The host CPU as an LLVM target that compiles well for it (see `native_config`)."""
    return TargetSpec(native_config(host_mcpu(), physical_cores(), host_cpu_flags()))


def parse_target(spec: str | None, validate: bool = True) -> TargetSpec:
    """`native` (or None), a JSON object string, or a path to a JSON file. `validate=False` leaves out what needs
    TVM (LLVM's check of the mcpu, building the TVM target: seconds of imports; `num-cores` is still checked), for
    what only reads a target's key and folders and compiles nothing (the scripts that write cards and figures)."""
    if spec is None or spec == "native":
        return native_target()
    text = spec
    if not spec.lstrip().startswith(("{", "[")):
        if not os.path.exists(spec):
            raise TargetError(f"target must be 'native', a JSON object or a JSON file; no such file: {spec}")
        try:
            with open(spec, encoding="utf-8") as f:
                text = f.read()
        except OSError as err:
            raise TargetError(f"cannot read target file {spec}: {err.strerror}") from err
    try:
        config = json.loads(text)
    except json.JSONDecodeError as err:
        raise TargetError(f"target is not valid JSON ({err.msg} at line {err.lineno} column {err.colno})") from err
    if not isinstance(config, dict) or "kind" not in config:
        raise TargetError('target JSON must be an object with a "kind", e.g. {"kind": "llvm", "mcpu": "znver3"}')
    if config["kind"] != "llvm":
        raise TargetError(f"schedrec targets CPUs: target kind must be 'llvm', got {config['kind']!r}")
    check_llvm_config(config, ask_llvm=validate)
    t = TargetSpec(config)
    if validate:
        t.tvm()  # validate early
    return t


def check_llvm_config(config: dict, ask_llvm: bool = True) -> None:
    """Refuse, in one line each and before TVM sees it, what a typed LLVM target gets wrong: no `num-cores` (the
    thread count every measurement and the target key need), and (with `ask_llvm`, which loads TVM) an `mcpu` that
    LLVM does not know for the target's triple (LLVM would compile for a generic CPU instead, warning on every
    build)."""
    cores = config.get("num-cores")
    if cores is None:
        raise TargetError(f'the target needs "num-cores" (the threads a model runs with; this machine has '
                          f'{physical_cores()} physical cores), e.g. {json.dumps({**config, "num-cores": physical_cores()})}')
    if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
        raise TargetError(f'"num-cores" must be a whole number of 1 or more, got {cores!r}')
    mcpu = config.get("mcpu")
    if mcpu is None or not ask_llvm:
        return
    import tvm
    from tvm.target import codegen
    triple = config.get("mtriple") or codegen.llvm_get_system_triple()
    known = list(codegen.llvm_get_cpu_archlist(tvm.target.Target({"kind": "llvm", "mtriple": triple})))
    if known and mcpu not in known:
        import difflib
        near = difflib.get_close_matches(str(mcpu), known, n=5, cutoff=0.5)
        raise TargetError(f"LLVM knows no CPU {mcpu!r} for {triple}" + (
            f"; nearest: {', '.join(near)}" if near else f"; known: {', '.join(sorted(known))}"))


def target_key(config: dict) -> str:
    """A stable, file-system-safe name: ``llvm-<mcpu>-<cores>c`` (plus the triple when cross-compiling)."""
    parts = [str(config.get("kind", "llvm")), str(config.get("mcpu", "generic"))]
    triple = config.get("mtriple")
    if triple:
        parts.append(str(triple).split("-")[0])
    cores = config.get("num-cores")
    if cores:
        parts.append(f"{int(cores)}c")
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(parts))
