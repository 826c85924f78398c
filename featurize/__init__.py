"""Featurisation of kernels and schedules: pure functions of (kernel, trace)."""
