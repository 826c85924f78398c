"""Per-call profiles of compiled models: where the time between the kernels goes."""
