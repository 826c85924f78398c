"""Models in, kernels out: zoo, ONNX and torch.export import, the ONNX/Relax rewrites, kernel extraction.

- `model_import`: a model spec (zoo:NAME, .onnx, .pt2) to a Relax module (`import_model`);
- `onnx_rewrite`, `onnx_static`: ONNX graphs as exported made importable (dynamic dims, unrolled RNNs...);
- `canonical`, `canonical_ops`: Relax rewrites that give equal kernels equal TIR;
- `zoo`, `zoo_nets`: the in-project model zoo;
- `kernels`: a model's kernels (`Kernel`: TIR, class, weight, FLOPs).
"""
