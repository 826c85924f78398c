"""Every method side by side on one model: `run` (schedrec compare), `baselines` (PyTorch, ONNX Runtime),
`scratch` (MetaSchedule from scratch, the same measurer)."""
