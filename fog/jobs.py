"""What a fog node knows and did about each job auction it saw: :class:`FogJob`, kept in its agent state.

The state file keeps the jobs as JSON objects under ``jobs``, keyed by :func:`job_key`. :func:`jobs_of` turns
them into :class:`FogJob` in place, so the node reads and changes typed fields and the runtime saves them as
before (``dataclasses.asdict`` writes a job back as the same JSON object). A job goes through these phases:

=========  =====================================================================================
open       the auction is open and the node has not decided
skipped    the node decided not to bid (no profit, too many jobs, no rate for the token)
missed     the bid could not be committed in time (or the auction closed meanwhile)
bidding    the bid's commitment is being sent
bid        the commitment is on chain, to be revealed
revealed   the bid is revealed, the auction not yet closed
won        the node trains the job every round
standby    outranked, its revealed bid held in case the winner is slashed
lost       outranked (or slashed and re-awarded, or the client removed): nothing more to do
slashed    the node's deposit for the job was taken
=========  =====================================================================================
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from fedchain.agent import AgentState
from fedchain.errors import AgentError


class Phase(enum.StrEnum):
    """Where a job stands for this node (the module docstring says what each means)."""

    OPEN = "open"
    SKIPPED = "skipped"
    MISSED = "missed"
    BIDDING = "bidding"
    BID = "bid"
    REVEALED = "revealed"
    WON = "won"
    STANDBY = "standby"
    LOST = "lost"
    SLASHED = "slashed"


#: Phases whose job still ties up the node (it may win, or trains it).
ACTIVE_PHASES = frozenset({Phase.BIDDING, Phase.BID, Phase.REVEALED, Phase.WON, Phase.STANDBY})


def job_key(task_id: int, client_index: int) -> str:
    """The key of a job in the state's ``jobs`` table."""
    return f"{task_id}:{client_index}"


@dataclass
class FogJob:
    """One client's job auction as this node saw it, and what it did about it (mutable: the node's record)."""

    task: int
    #: The client's index in the task.
    client: int
    data_size: int
    #: Chain timestamps (s) of the auction's windows.
    bidding_deadline: int
    reveal_deadline: int
    phase: Phase = Phase.OPEN
    #: This node's bid's index among the job's bids, once it is on chain.
    bid_index: int | None = None
    #: The priced bid, once decided: cycles per second, price and the node's own cost (in the task's asset's
    #: smallest unit) and the sealed bid's salt (0x hex).
    frequency: int | None = None
    price: int | None = None
    cost: float | None = None
    salt: str | None = None
    #: keccak256 (0x hex) of the client's data as committed on chain; ``ok`` or ``rejected`` once fetched, and why
    #: it was rejected.
    data_hash: str | None = None
    data_status: str | None = None
    data_error: str | None = None
    #: The first round this node trains (later than 1 for a job it took over from a slashed node).
    from_round: int = 1
    #: Rounds whose update is committed on chain.
    committed: list[int] = field(default_factory=list)
    #: Whether the job's deposit was settled once the task ended.
    settled: bool = False
    #: The client's account (read once from the chain).
    client_account: str | None = None
    #: Rounds (as text) whose start model was refused, and why (a reward the chain's root does not prove).
    refused_rewards: dict[str, str] = field(default_factory=dict)
    #: Committed rounds (as text) whose entry was reviewed: the challenge opened (its id as text), or None.
    reviewed: dict[str, str | None] = field(default_factory=dict)

    def sealed_salt(self) -> str:
        """The salt of the priced bid; :class:`AgentError` if the job was never priced (the record is damaged)."""
        if self.salt is None or self.price is None or self.frequency is None:
            raise AgentError(
                f"job {job_key(self.task, self.client)} has a bid on chain but no price or salt in the state file",
                hint="the state file was edited: restore it, or move it away to start over",
            )
        return self.salt

    @classmethod
    def from_json(cls, key: str, raw: Mapping[str, Any]) -> FogJob:
        """The job saved as ``raw`` (an object of the state file's ``jobs``); :class:`AgentError` if it is not one."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(raw) - names)
        try:
            if unknown:
                raise TypeError(f"unknown fields {unknown}")
            job = cls(**raw)
            job.phase = Phase(job.phase)
        except (TypeError, ValueError) as err:
            raise AgentError(
                f"job {key} of the fog node's state file is not a job record: {err}",
                hint="the file was edited or written by another program: restore it, or move it away to start over "
                "(the node then reads its bids from the chain)",
            ) from err
        return job


def jobs_of(state: AgentState) -> dict[str, FogJob]:
    """The node's jobs in ``state``, keyed by :func:`job_key` (saved JSON objects become :class:`FogJob` in place)."""
    for key, job in state.jobs.items():
        if not isinstance(job, FogJob):
            state.jobs[key] = FogJob.from_json(key, job)
    return cast(dict[str, FogJob], state.jobs)
