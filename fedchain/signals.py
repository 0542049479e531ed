"""Signal handlers set for the length of a block and put back after it.

The long-running programs (agents, the demo, the supervisor, ``fedchain chain
start``) each turn the stop signals into their own way of stopping. They all
set handlers the same way, through :func:`handlers_set`: only in the main
thread, where Python runs signal handlers and alone may set them, and with
the previous handlers restored when the block ends, however it ends.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import FrameType

#: The signals that stop a program: Ctrl-C, and SIGTERM from a supervisor or a service manager.
STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)

#: A Python signal handler: called with the signal's number and the interrupted frame.
Handler = Callable[[int, FrameType | None], object]


@contextmanager
def handlers_set(handlers: Mapping[int, Handler]) -> Iterator[bool]:
    """Set ``handlers`` (signal number to handler) until the block ends, then restore the previous ones.

    Yields whether the handlers were set: outside the main thread nothing is
    set (Python would refuse) and the block runs with the handlers it had.
    """
    if threading.current_thread() is not threading.main_thread():
        yield False
        return
    previous = {signum: signal.signal(signum, handler) for signum, handler in handlers.items()}
    try:
        yield True
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
