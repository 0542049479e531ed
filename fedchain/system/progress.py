"""Following a running task from the outside: its events as they come, and a progress summary.

:class:`EventLog` fetches a deployment's events incrementally (each block
once) and keeps them in chain order; :func:`read_progress` sums up where a
task is from the contracts' views and the events seen so far. Both only read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fedchain.agent.session import ChainSession
from fedchain.chain import bindings as b
from fedchain.chain.abi import ChainEvent, E
from fedchain.chain.bindings import JobStatus, TaskStatus
from fedchain.chain.events import LogQuery, fetch_events

#: 1.0 in the chain's 1e18 fixed point.
WAD = 10**18


class EventLog:
    """Every event of a deployment's contracts, fetched as the chain grows."""

    def __init__(self, session: ChainSession) -> None:
        self.session = session
        self._next_block = session.deployment.block_number
        self._events: list[ChainEvent] = []

    def refresh(self) -> list[ChainEvent]:
        """Fetch the events of the blocks not seen yet; returns the new ones."""
        head = int(self.session.w3.eth.block_number)
        if head < self._next_block:
            return []
        query = LogQuery(tuple(self.session.deployment.addresses.values()), self._next_block, head)
        new = fetch_events(self.session.w3, b.REGISTRY, query)
        self._events.extend(new)
        self._next_block = head + 1
        return new

    def of(self, cls: type[E], task_id: int | None = None, **fields: object) -> list[E]:
        """The events of type ``cls`` seen so far (of ``task_id``, with the given field values)."""
        return [
            event
            for event in self._events
            if isinstance(event, cls)
            and (task_id is None or getattr(event, "task_id", None) == task_id)
            and all(getattr(event, name) == value for name, value in fields.items())
        ]

    def find(self, cls: type[E], task_id: int | None = None, **fields: object) -> Callable[[], E | None]:
        """A condition for :meth:`fedchain.system.SystemRun.wait_until`: the first such event, after a refresh."""

        def condition() -> E | None:
            self.refresh()
            found = self.of(cls, task_id, **fields)
            return found[0] if found else None

        return condition


@dataclass(frozen=True)
class TaskProgress:
    """Where a task is, in numbers for a progress line.

    Attributes:
        status: the task's life-cycle status.
        round: its current round (0 before the start).
        rounds: N.
        clients: clients joined.
        awarded: jobs whose auction closed with a winner.
        handed_off: jobs whose client committed its data's hash.
        active: clients not removed.
        commits: fog commits for the current round.
        posted: rounds posted.
        accuracy: the last posted global model's validation accuracy (None before the first post).
        final: rounds final (their challenge window passed, their challenges judged: their money moved).
        challenges: challenges opened, and still open.
    """

    status: TaskStatus
    round: int
    rounds: int
    clients: int
    awarded: int
    handed_off: int
    active: int
    commits: int
    posted: int
    accuracy: float | None
    final: int = 0
    challenges: tuple[int, int] = (0, 0)


def read_progress(session: ChainSession, task_id: int, events: EventLog) -> TaskProgress:
    """The task's progress now (refreshes ``events``)."""
    events.refresh()
    contracts = session.contracts
    state = contracts.task_registry.state(task_id)
    rounds = int(contracts.task_registry.params(task_id).rounds)
    count = int(contracts.round_ledger.client_count(task_id))
    jobs = [contracts.fog_auction.job(task_id, i) for i in range(count)]
    awarded = sum(1 for job in jobs if job.status in (JobStatus.AWARDED, JobStatus.SETTLED) and job.price > 0)
    handed = sum(1 for i in range(count) if bytes(contracts.data_handoff.data_hash(task_id, i)) != bytes(32))
    active = sum(1 for i in range(count) if contracts.round_ledger.is_active(task_id, i))
    status = state.status
    current = int(state.current_round)
    commits = 0
    if status == TaskStatus.RUNNING and count:
        own = contracts.task_registry.params(task_id).self_trained  # each client commits its own update
        source = contracts.round_ledger.own_commit_times if own else contracts.fog_auction.commit_times
        commits = sum(1 for t in source(task_id, current, count) if t)
    posted = events.of(b.RoundPosted, task_id)
    accuracy = posted[-1].accuracy / WAD if posted else None
    final = len(events.of(b.RoundFinalized, task_id))
    opened = events.of(b.ChallengeOpened, task_id)
    closed = events.of(b.ChallengeResolved, task_id)
    return TaskProgress(
        status,
        current,
        rounds,
        count,
        awarded,
        handed,
        active,
        commits,
        len(posted),
        accuracy,
        final,
        (len(opened), len(opened) - len(closed)),
    )
