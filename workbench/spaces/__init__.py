"""Tuning spaces: the file format, loading with located errors, and the configs of a space."""

from __future__ import annotations

from workbench.spaces.loader import load_space
from workbench.spaces.model import Config, SpaceSpec, config_label, shape_label
from workbench.spaces.registry import list_spaces, load_kernel, resolve_space
from workbench.spaces.space import Space, Violation

__all__ = [
    "Config",
    "Space",
    "SpaceSpec",
    "Violation",
    "config_label",
    "list_spaces",
    "load_kernel",
    "load_space",
    "resolve_space",
    "shape_label",
]
