"""Quantized-weight formats on the host: checkpoint layouts and the library kernels' own layouts,
converted bit-exactly in both directions (NumPy only; no GPU)."""

from __future__ import annotations
