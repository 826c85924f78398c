"""Small hand-written TIR kernels for measurement tests: good ones and deliberately broken ones."""
from __future__ import annotations

import tvm
from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def matmul64(a: T.Buffer((64, 64), "float32"), b: T.Buffer((64, 64), "float32"),
             c: T.Buffer((64, 64), "float32")):
    for i, j, k in T.grid(64, 64, 64):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                c[vi, vj] = T.float32(0)
            c[vi, vj] = c[vi, vj] + a[vi, vk] * b[vk, vj]


@T.prim_func(s_tir=True)
def add1024(a: T.Buffer((1024,), "float32"), b: T.Buffer((1024,), "float32")):
    for i in range(1024):
        with T.sblock("B"):
            vi = T.axis.remap("S", [i])
            b[vi] = a[vi] + T.float32(1)


@T.prim_func(s_tir=True)
def add1024_wrong(a: T.Buffer((1024,), "float32"), b: T.Buffer((1024,), "float32")):
    """Same signature as add1024 but adds 2: a deliberately wrong candidate."""
    for i in range(1024):
        with T.sblock("B"):
            vi = T.axis.remap("S", [i])
            b[vi] = a[vi] + T.float32(2)


@T.prim_func(s_tir=True)
def segfaults(a: T.Buffer((16,), "float32"), b: T.Buffer((16,), "float32")):
    """Writes far outside its output buffer."""
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.remap("S", [i])
            b[vi * 100000000] = a[vi]


@T.prim_func(s_tir=True)
def fails_build(a: T.Buffer((16,), "float32"), b: T.Buffer((16,), "float32")):
    """Uses a GPU-only intrinsic that the CPU code generator rejects."""
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.remap("S", [i])
            b[vi] = T.call_intrin("float32", "tirx.tvm_thread_allreduce", a[vi])


@T.prim_func(s_tir=True)
def fails_at_run(a: T.Buffer((16,), "float32"), b: T.Buffer((16,), "float32")):
    """Raises a runtime error (a failed assertion) when called."""
    assert a[0] > T.float32(1000), "schedrec test: runtime check failed"
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.remap("S", [i])
            b[vi] = a[vi]


@T.prim_func(s_tir=True)
def hangs(a: T.Buffer((16,), "float32"), b: T.Buffer((16,), "float32")):
    """Runs for hours: 2^40 serial iterations."""
    for i, j in T.grid(1048576, 1048576):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                b[0] = T.float32(0)
            b[0] = b[0] + a[(vi + vj) % 16]


@T.prim_func(s_tir=True)
def take_rows(table: T.Buffer((100, 8), "float32"), ids: T.Buffer((16,), "int64"),
              out: T.Buffer((16, 8), "float32")):
    """An embedding lookup: out[i] = table[ids[i]] (ids clamped to the table, as TVM's take does)."""
    for i, j in T.grid(16, 8):
        with T.sblock("take"):
            vi, vj = T.axis.remap("SS", [i, j])
            out[vi, vj] = table[T.min(T.max(T.int64(0), ids[vi]), T.int64(99)), vj]


@T.prim_func(s_tir=True)
def take_rows_wrong(table: T.Buffer((100, 8), "float32"), ids: T.Buffer((16,), "int64"),
                    out: T.Buffer((16, 8), "float32")):
    """Same signature, but always reads row 0: right only when every id is 0."""
    for i, j in T.grid(16, 8):
        with T.sblock("take"):
            vi, vj = T.axis.remap("SS", [i, j])
            out[vi, vj] = table[T.min(T.max(T.int64(0), ids[vi] * T.int64(0)), T.int64(99)), vj]


def as_mod(func) -> tvm.IRModule:
    return tvm.IRModule({"main": func})
