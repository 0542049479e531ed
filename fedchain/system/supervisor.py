"""A supervisor for the participants' processes: start, watch, signal, stop, and read their logs.

Every participant runs as its own OS process in a session of its own
(``start_new_session``), so a Ctrl-C in the terminal reaches only the
supervising program, which then stops every child in order: SIGTERM (the
agents save their state and exit 0), then SIGKILL for one that does not stop
within the grace period. A child's stdout and stderr go to its log file;
:meth:`Supervisor.check` raises :class:`~fedchain.errors.ParticipantDied` with
the tail of the log of a child that exited while it was still needed.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from fedchain.errors import ParticipantDied
from fedchain.signals import STOP_SIGNALS, handlers_set

log = logging.getLogger(__name__)

#: Seconds a child may take to stop after SIGTERM before it is killed.
STOP_GRACE_S = 20.0
#: Lines of a log shown when its process died.
LOG_TAIL_LINES = 25


@contextmanager
def signals_held(signums: Sequence[int] = STOP_SIGNALS) -> Iterator[None]:
    """Hold ``signums`` until the block ends, then deliver them to the handlers they had.

    A Ctrl-C (or a SIGTERM turned into KeyboardInterrupt) that lands inside
    ``Popen`` after the fork would raise out of it with the child already
    running and never registered, so no :meth:`Supervisor.stop` would stop
    it. Held, it arrives once the child is registered. Outside the main thread
    (where Python runs signal handlers) this holds nothing.
    """
    pending: list[int] = []
    # Only a Python handler is deferred: not SIG_DFL, SIG_IGN or one set from C.
    deferred = [signum for signum in signums if callable(signal.getsignal(signum))]
    try:
        with handlers_set(dict.fromkeys(deferred, lambda received, _frame: pending.append(received))):
            yield
    finally:
        for signum in pending:
            signal.raise_signal(signum)


@dataclass(frozen=True)
class ProcessSpec:
    """One participant's process: its name, command line, extra environment and log file.

    Attributes:
        name: unique name (``fog-1``, ``client-0``, ``aggregator``), used in logs and messages.
        argv: the command line.
        env: variables added to the supervisor's environment (the participant's key, thread limits).
        log_path: where its stdout and stderr go (appended, so a restart keeps the earlier lines).
        exits_when_done: True when the process ends by itself once its work is done (a client,
            the aggregator); an exit with status 0 is then not a death.
        niceness: added to its scheduling niceness (0: as the supervisor). Participants that each have a
            machine of their own in a deployment share one here; a watcher whose work can wait (re-scoring
            posted rounds within a challenge window) yields the CPU to those racing a round's deadline.
        crashes_on_purpose: True when its run plans a fault that kills it by SIGKILL (a fog node's or an
            aggregator's ``--crash-after-round``); that exit is then not a death, any other still is.
    """

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    log_path: Path = Path("participant.log")
    exits_when_done: bool = False
    niceness: int = 0
    crashes_on_purpose: bool = False


@dataclass
class Child:
    """A started process and what the supervisor knows about it."""

    spec: ProcessSpec
    process: subprocess.Popen[bytes]
    #: Set when the supervisor itself stopped or killed it (its exit is then expected).
    stopped_on_purpose: bool = False

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.process.poll()

    @property
    def died(self) -> bool:
        """Exited on its own, and not in the way its role ends (status 0 for one that exits when done)."""
        code = self.returncode
        if code is None or self.stopped_on_purpose:
            return False
        if self.spec.crashes_on_purpose and code == -signal.SIGKILL:
            return False
        return not (self.spec.exits_when_done and code == 0)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of its log."""
        return tail(self.spec.log_path, lines)


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of the text file at ``path`` (empty when it does not exist)."""
    try:
        with path.open("r", encoding="utf-8", errors="replace") as handle:
            return "".join(deque(handle, maxlen=lines))
    except FileNotFoundError:
        return ""


class Supervisor:
    """Starts participants' processes and stops them all on exit (use it as a context manager)."""

    def __init__(self, *, stop_grace_s: float = STOP_GRACE_S) -> None:
        self.stop_grace_s = stop_grace_s
        self._children: dict[str, Child] = {}

    # ------------------------------------------------------------------ starting

    def start(self, spec: ProcessSpec) -> Child:
        """Start ``spec`` (again, if a process of that name ended); its output is appended to its log."""
        previous = self._children.get(spec.name)
        if previous is not None and previous.running:
            raise ValueError(f"{spec.name} is already running (pid {previous.pid})")
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        with spec.log_path.open("ab") as output, signals_held():
            process = subprocess.Popen(
                list(spec.argv),
                env={**os.environ, **spec.env},
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a terminal's Ctrl-C reaches the supervisor only; it stops the children
            )
            child = Child(spec, process)
            self._children[spec.name] = child
        if spec.niceness:
            try:
                os.setpriority(os.PRIO_PROCESS, process.pid, os.getpriority(os.PRIO_PROCESS, 0) + spec.niceness)
            except OSError as err:  # it died at once (its log says why), or the platform refuses: run as it is
                log.debug("could not renice %s: %s", spec.name, err)
        log.info("started %s (pid %d), log %s", spec.name, process.pid, spec.log_path)
        return child

    def restart(self, name: str) -> Child:
        """Start the ended process ``name`` again with the same command line."""
        return self.start(self.child(name).spec)

    # ------------------------------------------------------------------ looking

    def child(self, name: str) -> Child:
        """The process started as ``name``."""
        try:
            return self._children[name]
        except KeyError:
            raise KeyError(f"no participant named {name!r}; known: {', '.join(self._children)}") from None

    @property
    def children(self) -> tuple[Child, ...]:
        """Every process started, in start order."""
        return tuple(self._children.values())

    def check(self) -> None:
        """Raise :class:`ParticipantDied` for the first child that died, with the tail of its log."""
        for child in self._children.values():
            if child.died:
                raise ParticipantDied(
                    f"{child.name} (pid {child.pid}) exited with status {child.returncode}; "
                    f"last lines of {child.spec.log_path}:\n{child.log_tail()}"
                )

    # ------------------------------------------------------------------ stopping

    def kill(self, name: str, signum: int = signal.SIGKILL) -> None:
        """Send ``signum`` to ``name`` (a fault, or an operator's signal); its exit is then expected."""
        child = self.child(name)
        child.stopped_on_purpose = True
        if child.running:
            os.kill(child.pid, signum)
            log.info("sent %s to %s (pid %d)", signal.Signals(signum).name, name, child.pid)

    def wait(self, name: str, timeout_s: float) -> int | None:
        """Wait up to ``timeout_s`` for ``name`` to exit; its exit status, or None if it still runs."""
        try:
            return self.child(name).process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, names: Sequence[str] | None = None) -> None:
        """Stop ``names`` (default: every child): SIGTERM to all at once, SIGKILL after the grace period."""
        chosen = [self.child(name) for name in names] if names is not None else list(self._children.values())
        running = [child for child in chosen if child.running]
        for child in chosen:
            child.stopped_on_purpose = True
        for child in running:
            with suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_grace_s
        try:
            for child in running:
                try:
                    child.process.wait(timeout=max(deadline - time.monotonic(), 0.0))
                except subprocess.TimeoutExpired:
                    log.warning("%s did not stop within %.0f s of SIGTERM; killing it", child.name, self.stop_grace_s)
                    child.process.kill()
                    child.process.wait()
        except KeyboardInterrupt:  # a second Ctrl-C: no more waiting, but no process is left behind
            for child in running:
                if child.running:
                    child.process.kill()
            raise

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
