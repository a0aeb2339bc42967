"""Short labels for configs drawn side by side: only the parameters that differ between them,
the others said once in a caption, as the top-configs table does. An 18-parameter config
string does not fit a chart axis or a table column."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workbench.spaces.model import config_label, parse_config_label

#: Stands for a parameter a config lacks (which sets it apart from those that have it).
_ABSENT = object()


@dataclass(frozen=True)
class ShortLabels:
    """``labels[i]``: what sets config ``i`` apart (``''`` when nothing does, or it is not a
    ``NAME=VALUE`` list); ``shared``: the parameters every config has alike."""

    labels: tuple[str, ...]
    shared: str

    @property
    def shared_text(self) -> str:
        """``shared`` with a space after each comma, so that a page can wrap it."""
        return self.shared.replace(",", ", ")


def short_labels(configs: Sequence[str | None]) -> ShortLabels:
    """The parameters that differ between ``configs`` (config keys, ``A=1,B=2``), per config.

    A parameter differs when two configs give it different values or one lacks it. A config
    that is no ``NAME=VALUE`` list (a launch imported without one) keeps its text whole.
    """
    parsed = [parse_config_label(c) if c else None for c in configs]
    known = [p for p in parsed if p is not None]
    names = list(dict.fromkeys(n for p in known for n in p))
    differing = [n for n in names if len({repr(p.get(n, _ABSENT)) for p in known}) > 1]
    shared = {n: known[0][n] for n in names if n not in differing}
    labels = tuple(
        (config_label({n: p[n] for n in differing if n in p}) if p is not None else c or "")
        for c, p in zip(configs, parsed, strict=True)
    )
    return ShortLabels(labels, config_label(shared) if known else "")
