"""Small helpers shared by the tests."""

from __future__ import annotations

import os
import signal
from typing import TypeVar

T = TypeVar("T")


def present(value: T | None) -> T:
    """``value``, asserting that it is there: for outputs that are optional in general but not in the case under test."""
    assert value is not None
    return value


def interruptible_in_own_group() -> None:
    """``preexec_fn`` of a child that Ctrl-C should reach as in a terminal: SIGINT's default action
    (a background test runner may ignore it) and a process group of its own, for ``os.killpg``."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.setpgrp()
