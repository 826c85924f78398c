"""The `schedrec` command line: one module per command group, options defined once in `options`."""
from .main import main

__all__ = ["main"]
