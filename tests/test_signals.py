"""Signal handlers set for a block: set in the main thread, restored however the block ends."""

from __future__ import annotations

import signal
import threading

import pytest

from fedchain.signals import STOP_SIGNALS, handlers_set
from fedchain.system.supervisor import signals_held


def test_handlers_are_set_for_the_block_and_restored_after() -> None:
    received: list[int] = []
    before = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    with handlers_set(dict.fromkeys(STOP_SIGNALS, lambda signum, _frame: received.append(signum))) as was_set:
        assert was_set
        signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGINT)
    assert received == [signal.SIGTERM, signal.SIGINT]
    assert {signum: signal.getsignal(signum) for signum in STOP_SIGNALS} == before


def test_handlers_are_restored_when_the_block_raises() -> None:
    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), handlers_set({signal.SIGTERM: interrupt}):
        signal.raise_signal(signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is before


def test_outside_the_main_thread_nothing_is_set() -> None:
    outcome: list[object] = []

    def body() -> None:
        with handlers_set({signal.SIGTERM: lambda *_: None}) as was_set:
            outcome.extend([was_set, signal.getsignal(signal.SIGTERM)])

    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert outcome == [False, before]


def test_held_signals_reach_their_handler_once_the_block_ends() -> None:
    received: list[int] = []
    with handlers_set({signal.SIGTERM: lambda signum, _frame: received.append(signum)}):
        with signals_held():
            signal.raise_signal(signal.SIGTERM)
            assert received == []  # held while the block runs
        assert received == [signal.SIGTERM]
