"""Fast, isolated measurement of TIR kernels on the target: persistent build and timing workers."""
from .measurer import MeasureResult, MeasureSettings, Measurer  # noqa: F401
