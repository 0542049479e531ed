"""A member of the deployment's arbiter committee: judge every challenge, sign the verdict, see it submitted.

One :class:`Verifier` is one OS process with the member's key. It runs the
shared agent loop (:mod:`fedchain.agent`) over the deployment's events:

=================  =====================================================================
ChallengeOpened    judge it: an entry challenge by reproducing the round with the auditor's
                   code (:func:`~fedchain.disputes.judging.judge_entry`: upheld when the posted
                   entry is off its reproduction beyond tolerance and the proposed one is not);
                   an accuracy challenge by evaluating the posted model (``judge_accuracy``:
                   upheld when it falls short of the target); a prior challenge by recomputing
                   the priors from the earlier tasks (``judge_prior``);
                   a fog challenge by re-executing the segment of the fog node's training
                   transcript that the challenge names, from the node's own checkpoint
                   (:func:`~fedchain.disputes.judging.judge_fog`: upheld when the named node
                   committed the round and its transcript does not bind the job, or the
                   segment ends beyond the segment tolerance). Sign the verdict (EIP-712) and
                   pin it on the challenge's board in the blob store.
(every step)       read each open challenge's board; once a quorum of members signed the same
                   outcome, submit the signatures (``Disputes.resolve``): a verdict someone else
                   submitted first is done. After the verdict window, expire what no quorum judged.
ChallengeResolved  the challenge is closed.
=================  =====================================================================

Every step is idempotent: a restarted member judges a challenge again only if
its signed verdict is not on the board (the same inputs give the same verdict).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedchain.agent import AgentLogger, AgentState, BlockRange
from fedchain.agent.chainloop import chain_now, session_agent
from fedchain.agent.session import ChainSession
from fedchain.audit.replay import replay_task
from fedchain.audit.rewards import reward_events
from fedchain.audit.scores import ScoreReproduction
from fedchain.chain.abi import ChainEvent
from fedchain.chain.bindings import ChallengeKind, ChallengeOpened, ChallengeResolved, ChallengeStatus, Measurement
from fedchain.chain.events import LogQuery, fetch_events, iter_events
from fedchain.disputes.judging import judge_accuracy, judge_entry, judge_fog, judge_prior
from fedchain.disputes.service import expire, resolve
from fedchain.disputes.verdicts import Domain, SignedVerdict, Verdict, board_of, quorum_signatures, sign
from fedchain.errors import AgentError, FedchainError, VerdictError
from fedchain.transcripts.segments import SEGMENT_TOLERANCE

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VerifierSettings:
    """How a committee member runs.

    Attributes:
        state_path: the agent's state file.
        name: the agent's name in logs.
        data_root: where the validation datasets are (None: ``$FEDCHAIN_DATA_ROOT``).
        device: torch device for re-scoring and re-execution (``cpu``: what the tolerances were measured on).
        poll_interval_s: seconds between polls of the chain when nothing happens.
        confirmations: blocks on top of a block before its events are handled.
    """

    state_path: Path
    name: str = "verifier"
    data_root: str | None = None
    device: str = "cpu"
    poll_interval_s: float = 1.0
    confirmations: int = 0


class Verifier:
    """One member of the arbiter committee (see the module docstring); :meth:`run` until SIGTERM."""

    def __init__(self, session: ChainSession, settings: VerifierSettings) -> None:
        self.session = session
        self.settings = settings
        committee = session.contracts.arbiter_committee
        self.members = tuple(committee.members())
        if session.address not in self.members:
            raise AgentError(
                f"{session.address} is not a member of this deployment's arbiter committee",
                hint=f"sign with a member's key; the members are {', '.join(self.members)}",
            )
        self.quorum = int(committee.quorum())
        self.domain = Domain(int(session.w3.eth.chain_id), committee.address)
        self.log = AgentLogger(_log, agent=settings.name)
        self.agent = session_agent(
            session,
            name=settings.name,
            state_path=settings.state_path,
            confirmations=settings.confirmations,
            poll_interval_s=settings.poll_interval_s,
            handle=self._handle,
            idle=self._act,
        )
        self._reproductions: dict[int, ScoreReproduction] = {}

    def run(self) -> AgentState:
        """Judge challenges until a stop is requested (SIGTERM/SIGINT); returns the agent state."""
        # Load the scoring and training code now, not with the first challenge: a verdict is due within its window.
        import fedchain.aggregator.scoring
        import fedchain.trainer.trainer  # noqa: F401

        self.log.info("verifier up", account=self.session.address, quorum=f"{self.quorum} of {len(self.members)}")
        return self.agent.run()

    def step(self) -> BlockRange | None:
        """One step of the loop (for tests and embedding)."""
        return self.agent.step()

    @property
    def state(self) -> AgentState:
        return self.agent.state

    # ------------------------------------------------------------------ events

    def _handle(self, blocks: BlockRange, state: AgentState) -> None:
        query = LogQuery(
            addresses=(self.session.contracts.disputes.address,), from_block=blocks.first, to_block=blocks.last
        )
        challenges = self._challenges(state)
        for event in iter_events(self.session.w3, self.session.transactor.registry, query):
            if isinstance(event, ChallengeOpened):
                challenges.setdefault(
                    str(event.challenge_id),
                    {
                        "task": event.task_id,
                        "round": event.round,
                        "client": event.client_index,
                        "kind": event.kind.name.lower(),
                        "accused": event.accused,
                        "deadline": event.verdict_deadline,
                        "proposed": list(event.proposed),
                        "value": event.value,
                        "open": True,
                        "verdict": None,
                    },
                )
                self.log.info(
                    "challenge to judge",
                    challenge=event.challenge_id,
                    task=event.task_id,
                    round=event.round,
                    job=event.client_index,
                    kind=event.kind.name.lower(),
                    tx=event.transaction_hash,
                )
            elif isinstance(event, ChallengeResolved) and str(event.challenge_id) in challenges:
                challenges[str(event.challenge_id)]["open"] = False
                self.log.info(
                    "challenge closed",
                    challenge=event.challenge_id,
                    outcome=event.status.name.lower(),
                    fate=event.fate.name.lower(),
                    tx=event.transaction_hash,
                )
        self._act(state)

    @staticmethod
    def _challenges(state: AgentState) -> dict[str, dict[str, Any]]:
        return state.data.setdefault("challenges", {})

    # ------------------------------------------------------------------ the work

    def _act(self, state: AgentState) -> None:
        for key, challenge in self._challenges(state).items():
            if not challenge["open"]:
                continue
            challenge_id = int(key)
            if challenge["verdict"] is None:
                challenge["verdict"] = self._judge(challenge_id, challenge)
            self._submit_or_expire(challenge_id, challenge)

    def _judge(self, challenge_id: int, challenge: Mapping[str, Any]) -> bool | None:
        """Judge, sign and pin the verdict; returns it (None when the inputs cannot be read yet: judged again later)."""
        task_id, round_number, index = challenge["task"], challenge["round"], challenge["client"]
        events = self._events()
        history = replay_task(task_id, events).history
        commitments = reward_events(task_id, events)
        reproduction = self._reproduction(task_id, history)
        log = self.log.bind(challenge=challenge_id, task=task_id, round=round_number, job=index)
        try:
            if challenge["kind"] == ChallengeKind.ENTRY.name.lower():
                proposed = Measurement._make(challenge["proposed"])
                judgement = judge_entry(reproduction, history, commitments, round_number, index)
                upheld = judgement.upheld(proposed)
                log.info(
                    "entry judged",
                    upheld=upheld,
                    posted=judgement.posted.quality,
                    accepted=judgement.posted.accepted,
                    reproduced=judgement.reproduced.quality,
                    proposed=proposed.quality,
                )
            elif challenge["kind"] == ChallengeKind.ACCURACY.name.lower():
                accuracy = judge_accuracy(reproduction, history, round_number)
                upheld = accuracy.upheld
                log.info(
                    "accuracy judged",
                    upheld=upheld,
                    posted=accuracy.posted,
                    evaluated=accuracy.evaluated,
                    target=accuracy.target,
                )
            elif challenge["kind"] == ChallengeKind.PRIOR.name.lower():
                prior = judge_prior(history, events, index)
                upheld = prior.upheld(challenge["value"])
                log.info(
                    "prior judged",
                    upheld=upheld,
                    posted=prior.posted,
                    recomputed=prior.recomputed,
                    proposed=challenge["value"],
                )
            else:
                segment = int(challenge["value"])
                judgement_fog = judge_fog(
                    self.session.store,
                    reproduction.spec,
                    history,
                    commitments,
                    round_number,
                    index,
                    segment,
                    device=self.settings.device,
                )
                upheld = judgement_fog.upheld(challenge["accused"])
                judged = judgement_fog.segments[0] if judgement_fog.segments else None
                log.info(
                    "fog segment judged",
                    upheld=upheld,
                    segment=segment,
                    steps=f"{judged.steps.start}-{judged.steps.stop - 1}" if judged and judged.steps else None,
                    distance=judgement_fog.distance,
                    tolerance=SEGMENT_TOLERANCE,
                    fault=judged.fault if judged else None,
                    committer=judgement_fog.committer,
                    accused=challenge["accused"],
                    excuse=judgement_fog.excuse,
                )
        except FedchainError as err:  # inputs it cannot read (yet): no verdict now; tried again at the next step
            log.error("cannot judge the challenge yet", error=str(err).splitlines()[0], hint=err.hint)
            return None
        verdict = Verdict(challenge_id, task_id, round_number, index, upheld)
        signed = sign(verdict, self.session.transactor.account, self.domain)
        self.session.store.pin(board_of(self.domain, challenge_id), self.session.address, signed.to_note())
        log.info("verdict signed", upheld=upheld)
        return upheld

    def _submit_or_expire(self, challenge_id: int, challenge: dict[str, Any]) -> None:
        if chain_now(self.session) > challenge["deadline"]:
            if expire(self.session, challenge_id) is not None:
                self.log.warning("challenge expired without a quorum's verdict", challenge=challenge_id)
            challenge["open"] = False
            return
        notes = []
        for data in self.session.store.notes(board_of(self.domain, challenge_id)).values():
            try:
                notes.append(SignedVerdict.from_note(data))
            except VerdictError:
                continue
        for upheld in (True, False):
            verdict = Verdict(challenge_id, challenge["task"], challenge["round"], challenge["client"], upheld)
            signatures = quorum_signatures(notes, verdict, self.members, self.quorum, self.domain)
            if signatures is None:
                continue
            receipt = resolve(self.session, challenge_id, upheld, signatures)
            if receipt is not None:
                self.log.info("verdict submitted", challenge=challenge_id, upheld=upheld, tx=receipt.transaction_hash)
            if self.session.contracts.disputes.challenge(challenge_id).status != ChallengeStatus.OPEN:
                challenge["open"] = False
            return

    def _events(self) -> list[ChainEvent]:
        return list(
            fetch_events(self.session.w3, self.session.transactor.registry, LogQuery.of(self.session.deployment))
        )

    def _reproduction(self, task_id: int, history: Any) -> ScoreReproduction:
        """The task's reproduction, kept across challenges (rounds are reproduced once each)."""
        if task_id not in self._reproductions:
            self._reproductions[task_id] = ScoreReproduction.of(
                history, self.session.store, data_root=self.settings.data_root, device=self.settings.device
            )
        return self._reproductions[task_id]
