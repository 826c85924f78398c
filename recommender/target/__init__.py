"""Hardware targets: the target spec and key (`spec`), and the per-target folders under models/ with the
nearest-target choice for a CPU that has none of its own (`folders`)."""
