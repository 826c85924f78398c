"""Transfer-tuning from the bank: a kernel goes candidates -> select -> measure -> choose.

- `kernel`: the per-kernel steps (find candidates, measure the selected ones, choose);
- `driver`: the one resumable per-kernel loop (rows saved after each kernel, PAUSE honoured);
- `exhaustive`: exhaustive replay of a model (measure every candidate);
- `matrix`: the transfer matrix (every bank model replayed from the others, for training rankers);
- `budgeted`: budgeted transfer (a ranker picks which candidates to measure, under a budget);
- `database`, `run`: the output database and what model-level runs share.
"""
from .choice import KernelChoice, choice_from_rows
from .database import write_database
from .exhaustive import exhaustive_replay
from .kernel import FoundCandidates, find_candidates, measure_kernel, transfer_kernel

__all__ = ["KernelChoice", "choice_from_rows", "write_database", "exhaustive_replay", "FoundCandidates",
           "find_candidates", "measure_kernel", "transfer_kernel"]
