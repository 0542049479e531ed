"""Opening, resolving and expiring challenges on chain: what the agents and ``fedchain challenge`` send.

Each function takes a :class:`~fedchain.agent.session.ChainSession`, escrows
the task's challenge bond where one is needed, and returns what happened. A
verdict or an expiry that someone else submitted first counts as done.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from fedchain.agent.chainloop import transact_when_due
from fedchain.agent.session import ChainSession
from fedchain.chain.bindings import (
    ChallengeOpened,
    ChallengeStatus,
    DisputeNotOpen,
    DisputeVerdictNotDue,
    Measurement,
    TaskStatus,
)
from fedchain.chain.erc20 import payment_value
from fedchain.chain.tx import Receipt
from fedchain.errors import ContractRevert, DisputeError

log = logging.getLogger(__name__)

#: The entry (client index) of a round's accuracy (Disputes.ACCURACY_ENTRY).
ACCURACY_ENTRY = 2**32 - 1

#: Gas limit of an expiry sent without an estimate (the estimate runs on a stale block of an automining chain).
EXPIRE_GAS = 200_000
#: Seconds between two looks at the chain while a challenge waits for its round to be posted.
POST_POLL_S = 1.0
#: Task statuses after which no round is posted any more.
NO_MORE_POSTS = (TaskStatus.FINISHED, TaskStatus.SETTLED, TaskStatus.CANCELLED, TaskStatus.ABANDONED)


@dataclass(frozen=True)
class Opened:
    """A challenge just opened."""

    challenge_id: int
    verdict_deadline: int
    receipt: Receipt


def await_post(session: ChainSession, task_id: int, round_number: int, *, poll_s: float = POST_POLL_S) -> None:
    """Return once ``round_number`` of ``task_id`` is posted, so that a challenge started ahead goes out at the
    start of the round's window; :class:`~fedchain.errors.DisputeError` when the task has no such round or ended
    without posting it."""
    contracts = session.contracts
    rounds = int(contracts.task_registry.params(task_id).rounds)
    if round_number > rounds:
        raise DisputeError(
            f"task {task_id} has {rounds} rounds: round {round_number} is never posted",
            hint="give a round of the task (`fedchain task show`)",
        )
    while True:
        posted, _ = contracts.round_ledger.rounds(task_id)
        if posted >= round_number:
            return
        status = contracts.task_registry.state(task_id).status
        if status in NO_MORE_POSTS:
            raise DisputeError(
                f"task {task_id} is {status.name.lower()} with {posted} rounds posted: round {round_number} is never "
                "posted",
                hint="`fedchain task show` says where the task ended",
            )
        time.sleep(poll_s)


def open_entry_challenge(
    session: ChainSession, task_id: int, round_number: int, client_index: int, proposed: Measurement
) -> Opened:
    """Challenge client ``client_index``'s entry of ``round_number``, naming what it should be (anyone)."""
    bond = session.contracts.task_registry.params(task_id).challenge_bond
    value = payment_value(session.contracts.treasury, task_id, bond)
    receipt = session.contracts.disputes.open_entry_challenge(
        task_id, round_number, client_index, proposed, value=value
    )
    return _opened(receipt, "entry", task_id, round_number, client_index)


def open_fog_challenge(
    session: ChainSession, task_id: int, round_number: int, client_index: int, fog: str, segment: int
) -> Opened:
    """Challenge the update ``fog`` committed for the caller's job in ``round_number`` (the job's client only),
    naming the ``segment`` of its training transcript that the committee is to re-execute."""
    bond = session.contracts.task_registry.params(task_id).challenge_bond
    value = payment_value(session.contracts.treasury, task_id, bond)
    receipt = session.contracts.disputes.open_fog_challenge(
        task_id, round_number, client_index, fog, segment, value=value
    )
    return _opened(receipt, "fog", task_id, round_number, client_index)


def open_accuracy_challenge(session: ChainSession, task_id: int, round_number: int, accuracy: int) -> Opened:
    """Challenge the accuracy of ``round_number``'s post, the one that ended the task at its target before its last
    round, naming the accuracy (fixed point, below the target) it should be (anyone)."""
    bond = session.contracts.task_registry.params(task_id).challenge_bond
    value = payment_value(session.contracts.treasury, task_id, bond)
    receipt = session.contracts.disputes.open_accuracy_challenge(task_id, round_number, accuracy, value=value)
    return _opened(receipt, "accuracy", task_id, round_number, ACCURACY_ENTRY)


def open_prior_challenge(session: ChainSession, task_id: int, client_index: int, prior: int) -> Opened:
    """Challenge client ``client_index``'s posted cross-task prior, naming the prior (fixed point) it should be
    (anyone, within the priors' window)."""
    bond = session.contracts.task_registry.params(task_id).challenge_bond
    value = payment_value(session.contracts.treasury, task_id, bond)
    receipt = session.contracts.disputes.open_prior_challenge(task_id, client_index, prior, value=value)
    return _opened(receipt, "prior", task_id, 0, client_index)


def top_up_bond(session: ChainSession, task_id: int) -> Receipt | None:
    """Make the task's aggregator bond whole again after upheld challenges took from it (its bonder only); None when
    it is whole."""
    disputes = session.contracts.disputes
    shortfall = disputes.bond_shortfall(task_id)
    if shortfall == 0:
        return None
    receipt = disputes.top_up_bond(task_id, value=payment_value(session.contracts.treasury, task_id, shortfall))
    log.warning("bond topped up task=%d amount=%d tx=%s", task_id, shortfall, receipt.transaction_hash)
    return receipt


def _opened(receipt: Receipt, kind: str, task_id: int, round_number: int, client_index: int) -> Opened:
    (event,) = receipt.events_of(ChallengeOpened)
    log.info(
        "challenge opened id=%d kind=%s task=%d round=%d client=%d bond=%d tx=%s",
        event.challenge_id,
        kind,
        task_id,
        round_number,
        client_index,
        event.bond,
        receipt.transaction_hash,
    )
    return Opened(event.challenge_id, event.verdict_deadline, receipt)


def resolve(session: ChainSession, challenge_id: int, upheld: bool, signatures: list[bytes]) -> Receipt | None:
    """Submit a quorum's verdict; None when the challenge was resolved (or expired) before."""
    disputes = session.contracts.disputes
    try:
        receipt = disputes.resolve(challenge_id, upheld, signatures)
    except DisputeNotOpen:
        return None
    except ContractRevert:
        if disputes.challenge(challenge_id).status != ChallengeStatus.OPEN:
            return None  # resolved by someone else in the same block: done
        raise
    log.info("verdict submitted challenge=%d upheld=%s tx=%s", challenge_id, upheld, receipt.transaction_hash)
    return receipt


def expire(session: ChainSession, challenge_id: int) -> Receipt | None:
    """Expire a challenge whose verdict window passed (anyone); None when it was resolved or expired before."""
    disputes = session.contracts.disputes
    if disputes.challenge(challenge_id).status != ChallengeStatus.OPEN:
        return None
    try:
        receipt = transact_when_due(
            disputes, "expire(uint256)", challenge_id, gas=EXPIRE_GAS, too_early=(DisputeVerdictNotDue,)
        )
    except ContractRevert:
        if disputes.challenge(challenge_id).status != ChallengeStatus.OPEN:
            return None
        raise
    log.info("challenge expired challenge=%d tx=%s", challenge_id, receipt.transaction_hash)
    return receipt
