"""SI formatting shared by the reports, the profile summary and the roofline ceilings."""

from __future__ import annotations

import pytest

from workbench.units import si


@pytest.mark.parametrize(
    "value,unit,shown",
    [
        (4.8e12, "B/s", "4.8 TB/s"),
        (1.979e15, "op/s", "1.98 Pop/s"),
        (2.5e3, "op/s", "2.5 kop/s"),
        (999.0, "B/s", "999 B/s"),
        (1.25e-5, "s", "12.5 µs"),  # a kernel's duration: microseconds, not 1.25e-05 s
        (3.2e-3, "s", "3.2 ms"),
        (4e-10, "s", "0.4 ns"),  # below the smallest prefix: it stays
        (0.0, "s", "0 s"),
        (-2e6, "B/s", "-2 MB/s"),
    ],
)
def test_si_picks_the_largest_prefix_that_keeps_the_number_at_one_or_more(
    value: float, unit: str, shown: str
) -> None:
    assert si(value, unit) == shown


def test_si_of_nothing_is_the_placeholder_asked_for() -> None:
    assert si(None, "B/s") == "-"
    assert si(None, "s", missing="n/a") == "n/a"
