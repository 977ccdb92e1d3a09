"""Numbers for people, in every report: 39,940 / 99.6 / 0.173, never 1.534e+04."""

from __future__ import annotations

import math


def human(value: float | None) -> str:
    """At least 3 significant digits, thousands separated; "—" for a missing value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    digits = 2 - math.floor(math.log10(abs(value)))
    return f"{value:,.{digits}f}"
