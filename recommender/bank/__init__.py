"""The bank: per target, the MetaSchedule tuning records of the models tuned there.

- `store`: the on-disk bank (records, meta, lock, PAUSE);
- `tune`: tuning models into it with MetaSchedule through schedrec's measurer;
- `info`: summaries, import of existing MetaSchedule work dirs, notes on models measured on other CPUs;
- `sources`: the bank's source kernels, as the featurizer reads them;
- `groups`: a model's records grouped per kernel, fastest first (the one definition of a donor's name and rank);
- `index`: the bank's index (`<bank>/.index/`), so that a pool lookup reads only its classes' donors;
- `location`: where a bank lives, a folder or an fsspec URL (`--bank PATH_OR_URL`).
"""
