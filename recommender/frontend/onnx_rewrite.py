"""ONNX operators that TVM's Relax frontend lacks or lowers to a kernel without donors, rewritten in the ONNX
graph into operators it maps to matmuls (run on a graph whose shapes `onnx_static.make_static` fixed).

- ``Einsum`` with two operands and a contracted index: a MatMul (batched over the indices both operands
  and the output share) between Transposes and Reshapes. The frontend lowers Einsum to a TIR kernel of its
  own class, for which no bank model has a schedule.
- ``LSTM``, ``GRU`` and ``RNN`` (refused by the frontend in TVM 0.27): unrolled over the static sequence,
  with the input projection of every step in one MatMul and one MatMul per step for the recurrence, gates
  as in the ONNX operator definitions (peepholes, reverse and bidirectional directions,
  ``linear_before_reset``; Sigmoid, Tanh and Relu activations).

- ``Attention`` (opset 23 and later, what torch.onnx writes for ``scaled_dot_product_attention`` at those
  opsets; the frontend fails on it): MatMul, scale, mask, Softmax, MatMul, with 3-D inputs split into heads
  and grouped key/value heads repeated, as in the operator's definition (bool or additive masks, causal).

A node of a form not covered (clip, input_forget, activation parameters, sequence lengths other than the
full sequence, weights that are not constants, dynamic shapes; attention with a key/value cache, a
soft cap, a sliding window, or its intermediate outputs used) is kept, and the frontend's own error or
the unsupported-operator message names it. Every rewrite computes what the operator does (tests compare
with ONNX Runtime).
"""
from __future__ import annotations

from math import prod

import numpy as np

_ACTIVATIONS = {"Sigmoid", "Tanh", "Relu"}
_MIN_OPSET = 13  # Slice with inputs, Reshape with a shape input, Concat: stable from here on


def rewrite_for_frontend(model: object, static_shapes: dict[str, list[int]]) -> object:
    """`model` with the nodes above rewritten; the same object when there is nothing to rewrite.

    `static_shapes` holds the tensors' inferred shapes (`make_static` returns them).
    """
    import onnx
    from onnx import numpy_helper

    targets = {"Einsum", "LSTM", "GRU", "RNN", "Attention"}
    if not any(n.op_type in targets for n in model.graph.node) or _opset(model) < _MIN_OPSET:
        return model
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    shapes = {**{name: list(v.shape) for name, v in consts.items()}, **static_shapes}
    for n in model.graph.node:  # Constant nodes count as initializers here
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
            shapes.setdefault(n.output[0], list(consts[n.output[0]].shape))
    types = _elem_types(model) if any(n.op_type == "Attention" for n in model.graph.node) else {}
    nodes, added, changed = [], [], False
    for i, node in enumerate(model.graph.node):
        b = _Builder(f"_rw{i}_", added)
        done = False
        if node.op_type == "Einsum":
            done = _einsum(node, shapes, b)
        elif node.op_type in ("LSTM", "GRU", "RNN"):
            done = _recurrent(node, shapes, consts, b)
        elif node.op_type == "Attention" and node.domain in ("", "ai.onnx"):
            done = _attention(node, shapes, types, b)
        nodes.extend(b.nodes if done else [node])
        changed = changed or done
    if not changed:
        return model
    g = model.graph
    graph = onnx.helper.make_graph(nodes, g.name, list(g.input), list(g.output), list(g.initializer) + added)
    return onnx.helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)


def _attrs(node: object) -> dict:
    from onnx import helper
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _elem_types(model: object) -> dict[str, int]:
    """The ONNX element type of every tensor whose type inference finds one."""
    import onnx
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:
        inferred = model
    g = inferred.graph
    types = {t.name: t.data_type for t in g.initializer}
    types.update({v.name: v.type.tensor_type.elem_type for v in list(g.input) + list(g.value_info) + list(g.output)
                  if v.type.tensor_type.elem_type})
    return types


def _opset(model: object) -> int:
    return max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)


