"""`make_static` on hand-written graphs: an `If` on a static dim is replaced by the branch it takes."""
from __future__ import annotations

import numpy as np
import pytest

from recommender.frontend.onnx_static import make_static


def _if_on_dim_graph():
    """y = a + t + b, where (a, b) = If(Shape(x)[1] == 4) then (Relu(x) * 2, the same) else (-x, the same), x of
    dims [batch, features], t = Abs(x). The then branch holds a Constant node, the else
    branch holds an initializer, and both hand back one tensor twice."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def value(name: str):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", "features"])

    then_branch = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]),
         helper.make_node("Constant", [], ["two"], value=numpy_helper.from_array(np.array(2.0, np.float32))),
         helper.make_node("Mul", ["r", "two"], ["then_out"])], "then", [], [value("then_out"), value("then_out")])
    else_branch = helper.make_graph(
        [helper.make_node("Mul", ["x", "minus_one"], ["else_out"])], "else", [], [value("else_out"), value("else_out")],
        [numpy_helper.from_array(np.array(-1.0, np.float32), "minus_one")])
    nodes = [helper.make_node("Abs", ["x"], ["t"]),
             helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "one"], ["dim"], axis=0),
             helper.make_node("Equal", ["dim", "four"], ["cond"]),
             helper.make_node("If", ["cond"], ["a", "b"], then_branch=then_branch, else_branch=else_branch),
             helper.make_node("Add", ["a", "t"], ["at"]),
             helper.make_node("Add", ["at", "b"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [value("x")], [value("y")],
        [numpy_helper.from_array(np.array(1, np.int64), "one"), numpy_helper.from_array(np.array(4, np.int64), "four")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def _run(model, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


@pytest.mark.parametrize("features", [4, 3])
def test_an_if_on_a_static_dim_becomes_the_branch_it_takes(features):
    import onnx
    model = _if_on_dim_graph()
    x = np.random.default_rng(0).standard_normal((2, features)).astype(np.float32)
    static, _ = make_static(model, {"x": [2, features]})
    onnx.checker.check_model(static)
    assert [n.op_type for n in static.graph.node if n.op_type in ("If", "Shape", "Equal")] == []
    outputs = [o for n in static.graph.node for o in n.output]
    assert len(outputs) == len(set(outputs))
    # ONNX Runtime does not run the original (it loses an If output handed back twice): numpy says what it means
    expected = np.abs(x) + (4 * np.maximum(x, 0) if features == 4 else -2 * x)
    np.testing.assert_allclose(_run(static, x), expected, rtol=1e-6)


def test_an_if_inside_the_branch_taken_reads_the_renamed_tensors_and_folds_too():
    """The branch taken holds an If of its own, on its own dim test, whose branches read a tensor the outer
    branch made (renamed when the outer If is replaced): both Ifs go, and the result is what the graph means."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def value(name: str):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", "features"])

    def dim_test(prefix: str) -> list:
        return [helper.make_node("Shape", ["x"], [f"{prefix}shape"]),
                helper.make_node("Gather", [f"{prefix}shape", f"{prefix}i"], [f"{prefix}dim"], axis=0),
                helper.make_node("Equal", [f"{prefix}dim", f"{prefix}n"], [f"{prefix}cond"])]

    def ints(prefix: str, index: int, equals: int) -> list:
        return [numpy_helper.from_array(np.array(index, np.int64), f"{prefix}i"),
                numpy_helper.from_array(np.array(equals, np.int64), f"{prefix}n")]

    inner = helper.make_node(
        "If", ["in_cond"], ["inner_out"],
        then_branch=helper.make_graph([helper.make_node("Neg", ["r"], ["neg_r"])], "t", [], [value("neg_r")]),
        else_branch=helper.make_graph([helper.make_node("Exp", ["r"], ["exp_r"])], "e", [], [value("exp_r")]))
    outer_then = helper.make_graph([helper.make_node("Relu", ["x"], ["r"])] + dim_test("in_") + [inner],
                                   "then", [], [value("inner_out")], ints("in_", 0, 2))
    outer_else = helper.make_graph([helper.make_node("Identity", ["x"], ["same"])], "else", [], [value("same")])
    graph = helper.make_graph(
        dim_test("out_") + [helper.make_node("If", ["out_cond"], ["y"], then_branch=outer_then,
                                                   else_branch=outer_else)],
        "g", [value("x")], [value("y")], ints("out_", 1, 4))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)  # features 4, batch 2: Neg(Relu(x))
    static, _ = make_static(model, {"x": [2, 4]})
    onnx.checker.check_model(static)
    assert [n.op_type for n in static.graph.node] == ["Relu", "Neg"]
    np.testing.assert_allclose(_run(static, x), -np.maximum(x, 0))
    np.testing.assert_allclose(_run(model, x), -np.maximum(x, 0))
