"""The search: problem, samplers and proposers, the tune loop and its planning."""
