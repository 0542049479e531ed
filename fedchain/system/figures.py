"""What one run did on chain, counted: transactions per participant, jobs nobody trained, rounds missed.

These are the figures that tell whether the agents keep up with a chain's
clock: on a chain that mines every few seconds, an agent that sends one
transaction per block misses auctions (a job without a bid) and rounds (an
active client without a commit). :func:`job_figures` reads them from the
audit's :class:`~fedchain.audit.history.TaskHistory` (pure), and
:func:`transactions_by_sender` counts each participant's transactions in the
chain's blocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from web3 import Web3

from fedchain.audit.history import TaskHistory


@dataclass(frozen=True)
class Sent:
    """One participant's transactions in a block range."""

    #: Mined transactions the participant sent.
    transactions: int = 0
    #: Of those, the ones that reverted (a lost race costs one).
    reverted: int = 0


@dataclass(frozen=True)
class JobFigures:
    """How many jobs went unbid and how many (client, round) pairs went without a commit."""

    #: Jobs whose auction closed without a revealed bid, or never closed.
    unbid: int
    #: (client, round) pairs in which an active client's job was not committed (slashed, vacant or late).
    missed: int
    #: (client, round) pairs an active client should have been trained in.
    due: int


def job_figures(history: TaskHistory) -> JobFigures:
    """Unbid jobs and missed client-rounds of one task (a client counts as active up to the round removing it)."""
    unbid = sum(1 for auction in history.auctions if not auction.closed or auction.winner is None)
    unbid += max(0, len(history.clients) - len(history.auctions))  # a client that never opened its auction
    committed = {(commit.client_index, commit.round) for commit in history.commits}
    due = missed = 0
    for record in history.rounds:
        for client in history.clients:
            if client.removed_round is not None and client.removed_round < record.round:
                continue
            due += 1
            missed += (client.index, record.round) not in committed
    return JobFigures(unbid=unbid, missed=missed, due=due)


def transactions_by_sender(
    w3: Web3, first_block: int, names: Mapping[str, str], last_block: int | None = None
) -> dict[str, Sent]:
    """Each named participant's mined transactions (and reverts) in ``first_block..last_block`` (default: latest).

    ``names`` maps checksum addresses to participant names; transactions of
    other senders are counted under ``"other"``.
    """
    last = int(w3.eth.block_number) if last_block is None else last_block
    counts: dict[str, list[int]] = {}
    for number in range(first_block, last + 1):
        block = w3.eth.get_block(number, full_transactions=True)
        for tx in block["transactions"]:
            name = names.get(Web3.to_checksum_address(tx["from"]), "other")
            entry = counts.setdefault(name, [0, 0])
            entry[0] += 1
            if int(w3.eth.get_transaction_receipt(tx["hash"])["status"]) != 1:
                entry[1] += 1
    return {name: Sent(sent, reverted) for name, (sent, reverted) in counts.items()}
