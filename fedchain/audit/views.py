"""The contracts' view functions at one block, and the checks of the replay against them.

Events say what happened; views say where the contracts ended up. The auditor
reads both at the same block (:mod:`fedchain.audit.chain` does the reading) and
:func:`check_task_views` compares every client's stored reputation, every job,
the budget and the Treasury pool with what the replay rebuilt. Pure: views in,
findings out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fedchain.audit.checks import CheckName, Tally
from fedchain.audit.replay import Replay
from fedchain.chain.bindings import ClientInfo, Job, TaskParams, TaskState, Totals


@dataclass(frozen=True)
class TaskViews:
    """One task as the contracts' views report it."""

    params: TaskParams
    state: TaskState
    #: RoundLedger.client for every client index.
    clients: tuple[ClientInfo, ...]
    deposits_held: int
    rewards_held: int
    settled: bool
    #: FogAuction.job for every client index.
    jobs: tuple[Job, ...]
    #: FogAuction.heldFor(task).
    auction_held: int
    #: Treasury.held(task).
    treasury_held: int
    #: Disputes.heldFor(task): the bond left and the open challenges' bonds.
    disputes_held: int = 0
    #: RoundLedger.rounds(task): the last posted and the last final round.
    rounds: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class AssetViews:
    """The Treasury's figures in one asset: ether, or one ERC-20 token."""

    #: The Treasury contract's balance of the asset, in its smallest unit.
    balance: int
    #: Treasury.totalsIn(asset).
    totals: Totals
    #: Treasury.claimableIn(asset, account) of every account any event ever credited in that asset.
    claimable: Mapping[str, int]


@dataclass(frozen=True)
class TreasuryViews:
    """The Treasury as a whole: its ether figures, and those of every token a task of the deployment uses."""

    #: The Treasury contract's ether balance, wei.
    balance: int
    totals: Totals
    #: Treasury.claimable of every account any event ever credited.
    claimable: Mapping[str, int]
    #: The figures of each token bound to a task, by token address.
    tokens: Mapping[str, AssetViews] = field(default_factory=dict)

    def of(self, asset: str) -> AssetViews:
        """The figures of ``asset`` (the zero address: ether)."""
        if int(asset, 16) == 0:
            return AssetViews(self.balance, self.totals, self.claimable)
        return self.tokens[asset]


@dataclass(frozen=True)
class ChainViews:
    """Everything the auditor reads from views, at ``block_number`` (the last block of the events)."""

    block_number: int
    task: TaskViews
    treasury: TreasuryViews


def check_task_views(replay: Replay, views: TaskViews) -> Tally:
    """Compare the replay's rebuilt state with the task's views (reputation, payments, auctions, escrow)."""
    tally = Tally()
    history, pool = replay.history, replay.pool
    task = history.task
    H, A, R, P, E = (
        CheckName.HISTORY,
        CheckName.AUCTIONS,
        CheckName.REPUTATION,
        CheckName.PAYMENTS,
        CheckName.ESCROW_TASK,
    )

    tally.expect(H, "task parameters", task.params, views.params)
    tally.expect(H, "task status", task.status, views.state.status.name.title())
    tally.expect(H, "publisher", task.publisher, views.state.publisher)
    tally.expect(H, "aggregator", task.aggregator, views.state.aggregator)
    tally.expect(H, "clients", len(history.clients), len(views.clients))
    tally.expect(P, "budget", task.budget, views.state.budget)
    tally.expect(P, "budget left", pool.budget_left, views.state.budget_left)
    tally.expect(P, "rewards held by the ledger", pool.rewards_held, views.rewards_held)
    tally.expect(P, "client deposits held by the ledger", pool.deposits_held, views.deposits_held)

    # A different count is flagged above; the clients both sides have are still compared.
    for client, info in zip(history.clients, views.clients, strict=False):
        i = client.index
        tally.expect(H, f"account of client {i}", client.account, info.account)
        tally.expect(R, f"status of client {i}", client.status, info.status.name.lower())
        tally.expect(R, f"scored rounds of client {i}", client.rounds, info.rounds)
        tally.expect(R, f"sum of j * q_j of client {i}", client.sum_quality, info.sum_quality)
        tally.expect(R, f"sum of j * T/t_j of client {i}", client.sum_time_ratio, info.sum_time_ratio)
        tally.expect(R, f"r_a of client {i}", client.loss_reputation, info.loss_reputation)
        tally.expect(R, f"r_t of client {i}", client.time_reputation, info.time_reputation)
        tally.expect(P, f"unpaid earnings of client {i}", 0 if client.bonus is not None else client.earned, info.earned)

    last_commit = {c.client_index: c.update_hash for c in history.commits}
    for auction in history.auctions:
        i = auction.client_index
        if not tally.require(A, i < len(views.jobs), f"job {i} has no view"):
            continue
        job = views.jobs[i]
        tally.expect(A, f"data size of job {i}", auction.data_size, job.data_size)
        if auction.closed:
            tally.expect(A, f"escrowed price of job {i}", auction.price, job.price)
            tally.expect(A, f"escrow of job {i}", auction.escrow, job.escrow)
        tally.expect(H, f"last update hash of job {i}", last_commit.get(i, bytes(32)), job.update_hash)

    tally.expect(E, "the task's Treasury pool (deposited - credited)", pool.held, views.treasury_held)
    tally.expect(E, "fog deposits and escrow held by the auction", pool.auction_held, views.auction_held)
    tally.expect(E, "bonds held by the disputes contract", pool.disputes_held, views.disputes_held)
    tally.expect(H, "posted and final rounds", (task.posted_rounds, task.final_rounds), tuple(views.rounds))
    parts = (
        views.state.budget_left + views.deposits_held + views.rewards_held + views.auction_held + views.disputes_held
    )
    tally.expect(
        E, "the pool's parts (budget left + client deposits + rewards + auction + bonds)", parts, views.treasury_held
    )
    return tally
