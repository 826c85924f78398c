"""The bank: per target, the MetaSchedule tuning records of the models tuned there.

- `store`: the on-disk bank (records, meta, lock, PAUSE);
- `tune`: tuning models into it with MetaSchedule through schedrec's measurer;
- `info`: summaries, import of existing MetaSchedule work dirs, notes on models measured on other CPUs;
- `sources`: the bank's source kernels, as the featurizer reads them.
"""
