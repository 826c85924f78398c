"""schedrec: ML-guided schedule recommender for Apache TVM MetaSchedule (the user-facing package)."""
__version__ = "0.1.0"
