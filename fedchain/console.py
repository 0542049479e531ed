"""The console the commands print their tables on."""

from __future__ import annotations

import sys

from rich.console import Console


def stdout_console(piped_width: int) -> Console:
    """Standard output as a rich console: the terminal's own width, or ``piped_width`` columns
    when it is a file or a pipe (rich would cut it to 80, wrapping tables, addresses and hashes)."""
    return Console() if sys.stdout.isatty() else Console(width=piped_width)
