"""An ONNX graph with dynamic input dims made static: dims bound, shape arithmetic folded to constants.

Exporters that write dynamic axes compute reshape targets and scale factors at run time from `Shape` nodes.
TVM's Relax ONNX frontend turns that arithmetic into symbolic scalars, and some of them come out with a
dtype the next operator refuses (a float64 scale in attention). With every input dim known, those
subgraphs are constant: `make_static` writes the dims into the graph inputs, infers the shapes, and
evaluates every node whose inputs are all known (constants, or the `Shape` of a tensor of static shape)
with ONNX's reference evaluator, keeping the graph's own dtypes. An `If` whose condition that folding made
constant (a test on a static dim, as torch's traced `local_response_norm` writes) is replaced by the nodes of
the branch it takes, which TVM's frontend, having no `If`, then imports.
"""
from __future__ import annotations

import numpy as np

_NEVER_FOLD = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
               "Bernoulli", "If", "Loop", "Scan"}
_MAX_FOLDED_ELEMENTS = 1 << 16  # fold shape arithmetic, never materialise big tensors
_MAX_ROUNDS = 100  # rounds of shape inference and folding, each folding what the last made known (torchvision swin_t: 18)


def make_static(model: object, shapes: dict[str, list[int]]) -> tuple[object, dict[str, list[int]]]:
    """A copy of `model` with these input shapes and its constant subgraphs folded, and the static shape of
    every tensor whose shape inference found one (inputs included). Folding and shape inference take turns
    until nothing more folds: a shape that inference finds only once a slice's bounds are constants (the
    halves of a ShuffleNet's channel split) makes the arithmetic after it constant in the next round."""
    model = _with_input_dims(model, shapes)
    for _ in range(_MAX_ROUNDS):
        static = _static_shapes(_inferred(model))
        folded = _folded(model, static)
        if folded is None:
            return model, static
        model = folded
    return model, _static_shapes(_inferred(model))


def _inferred(model: object) -> object:
    import onnx
    try:
        return onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # shape inference refuses some graphs; fold what the inputs' shapes give alone
        return model


def _folded(model: object, static: dict[str, list[int]]) -> object | None:
    """The model with every node whose outputs are constant replaced by initializers (None: none is)."""
    import onnx
    from onnx import numpy_helper
    known = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    kept, changed = [], False
    for node in model.graph.node:
        if node.op_type == "If" and node.domain in ("", "ai.onnx") and node.input[0] in known:
            nodes, constants = _taken_branch(node, bool(np.asarray(known[node.input[0]]).reshape(-1)[0]))
            kept += nodes
            known.update(constants)
            changed = True
            continue
        values = _fold(node, known, static, list(model.opset_import))
        if values is None:
            kept.append(node)
        else:
            known.update(zip(node.output, values))
            changed = True
    if not changed:
        return None
    used = {i for n in kept for i in n.input} | {o.name for o in model.graph.output}
    graph = model.graph
    inits = [numpy_helper.from_array(np.asarray(v), name) for name, v in known.items() if name in used]
    new_graph = onnx.helper.make_graph(kept, graph.name, list(graph.input), list(graph.output), inits,
                                       value_info=[])
    return onnx.helper.make_model(new_graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)


def _taken_branch(node: object, condition: bool) -> tuple[list, dict[str, np.ndarray]]:
    """The nodes of the branch an `If` takes under a constant `condition`, and the branch's initializers: names
    made inside the branch get the If's output names (its results) or a prefix unique to this If (the rest), so
    that none clashes with the outer graph's; names from the outer scope stay as they are."""
    import onnx
    from onnx import numpy_helper
    branch = next(a.g for a in node.attribute if a.name == ("then_branch" if condition else "else_branch"))
    prefix = f"{node.output[0]}/{'then' if condition else 'else'}/"
    inner = {o for n in branch.node for o in n.output if o} | {t.name for t in branch.initializer}
    rename = {name: prefix + name for name in inner}
    passed = []  # results that are an outer tensor, or a branch tensor handed back twice: copied by Identity
    for out, result in zip(branch.output, node.output):
        if out.name in inner and rename[out.name].startswith(prefix):
            rename[out.name] = result
        else:
            passed.append((out.name, result))
    nodes = []
    for inner_node in branch.node:
        copy = onnx.NodeProto()
        copy.CopyFrom(inner_node)
        _rename_inputs(copy, rename)
        copy.output[:] = [rename.get(o, o) for o in copy.output]
        copy.name = prefix + copy.name if copy.name else ""
        nodes.append(copy)
    nodes += [onnx.helper.make_node("Identity", [rename.get(name, name)], [result]) for name, result in passed]
    constants = {rename[t.name]: numpy_helper.to_array(t) for t in branch.initializer}
    return nodes, constants


def _rename_inputs(node: object, rename: dict[str, str]) -> None:
    """Rename `node`'s inputs, and those of the nodes in its subgraphs that read the outer scope."""
    node.input[:] = [rename.get(i, i) for i in node.input]
    for attribute in node.attribute:
        for graph in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
            for inner in graph.node:
                _rename_inputs(inner, rename)


def _with_input_dims(model: object, shapes: dict[str, list[int]]) -> object:
    import onnx
    model = onnx.ModelProto.FromString(model.SerializeToString())
    for i in model.graph.input:
        if i.name in shapes:
            for d, v in zip(i.type.tensor_type.shape.dim, shapes[i.name]):
                d.Clear()
                d.dim_value = int(v)
    return model


def _static_shapes(model: object) -> dict[str, list[int]]:
    out = {}
    g = model.graph
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        t = vi.type.tensor_type
        if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
            out[vi.name] = [d.dim_value for d in t.shape.dim]
    return out


def _fold(node: object, known: dict, static: dict, opsets: list) -> list | None:
    """The node's output values when they are constant (None: keep the node)."""
    if node.op_type in _NEVER_FOLD or node.domain not in ("", "ai.onnx") or any(a.g.node for a in node.attribute):
        return None
    if node.op_type == "Shape" and node.input[0] in static:
        shape = np.array(static[node.input[0]], dtype=np.int64)
        start, end = 0, None
        for a in node.attribute:
            start = a.i if a.name == "start" else start
            end = a.i if a.name == "end" else end
        return [shape[start:end]]
    if node.op_type == "Size" and node.input[0] in static:
        return [np.array(int(np.prod(static[node.input[0]])), dtype=np.int64)]
    if not all(i == "" or i in known for i in node.input) or (not node.input and node.op_type != "Constant"):
        return None
    if any(np.asarray(known[i]).size > _MAX_FOLDED_ELEMENTS for i in node.input if i):
        return None
    try:
        from onnx import helper
        from onnx.reference import ReferenceEvaluator
        inputs = [i for i in node.input if i]
        graph = helper.make_graph(
            [node], "fold",
            [helper.make_tensor_value_info(i, helper.np_dtype_to_tensor_dtype(np.asarray(known[i]).dtype), None)
             for i in inputs],
            [helper.make_tensor_value_info(o, 0, None) for o in node.output])
        evaluator = ReferenceEvaluator(helper.make_model(graph, opset_imports=opsets))
        values = evaluator.run(None, {i: known[i] for i in inputs})
    except Exception:
        return None
    if any(np.asarray(v).size > _MAX_FOLDED_ELEMENTS for v in values):
        return None
    return list(values)
