"""Dask worker preload: the worker process starts without torch.

`tvm_ffi` imports torch whenever it can, 4 of the 6.7 s `import tvm` takes on a 2-core EPYC (`znver3`), and
no task schedrec runs on a worker (matrix kernels, tuning tasks, the ranker's fit) touches a torch tensor.
`--cluster local:N` starts its workers with it; for workers of your own: `dask worker ADDRESS --preload
recommender.measure.worker_preload` (docs/scale.md). The measurer's own timing and build workers do the same.
"""
import sys

sys.modules.setdefault("torch", None)