class _Builder:
    """Nodes and constants written for one rewritten node (names prefixed so that they stay unique)."""

    def __init__(self, prefix: str, inits: list) -> None:
        self.prefix, self.inits, self.nodes, self.count = prefix, inits, [], 0

    def _name(self) -> str:
        self.count += 1
        return f"{self.prefix}{self.count}"

    def const(self, value: np.ndarray) -> str:
        from onnx import numpy_helper
        name = self._name()
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], out: str | None = None, **attrs: object) -> str:
        from onnx import helper
        out = out or self._name()
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def split(self, x: str, axis: int, parts: int) -> list[str]:
        """`x` cut into `parts` equal slices along `axis` (one node: one kernel, not one per slice)."""
        from onnx import helper
        if parts == 1:
            return [x]
        outs = [self._name() for _ in range(parts)]
        size = self.const(np.array([1] * parts, dtype=np.int64))  # the slices' sizes for a dim of `parts`
        self.nodes.append(helper.make_node("Split", [x, size], outs, name=outs[0], axis=axis))
        return outs

    def reshape(self, x: str, shape: list[int], out: str | None = None) -> str:
        return self.op("Reshape", [x, self.const(np.array(shape, dtype=np.int64))], out)

    def slice(self, x: str, axis: int, start: int, end: int) -> str:
        ints = [self.const(np.array([v], dtype=np.int64)) for v in (start, end, axis)]
        return self.op("Slice", [x, *ints])

    def transpose(self, x: str, perm: list[int], out: str | None = None) -> str:
        if perm == sorted(perm):
            return self.op("Identity", [x], out) if out else x
        return self.op("Transpose", [x], out, perm=perm)


# ---- Einsum -------------------------------------------------------------------------------------------

def _einsum(node: object, shapes: dict, b: _Builder) -> bool:
    plan = einsum_plan(_text(_attrs(node).get("equation", b"")), [shapes.get(x) for x in node.input])
    if plan is None:
        return False
    (perm_a, flat_a), (perm_b, flat_b), full, perm_out = plan
    lhs = b.reshape(b.transpose(node.input[0], perm_a), flat_a)
    rhs = b.reshape(b.transpose(node.input[1], perm_b), flat_b)
    product = b.reshape(b.op("MatMul", [lhs, rhs]), full)
    b.transpose(product, perm_out, out=node.output[0])
    return True


def einsum_plan(equation: str, shapes: list) -> tuple | None:
    """How a two-operand einsum runs as one matmul: for each operand the permute into (batch, rows or
    columns, contracted) order and the 2-D or 3-D shape it is reshaped to, the matmul's output unflattened,
    and the permute into the output's order. None where the einsum is not of that form."""
    equation = equation.replace(" ", "")
    if "->" not in equation or "." in equation or len(shapes) != 2 or None in shapes:
        return None
    ins, out = equation.split("->")
    terms = ins.split(",")
    if len(terms) != 2:
        return None
    a, b = terms
    if any(len(set(t)) != len(t) for t in (a, b, out)) or len(a) != len(shapes[0]) or len(b) != len(shapes[1]):
        return None
    size: dict[str, int] = {}
    for term, dims in ((a, shapes[0]), (b, shapes[1])):
        for letter, dim in zip(term, dims):
            if size.setdefault(letter, dim) != dim:
                return None
    if set(out) - set(a + b) or (set(a) ^ set(b)) - set(out):  # an index summed in one operand only
        return None
    batch = [c for c in out if c in a and c in b]
    rows = [c for c in a if c not in b]
    cols = [c for c in b if c not in a]
    inner = [c for c in a if c in b and c not in out]
    if not inner:
        return None
    lead = [prod(size[c] for c in batch)] if prod(size[c] for c in batch) > 1 else []
    m, k, n = (prod(size[c] for c in group) for group in (rows, inner, cols))
    flat_a = ([a.index(c) for c in batch + rows + inner], lead + [m, k])
    flat_b = ([b.index(c) for c in batch + inner + cols], lead + [k, n])
    order = batch + rows + cols
    return flat_a, flat_b, [size[c] for c in order], [order.index(c) for c in out]


# ---- LSTM, GRU, RNN -----------------------------------------------------------------------------------

_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
_DEFAULT_ACTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}


