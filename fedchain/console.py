"""The console the commands print their tables on, and the JSON they print for other programs."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from typing import Any

from rich.console import Console


def stdout_console(piped_width: int) -> Console:
    """Standard output as a rich console: the terminal's own width, or ``piped_width`` columns
    when it is a file or a pipe (rich would cut it to 80, wrapping tables, addresses and hashes)."""
    return Console() if sys.stdout.isatty() else Console(width=piped_width)


def machine_json(value: Any) -> str:
    """``value`` as standard JSON for other programs (``--json``, metrics files).

    NaN and infinities become ``null``: RFC 8259 has no such numbers, and
    parsers such as jq's or JavaScript's reject Python's ``NaN``.
    """
    return json.dumps(_finite(value), indent=2, allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value
