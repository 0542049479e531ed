"""Finalising posted rounds: a round's money moves only when it becomes final.

A post is pending (contracts/README.md, "A round's state machine"): once its
challenge window has passed and no challenge of it is open, anyone finalises
it with the measurements it was posted with (``RoundLedger.finalizeRound``),
rounds in order. The aggregator finalises as it goes; every agent that wants
to settle finalises what is due first, since settlement waits for every
posted round. A lost race (someone finalised the round first) counts as done.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from fedchain.agent.chainloop import chain_now, transact_when_due
from fedchain.agent.session import ChainSession
from fedchain.chain.bindings import LedgerWindowOpen, Measurement, RoundPosted
from fedchain.chain.events import LogQuery, iter_events
from fedchain.errors import AgentError, ContractRevert

log = logging.getLogger(__name__)

#: Gas limit of a finalisation sent without an estimate (on an automining chain the estimate runs on a block
#: from before the window closed): measured 19,003 gas per client at 100 clients (`fedchain bench gas`).
FINALIZE_GAS_BASE, FINALIZE_GAS_PER_CLIENT = 200_000, 40_000


def posted_measurements(session: ChainSession, task_id: int) -> dict[int, tuple[Measurement, ...]]:
    """Round -> the measurements it was posted with, from the chain's ``RoundPosted`` events."""
    query = LogQuery(addresses=(session.contracts.round_ledger.address,), from_block=session.deployment.block_number)
    return {
        event.round: tuple(event.measurements)
        for event in iter_events(session.w3, session.transactor.registry, query)
        if isinstance(event, RoundPosted) and event.task_id == task_id
    }


def pending_rounds(session: ChainSession, task_id: int) -> range:
    """The posted rounds of the task that are not final yet."""
    posted, finalized = session.contracts.round_ledger.rounds(task_id)
    return range(finalized + 1, posted + 1)


def finalize_due(
    session: ChainSession, task_id: int, measurements: Mapping[int, tuple[Measurement, ...]] | None = None
) -> tuple[int, ...]:
    """Finalise, in order, every pending round whose window has passed and that no open challenge holds; returns
    the rounds this call finalised. ``measurements`` are the posted ones by round (read from the events when None)."""
    contracts = session.contracts
    ledger = contracts.round_ledger
    pending = pending_rounds(session, task_id)
    if not pending:
        return ()
    window = contracts.task_registry.params(task_id).challenge_window
    done: list[int] = []
    for round_number in pending:
        closes = ledger.round_record(task_id, round_number).posted_at + window
        if chain_now(session) <= closes:
            break
        opened, _ = contracts.disputes.round_challenges(task_id, round_number)
        if opened:
            log.info("round %d of task %d waits for %d verdict(s)", round_number, task_id, opened)
            break
        if measurements is None or round_number not in measurements:
            measurements = posted_measurements(session, task_id)
        entries = measurements.get(round_number)
        if entries is None:
            raise AgentError(
                f"round {round_number} of task {task_id} is posted but its RoundPosted event was not found",
                hint="check that --rpc-url serves the deployment's chain with its logs",
            )
        try:
            receipt = transact_when_due(
                ledger,
                "finalizeRound(uint256,uint16,(uint64,uint32,bool,bool)[])",
                task_id,
                round_number,
                list(entries),
                gas=FINALIZE_GAS_BASE + FINALIZE_GAS_PER_CLIENT * len(entries),
                too_early=(LedgerWindowOpen,),
            )
        except ContractRevert:
            _, finalized = ledger.rounds(task_id)
            if finalized >= round_number:
                continue  # finalised by someone else first: done
            raise
        log.info("round %d of task %d final (tx %s)", round_number, task_id, receipt.transaction_hash)
        done.append(round_number)
    return tuple(done)
