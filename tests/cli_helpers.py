"""Shared by the command-line and reliability tests: running the CLI, checking its one-line errors, small
ONNX models and a child process that meets file permissions even as root."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str, preexec=None) -> subprocess.CompletedProcess:
    """`schedrec ARGS` in a child process, from the repository root."""
    return subprocess.run([sys.executable, "-m", "recommender.cli", *args], capture_output=True, text=True,
                          timeout=600, preexec_fn=preexec, cwd=ROOT)


def run_main(*args: str) -> subprocess.CompletedProcess:
    """`schedrec ARGS` in this process (no interpreter and import to pay for), as `run_cli` reports it: its exit
    code and what it printed on stdout and stderr."""
    import contextlib
    import io

    from recommender.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as stop:  # argparse refuses bad arguments by exiting
            code = stop.code if isinstance(stop.code, int) else 2
    return subprocess.CompletedProcess(["schedrec", *args], code, out.getvalue(), err.getvalue())


def main_printing(*argv: str) -> tuple[int, str]:
    """`schedrec ARGS` in this process (`run_main`): its exit code and what it printed on stdout; what it printed on
    stderr goes on to this process's stderr (capsys reads it)."""
    r = run_main(*argv)
    sys.stderr.write(r.stderr)
    return r.returncode, r.stdout


def still_running(pids: list[int]) -> list[int]:
    """Those of `pids` whose process is alive and not a zombie (a stopped run's orphaned workers)."""
    import psutil
    return [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


def load_script(name: str):
    """scripts/NAME.py imported as module NAME (registered in sys.modules, as its dataclasses need)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def assert_one_line_error(code: int, err: str, message: str) -> None:
    """Exit code 2, exactly one `schedrec...` line on stderr carrying `message`, no traceback."""
    lines = [ln for ln in err.splitlines() if ln.startswith("schedrec")]
    assert code == 2, err
    assert len(lines) == 1 and message in lines[0], err
    assert "Traceback" not in err


def single_op_onnx(path: str | Path, op: str, **attrs: object) -> str:
    """An ONNX model of one `op` node on a 1x4 float input; returns its path."""
    import onnx
    from onnx import TensorProto, helper
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    graph = helper.make_graph([node], op.lower(), [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def without_root_file_access() -> None:
    """preexec_fn: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the capability bounding set before exec,
    so that file permissions apply to the child even when the tests run as root."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")
