"""Which GPU chip a device preset, a compute capability or a report's chip id stands for.

Perfworks names metrics per chip (``GA100``, ``GH100``), not per compute capability: two
GPUs of one capability can differ (an A100 is GA100, an RTX 3090 GA102, both sm_80/86 family).
"""

from __future__ import annotations

#: ``device__attribute_chip`` values seen in the public reports (SOURCES.md of
#: ``shared/datasets/ncu-reports``): the only ids taken as facts here.
CHIP_IDS = {0x166: "TU106", 0x170: "GA100", 0x172: "GA102", 0x174: "GA104", 0x180: "GH100"}

#: The chip of each device preset in :mod:`workbench.devices`.
PRESET_CHIPS = {
    "t4": "TU104",
    "a100": "GA100",
    "rtx3090": "GA102",
    "l40s": "AD102",
    "h100": "GH100",
    "h200": "GH100",
}

#: The most common chip of each compute capability (for a GPU known only by its capability).
CC_CHIPS = {75: "TU102", 80: "GA100", 86: "GA102", 87: "GA10B", 89: "AD102", 90: "GH100"}


def chip_for_cc(cc: int) -> str | None:
    """The representative chip of compute capability ``cc`` (80 -> GA100), or None."""
    return CC_CHIPS.get(cc)


def chip_for_preset(preset: str) -> str | None:
    """The chip of a device preset name (``h200`` -> GH100), or None."""
    return PRESET_CHIPS.get(preset.lower().replace("-", "").replace(" ", ""))


def chip_for_name(device_name: str, cc: int | None = None) -> str | None:
    """The chip of a GPU by its marketing name (``NVIDIA H200``), else by ``cc``."""
    key = device_name.lower()
    for token, chip in (
        ("h100", "GH100"),
        ("h200", "GH100"),
        ("h800", "GH100"),
        ("gh200", "GH100"),
        ("a100", "GA100"),
        ("a800", "GA100"),
        ("a30", "GA100"),
        ("l40", "AD102"),
        ("4090", "AD102"),
        ("3090", "GA102"),
        ("a40", "GA102"),
        ("a10", "GA102"),
        ("t4", "TU104"),
    ):
        if token in key:
            return chip
    return chip_for_cc(cc) if cc is not None else None


def chip_for_id(chip_id: int | None, cc: int | None = None) -> str | None:
    """The chip of a report's ``device__attribute_chip`` value, else of its capability."""
    if chip_id is not None and chip_id in CHIP_IDS:
        return CHIP_IDS[chip_id]
    return chip_for_cc(cc) if cc is not None else None
