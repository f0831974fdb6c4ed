"""One time scale for every deadline a test sets or waits on: ``CORRAL_TEST_TIME_SCALE``.

A busy machine (a CI runner, a laptop running a fanout) runs everything slower; a test's
deadline is an upper bound for "this should have happened by now", never the thing under
test, so it is ``scaled(seconds)``: the seconds times the scale (default 1). A test whose
subject *is* a deadline (a command killed at its timeout) keeps the product's value and
scales only how long it waits for the outcome. The pytest-timeout of each test scales too
(``tests/conftest.py``). Read once; a value that is not a positive finite number is a usage
error before any test is collected.
"""

from __future__ import annotations

import math
import os
from functools import cache

VARIABLE = "CORRAL_TEST_TIME_SCALE"


class TimeScaleError(ValueError):
    """``CORRAL_TEST_TIME_SCALE`` is not a positive finite number."""


@cache
def scale() -> float:
    """The factor every test deadline is multiplied by (``CORRAL_TEST_TIME_SCALE``, default 1)."""
    raw = os.environ.get(VARIABLE, "").strip()
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise TimeScaleError(
            f"{VARIABLE}={raw!r} is not a time scale: set it to a positive number such as 1 "
            f"(the default) or 3 (every test deadline three times as long), or unset it")
    return value


def scaled(seconds: float) -> float:
    """``seconds`` on this run's time scale."""
    return seconds * scale()
