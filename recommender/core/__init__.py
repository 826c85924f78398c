"""The bottom of the house, imported by everything and importing nothing of ours but itself.

- `errors`: the one error family (`SchedrecError` and kinds), turned into one line by the CLI;
- `fileio`: atomic writes, gzip, JSON helpers;
- `rows`: `CandidateRow`, the measured-candidate row, with its status names;
- `row_files`: reading, writing and summarizing files of rows;
- `stopping`: signals and native sections (a stop waits for TVM to return);
- `tvm_setup`: what TVM needs registered before it schedules.
"""
