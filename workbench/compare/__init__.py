"""Comparison with library baselines: selection, the baseline worker, the table and its storage."""
