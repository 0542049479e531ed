"""A participant watching its own entries: re-score each posted round, and re-execute a screened-out job.

DESIGN.md: each party watches its own entries. After every posted round a
client reproduces the round with the auditor's code and compares its own entry
(:func:`~fedchain.disputes.judging.judge_entry`); when the entry is off beyond
tolerance it challenges the aggregator, naming the reproduced measurement. When
its entry is right but harms it (rejected, or below q_min: a removal), it
re-executes the segments of its fog node's training transcript, each from the
node's own checkpoint (:func:`~fedchain.disputes.judging.search_fog`); when one
does not re-execute within tolerance (or the transcript does not bind the job)
it challenges the fog node, naming that segment. A client whose own data is
bad finds an honest re-execution scoring as badly, and does not challenge. A
client without the compute to re-execute may leave that to the arbiters (it
then challenges its fog node's first segment whenever its entry harms it, and
risks its bond).
A fog node watches the entries of the updates it trained in the same way, and
challenges the aggregator for its clients.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from fedchain.agent.session import ChainSession
from fedchain.audit.replay import replay_task
from fedchain.audit.rewards import reward_events
from fedchain.audit.scores import ScoreReproduction
from fedchain.chain.abi import ChainEvent
from fedchain.chain.bindings import Measurement
from fedchain.chain.events import LogQuery, fetch_events
from fedchain.disputes.judging import judge_entry, proposal, scored_commit, search_fog

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Grievance:
    """A challenge a participant should open, and why."""

    round: int
    client_index: int
    kind: Literal["entry", "fog"]
    #: What the entry should be (entry challenges).
    proposed: Measurement | None
    #: The fog node that committed the update (fog challenges).
    fog: str | None
    reason: str
    #: The segment of the fog node's transcript that does not re-execute (fog challenges).
    segment: int = 0


class EntryWatcher:
    """Reviews one task's posted rounds for a participant (see the module docstring), rounds in order."""

    def __init__(
        self,
        session: ChainSession,
        task_id: int,
        *,
        data_root: str | Path | None = None,
        device: str = "cpu",
        reexecute: bool = True,
    ) -> None:
        self.session = session
        self.task_id = task_id
        self.data_root = data_root
        self.device = device
        self.reexecute = reexecute
        self._reproduction: ScoreReproduction | None = None

    def events(self) -> list[ChainEvent]:
        """The deployment's events so far."""
        session = self.session
        return list(fetch_events(session.w3, session.transactor.registry, LogQuery.of(session.deployment)))

    def review(self, round_number: int, client_index: int, *, own_job: bool) -> Grievance | None:
        """What is wrong with client ``client_index``'s entry of posted round ``round_number``, if anything.

        ``own_job``: the reviewer is the job's client, who may challenge its fog node."""
        events = self.events()
        history = replay_task(self.task_id, events).history
        commitments = reward_events(self.task_id, events)
        if self._reproduction is None:
            self._reproduction = ScoreReproduction.of(
                history, self.session.store, data_root=self.data_root, device=self.device
            )
        judgement = judge_entry(self._reproduction, history, commitments, round_number, client_index)
        posted = judgement.posted
        if not posted.committed:
            return None
        if judgement.wrong:
            return Grievance(
                round_number,
                client_index,
                "entry",
                proposal(posted, judgement.reproduced),
                None,
                f"posted quality {posted.quality / 1e18:.4f} ({'accepted' if posted.accepted else 'rejected'}), "
                f"reproduced {judgement.reproduced.quality / 1e18:.4f} "
                f"({'accepted' if judgement.reproduced.accepted else 'rejected'})",
            )
        params = history.task.params
        assert params is not None
        harmed = not posted.accepted or posted.quality < params.min_quality
        if not own_job or not harmed:
            return None
        spec = self._reproduction.spec
        if not self.reexecute:
            commit = scored_commit(history, round_number, client_index)
            if commit is None:
                return None
            return Grievance(
                round_number, client_index, "fog", None, commit.fog, "screened out; re-execution left to the arbiters"
            )
        fog_judgement = search_fog(
            self.session.store, spec, history, commitments, round_number, client_index, device=self.device
        )
        convicting = fog_judgement.convicting
        if fog_judgement.committer is None or convicting is None or not fog_judgement.upheld(fog_judgement.committer):
            log.info(
                "round %d: the fog node trained the job as told (%d segments re-executed, largest distance %.3g): "
                "the entry stands",
                round_number,
                len(fog_judgement.segments),
                fog_judgement.distance,
            )
            return None
        reason = convicting.fault or (
            f"segment {convicting.segment} (steps {convicting.steps.start}-{convicting.steps.stop - 1}) ends "
            f"{convicting.distance:.3g} from its re-execution"
        )
        return Grievance(round_number, client_index, "fog", None, fog_judgement.committer, reason, convicting.segment)
