"""The console the commands print their tables on, and the JSON they print for other programs."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from typing import Any

from rich.columns import Columns
from rich.console import Console
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text


def stdout_console(piped_width: int) -> Console:
    """Standard output as a rich console: the terminal's own width, or ``piped_width`` columns
    when it is a file or a pipe (rich would cut it to 80, wrapping tables, addresses and hashes)."""
    return Console() if sys.stdout.isatty() else Console(width=piped_width)


def print_table(console: Console, table: Table, *, labels: int = 1, named: bool = False) -> None:
    """Print ``table`` without cutting any cell.

    Where the table fits the console's width it is printed as it is. Where it
    does not (rich would elide cells: ``52.6…``, or half an address), each row
    becomes a block: its first ``labels`` cells as a heading (each after its
    column's header when ``named``: ``client 3`` rather than ``3``), then its
    other cells as ``column value`` pairs in as many columns as fit.
    """
    natural = Measurement.get(console, console.options.update(width=1_000_000), table).maximum
    if natural <= console.width:
        console.print(table)
        return
    if table.title:
        console.print(table.title, style="italic")
    columns = table.columns
    for row in zip(*(list(column.cells) for column in columns), strict=True):
        heading = [
            f"{column.header} {cell}" if named else str(cell)
            for column, cell in zip(columns, row[:labels], strict=False)
        ]
        console.print(Text(" · ".join(heading), style="bold"))
        pairs = [
            Text.assemble(f"{column.header} ", (str(cell), "bold"))
            for column, cell in zip(columns[labels:], row[labels:], strict=True)
        ]
        console.print(Padding(Columns(pairs, padding=(0, 3)), (0, 0, 0, 2)))  # a pair is never split


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
