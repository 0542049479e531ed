"""The supervisor on small real processes: logs, deaths reported with their log's tail, clean and forced stops."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fedchain.errors import ParticipantDied
from fedchain.signals import handlers_set
from fedchain.system import ProcessSpec, Supervisor

#: A process that says it is up, then waits; on SIGTERM it says so and exits 0 (as the agents do).
POLITE = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: (print("stopping on SIGTERM", flush=True), sys.exit(0)))
print("up", flush=True)
while True:
    time.sleep(0.05)
"""
#: A process that ignores SIGTERM.
STUBBORN = """
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("up", flush=True)
while True:
    time.sleep(0.05)
"""
#: Seconds a tiny Python process may take to start on a busy machine.
START_S = 30.0


def python(tmp_path: Path, name: str, code: str, *, exits_when_done: bool = False) -> ProcessSpec:
    return ProcessSpec(name, (sys.executable, "-c", code), {}, tmp_path / f"{name}.log", exits_when_done)


def wait_for_line(spec: ProcessSpec, text: str) -> None:
    deadline = time.monotonic() + START_S
    while text not in (spec.log_path.read_text() if spec.log_path.exists() else ""):
        assert time.monotonic() < deadline, f"{spec.name} never logged {text!r}"
        time.sleep(0.05)


def test_a_process_that_exits_on_its_own_is_reported_with_its_status_and_the_tail_of_its_log(tmp_path: Path) -> None:
    # prepare: a process that fails after writing to stdout and stderr
    spec = python(
        tmp_path, "client-9", "import sys; print('joined'); print('boom: no funds', file=sys.stderr); sys.exit(3)"
    )

    # execute
    with Supervisor() as supervisor:
        supervisor.start(spec)
        supervisor.wait("client-9", START_S)
        with pytest.raises(ParticipantDied) as raised:
            supervisor.check()

    # assert: the message names the process, its status and the last lines of its log (both streams)
    message = str(raised.value)
    assert "client-9" in message and "status 3" in message and "boom: no funds" in message and "joined" in message


def test_a_process_that_ends_its_work_with_status_0_has_not_died(tmp_path: Path) -> None:
    with Supervisor() as supervisor:
        supervisor.start(python(tmp_path, "client-0", "print('settled')", exits_when_done=True))
        code = supervisor.wait("client-0", START_S)

        supervisor.check()  # does not raise

    assert code == 0


def test_stop_sends_sigterm_and_a_polite_process_exits_cleanly(tmp_path: Path) -> None:
    spec = python(tmp_path, "fog-0", POLITE)
    with Supervisor() as supervisor:
        child = supervisor.start(spec)
        wait_for_line(spec, "up")

        supervisor.stop()

        supervisor.check()
    assert child.returncode == 0
    assert "stopping on SIGTERM" in spec.log_path.read_text()


def test_stop_kills_a_process_that_ignores_sigterm_after_the_grace_period(tmp_path: Path) -> None:
    spec = python(tmp_path, "fog-1", STUBBORN)
    with Supervisor(stop_grace_s=0.5) as supervisor:
        child = supervisor.start(spec)
        wait_for_line(spec, "up")

        supervisor.stop()

    assert child.returncode == -9


def test_a_killed_process_is_expected_to_be_gone_and_can_be_restarted_with_its_log_kept(tmp_path: Path) -> None:
    # prepare
    spec = python(tmp_path, "aggregator", POLITE)
    with Supervisor() as supervisor:
        first = supervisor.start(spec)
        wait_for_line(spec, "up")

        # execute: a fault kills it; then it is started again
        supervisor.kill("aggregator")
        supervisor.wait("aggregator", START_S)
        supervisor.check()  # a kill on purpose is no death
        second = supervisor.restart("aggregator")
        deadline = time.monotonic() + START_S
        while spec.log_path.read_text().count("up") < 2:
            assert time.monotonic() < deadline, "the restarted process never came up"
            time.sleep(0.05)

        # assert: a new process, appending to the same log
        assert first.returncode == -9 and second.running and second.pid != first.pid
        with pytest.raises(ValueError, match="already running"):
            supervisor.start(spec)


def test_a_stop_signal_that_lands_while_a_child_starts_arrives_after_the_child_is_registered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # prepare: SIGTERM raises KeyboardInterrupt (as in the demo) and lands just after Popen forked the child
    spec = python(tmp_path, "client-0", POLITE)
    real_popen = subprocess.Popen

    def popen_then_sigterm(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        process = real_popen(*args, **kwargs)
        signal.raise_signal(signal.SIGTERM)
        return process

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(subprocess, "Popen", popen_then_sigterm)
    with handlers_set({signal.SIGTERM: interrupt}), Supervisor() as supervisor:
        # execute
        with pytest.raises(KeyboardInterrupt):
            supervisor.start(spec)

        # assert: the interrupt came out of start with the child registered, so stopping reaches it
        child = supervisor.child("client-0")
        wait_for_line(spec, "up")
    assert child.returncode == 0
    assert "stopping on SIGTERM" in spec.log_path.read_text()


def test_a_process_started_with_a_niceness_runs_that_much_nicer_than_the_supervisor(tmp_path: Path) -> None:
    watcher = dataclasses.replace(python(tmp_path, "client-0", POLITE), niceness=10)
    racer = python(tmp_path, "fog-0", POLITE)

    with Supervisor() as supervisor:
        niceness = {spec.name: os.getpriority(os.PRIO_PROCESS, supervisor.start(spec).pid) for spec in (watcher, racer)}

    own = os.getpriority(os.PRIO_PROCESS, 0)
    assert niceness == {"client-0": min(own + 10, 19), "fog-0": own}
