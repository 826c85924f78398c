"""Datasets from the bank, ranking models and their offline evaluation."""
