"""Opening, resolving and expiring challenges on chain: what the agents and ``fedchain challenge`` send.

Each function takes a :class:`~fedchain.agent.session.ChainSession`, escrows
the task's challenge bond where one is needed, and returns what happened. A
verdict or an expiry that someone else submitted first counts as done.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from fedchain.agent.chainloop import transact_when_due
from fedchain.agent.session import ChainSession
from fedchain.chain.bindings import (
    ChallengeOpened,
    ChallengeStatus,
    DisputeNotOpen,
    DisputeVerdictNotDue,
    Measurement,
)
from fedchain.chain.erc20 import payment_value
from fedchain.chain.tx import Receipt
from fedchain.errors import ContractRevert

log = logging.getLogger(__name__)

#: Gas limit of an expiry sent without an estimate (the estimate runs on a stale block of an automining chain).
EXPIRE_GAS = 200_000


@dataclass(frozen=True)
class Opened:
    """A challenge just opened."""

    challenge_id: int
    verdict_deadline: int
    receipt: Receipt


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


def open_fog_challenge(session: ChainSession, task_id: int, round_number: int, client_index: int, fog: str) -> Opened:
    """Challenge the update ``fog`` committed for the caller's job in ``round_number`` (the job's client only)."""
    bond = session.contracts.task_registry.params(task_id).challenge_bond
    value = payment_value(session.contracts.treasury, task_id, bond)
    receipt = session.contracts.disputes.open_fog_challenge(task_id, round_number, client_index, fog, value=value)
    return _opened(receipt, "fog", task_id, round_number, client_index)


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