def _recurrent(node: object, shapes: dict, consts: dict, b: _Builder) -> bool:
    kind = node.op_type
    attrs = _attrs(node)
    inputs = list(node.input) + [""] * (8 - len(node.input))
    x, w, r, bias, seq_lens, h0 = inputs[:6]
    c0, peep = (inputs[6], inputs[7]) if kind == "LSTM" else ("", "")
    direction = _text(attrs.get("direction", b"forward"))
    layout = int(attrs.get("layout", 0))
    dirs = 2 if direction == "bidirectional" else 1
    per_dir = len(_DEFAULT_ACTS[kind])  # activations per direction
    acts = [_text(a) for a in attrs.get("activations", [])] or _DEFAULT_ACTS[kind] * dirs
    xs = shapes.get(x)
    if (xs is None or len(xs) != 3 or w not in consts or r not in consts or (bias and bias not in consts)
            or (peep and peep not in consts) or direction not in ("forward", "reverse", "bidirectional")
            or set(acts) - _ACTIVATIONS or len(acts) != per_dir * dirs
            or {"clip", "activation_alpha", "activation_beta"} & set(attrs) or attrs.get("input_forget", 0)):
        return False
    steps, batch = (xs[1], xs[0]) if layout else (xs[0], xs[1])
    if seq_lens:
        lens = consts.get(seq_lens)
        if lens is None or not np.all(np.asarray(lens) == steps):
            return False
    hidden = int(attrs.get("hidden_size", consts[r].shape[-1]))
    gates = _GATES[kind]
    W, R = consts[w].astype(np.float32), consts[r].astype(np.float32)
    B = consts[bias].astype(np.float32) if bias else np.zeros((dirs, 2 * gates * hidden), np.float32)
    seq = b.transpose(x, [1, 0, 2]) if layout else x  # [steps, batch, input]
    ys, hs, cs = [], [], []
    for d in range(dirs):
        reverse = direction == "reverse" or d == 1
        fa = acts[per_dir * d:per_dir * (d + 1)]
        # the input projection of every step at once: [steps, batch, gates * hidden]
        wb = B[d, :gates * hidden] + (B[d, gates * hidden:] if kind != "GRU" else 0)
        proj = b.op("Add", [b.op("MatMul", [seq, b.const(W[d].T)]), b.const(wb)])
        h = _initial(b, h0, d, layout, batch, hidden)
        c = _initial(b, c0, d, layout, batch, hidden) if kind == "LSTM" else None
        outs = [None] * steps
        per_step = b.split(proj, 0, steps)
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            xt = b.reshape(per_step[t], [batch, gates * hidden])
            if kind == "LSTM":
                h, c = _lstm_step(b, xt, h, c, R[d], consts[peep][d] if peep else None, hidden, fa)
            elif kind == "GRU":
                h = _gru_step(b, xt, h, R[d], B[d, gates * hidden:], hidden, fa,
                              int(attrs.get("linear_before_reset", 0)))
            else:
                h = _act(b, fa[0], b.op("Add", [xt, b.op("MatMul", [h, b.const(R[d].T)])]))
            outs[t] = h
        ys.append(b.op("Concat", [b.reshape(o, [1, 1, batch, hidden]) for o in outs], axis=0))
        hs.append(b.reshape(h, [1, batch, hidden]))
        cs.append(b.reshape(c, [1, batch, hidden]) if c is not None else None)
    names = list(node.output) + [""] * (3 - len(node.output))
    _emit(b, ys, 1, [2, 0, 1, 3] if layout else None, names[0])
    _emit(b, hs, 0, [1, 0, 2] if layout else None, names[1])
    if kind == "LSTM":
        _emit(b, cs, 0, [1, 0, 2] if layout else None, names[2])
    return True


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _initial(b: _Builder, state: str, d: int, layout: int, batch: int, hidden: int) -> str:
    """Direction d's initial state as [batch, hidden] (zeros when the node has none)."""
    if not state:
        return b.const(np.zeros((batch, hidden), np.float32))
    return b.reshape(b.slice(state, 1 if layout else 0, d, d + 1), [batch, hidden])


def _act(b: _Builder, name: str, x: str) -> str:
    """An activation (Sigmoid, Tanh or Relu) of `x`."""
    return b.op(name, [x])


def _lstm_step(b: _Builder, xt: str, h: str, c: str, R: np.ndarray, peep: np.ndarray | None, hidden: int,
               acts: list[str]) -> tuple[str, str]:
    f_, g_, h_ = acts
    g = b.op("Add", [xt, b.op("MatMul", [h, b.const(R.T)])])  # gates i, o, f, c
    i, o, f, cand = (b.slice(g, 1, k * hidden, (k + 1) * hidden) for k in range(4))
    if peep is not None:
        pi, po, pf = (b.const(np.asarray(peep[k * hidden:(k + 1) * hidden], np.float32)) for k in range(3))
        i = b.op("Add", [i, b.op("Mul", [pi, c])])
        f = b.op("Add", [f, b.op("Mul", [pf, c])])
    i, f, cand = _act(b, f_, i), _act(b, f_, f), _act(b, g_, cand)
    c = b.op("Add", [b.op("Mul", [f, c]), b.op("Mul", [i, cand])])
    if peep is not None:
        o = b.op("Add", [o, b.op("Mul", [po, c])])
    return b.op("Mul", [_act(b, f_, o), _act(b, h_, c)]), c


def _gru_step(b: _Builder, xt: str, h: str, R: np.ndarray, rb: np.ndarray, hidden: int, acts: list[str],
              linear_before_reset: int) -> str:
    f_, g_ = acts
    xz, xr, xh = (b.slice(xt, 1, k * hidden, (k + 1) * hidden) for k in range(3))
    if linear_before_reset:
        hr = b.op("Add", [b.op("MatMul", [h, b.const(R.T)]), b.const(rb)])
        hz, hrr, hh = (b.slice(hr, 1, k * hidden, (k + 1) * hidden) for k in range(3))
        z = _act(b, f_, b.op("Add", [xz, hz]))
        r = _act(b, f_, b.op("Add", [xr, hrr]))
        n = _act(b, g_, b.op("Add", [xh, b.op("Mul", [r, hh])]))
    else:
        hzr = b.op("Add", [b.op("MatMul", [h, b.const(R[:2 * hidden].T)]), b.const(rb[:2 * hidden])])
        z = _act(b, f_, b.op("Add", [xz, b.slice(hzr, 1, 0, hidden)]))
        r = _act(b, f_, b.op("Add", [xr, b.slice(hzr, 1, hidden, 2 * hidden)]))
        rh = b.op("MatMul", [b.op("Mul", [r, h]), b.const(R[2 * hidden:].T)])
        n = _act(b, g_, b.op("Add", [xh, b.op("Add", [rh, b.const(rb[2 * hidden:])])]))
    return b.op("Add", [n, b.op("Mul", [z, b.op("Sub", [h, n])])])  # (1 - z) * n + z * h


def _emit(b: _Builder, parts: list, axis: int, perm: list[int] | None, name: str) -> None:
    """Write one output of the node (skipped when the graph does not use it)."""
    if not name:
        return
    joined = parts[0] if len(parts) == 1 else b.op("Concat", parts, axis=axis)
    if perm is None:
        b.op("Identity", [joined], name)
    else:
        b.transpose(joined, perm, out=name)


# ---- Attention (opset 23) ------------------------------------------------------------------------------

_NEG = float(np.finfo(np.float32).min)  # a masked score: exp() of it minus the row's max is 0


def _attention(node: object, shapes: dict, types: dict, b: _Builder) -> bool:
    """Attention without a key/value cache: softmax(Q K^T * scale + mask) V per head."""
    from onnx import TensorProto
    a = _attrs(node)
    q, k, v, mask, past_k, past_v, nonpad = (list(node.input) + [""] * 7)[:7]
    if (past_k or past_v or nonpad or any(node.output[1:]) or a.get("softcap", 0.0)
            or a.get("left_window_size", -1) >= 0 or a.get("right_window_size", -1) >= 0
            or types.get(q) != TensorProto.FLOAT):
        return False
    qs, ks, vs = shapes.get(q), shapes.get(k), shapes.get(v)
    if None in (qs, ks, vs) or not len(qs) == len(ks) == len(vs) or len(qs) not in (3, 4):
        return False
    if len(qs) == 3:  # [batch, seq, heads * head size]: split into heads
        hq, hkv = int(a.get("q_num_heads", 0)), int(a.get("kv_num_heads", 0))
        if not hq or not hkv or qs[2] % hq or ks[2] % hkv or vs[2] % hkv:
            return False
        batch, sq, skv, d, dv = qs[0], qs[1], ks[1], qs[2] // hq, vs[2] // hkv
        q4, k4, v4 = (b.transpose(b.reshape(x, [batch, s, h, size]), [0, 2, 1, 3])
                      for x, s, h, size in ((q, sq, hq, d), (k, skv, hkv, d), (v, skv, hkv, dv)))
    else:
        (batch, hq, sq, d), (hkv, skv), dv = qs, ks[1:3], vs[3]
        q4, k4, v4 = q, k, v
    if hq != hkv:  # grouped key/value heads: each serves hq / hkv query heads in a row
        if hq % hkv:
            return False
        k4, v4 = (b.reshape(b.op("Expand", [b.reshape(x, [batch, hkv, 1, skv, size]),
                                            b.const(np.array([batch, hkv, hq // hkv, skv, size], np.int64))]),
                            [batch, hq, skv, size]) for x, size in ((k4, d), (v4, dv)))
    scale = a.get("scale") or 1.0 / float(np.sqrt(d))
    scores = b.op("Mul", [b.op("MatMul", [q4, b.transpose(k4, [0, 1, 3, 2])]), b.const(np.array(scale, np.float32))])
    if mask:
        if (shapes.get(mask) or [None])[-1] != skv or types.get(mask) not in (TensorProto.BOOL, TensorProto.FLOAT):
            return False  # a mask shorter than the keys (padded by the operator) is not rewritten
        scores = (b.op("Where", [mask, scores, b.const(np.array(_NEG, np.float32))])
                  if types[mask] == TensorProto.BOOL else b.op("Add", [scores, mask]))
    if a.get("is_causal", 0):  # query i attends keys j <= i
        allowed = np.arange(skv)[None, :] <= np.arange(sq)[:, None]
        scores = b.op("Where", [b.const(allowed), scores, b.const(np.array(_NEG, np.float32))])
    out = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), v4])
    if len(qs) == 3:
        b.reshape(b.transpose(out, [0, 2, 1, 3]), [batch, sq, hq * dv], out=node.output[0])
    else:
        b.op("Identity", [out], node.output[0])
    return True

