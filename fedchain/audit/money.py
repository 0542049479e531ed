"""The Treasury's money invariants over a whole deployment: conservation and bounded withdrawals.

Every wei enters through ``Deposited``, moves to an account through
``Credited`` and leaves through ``Withdrawn``. So, from the events alone and
to the wei: held = deposited - credited, claimable = credited - withdrawn,
and no account ever withdraws more than it was credited before. With the
Treasury's views the same figures must match its totals, each account's
claimable balance, and its ether balance (= held + claimable). Pure: events
and views in, findings out.
"""

from __future__ import annotations

from collections.abc import Iterable

from fedchain.audit.checks import CheckName, Tally
from fedchain.audit.views import TreasuryViews
from fedchain.chain import bindings as b
from fedchain.chain.abi import ChainEvent
from fedchain.units import ETHER


def asset_of_tasks(events: Iterable[ChainEvent]) -> dict[int, str]:
    """The token of every task that has one (``TokenBound``); a task not listed is in ether."""
    return {event.task_id: event.token for event in events if isinstance(event, b.TokenBound)}


def check_treasury(events: Iterable[ChainEvent], views: TreasuryViews | None) -> Tally:
    """Conservation for the Treasury as a whole and bounded withdrawals, over every task's events, per asset."""
    ordered = sorted(events)
    tokens = asset_of_tasks(ordered)
    by_asset: dict[str, list[ChainEvent]] = {ETHER: []}
    for event in ordered:
        if isinstance(event, (b.Deposited, b.Credited)):
            by_asset.setdefault(tokens.get(event.task_id, ETHER), []).append(event)
        elif isinstance(event, b.Withdrawn):
            by_asset.setdefault(event.token if int(event.token, 16) else ETHER, []).append(event)
    tally = Tally()
    for asset, asset_events in by_asset.items():
        tally = tally.merge(_check_asset(asset, asset_events, views))
    return tally


def _check_asset(asset: str, events: list[ChainEvent], views: TreasuryViews | None) -> Tally:
    """Conservation and bounded withdrawals in one asset; amounts are in its smallest unit ("wei" for ether)."""
    tally = Tally()
    T, W = CheckName.ESCROW_TREASURY, CheckName.WITHDRAWALS
    ether = asset == ETHER
    unit = "wei" if ether else f"units of {asset}"
    deposited = credited = withdrawn = 0
    credited_to: dict[str, int] = {}
    withdrawn_by: dict[str, int] = {}
    for event in events:
        if isinstance(event, b.Deposited):
            deposited += event.amount
        elif isinstance(event, b.Credited):
            credited += event.amount
            credited_to[event.to] = credited_to.get(event.to, 0) + event.amount
            tally.require(
                T,
                credited <= deposited,
                f"{credited} {unit} credited in all, more than the {deposited} {unit} deposited",
                event,
            )
        elif isinstance(event, b.Withdrawn):
            withdrawn += event.amount
            before = withdrawn_by.get(event.account, 0)
            withdrawn_by[event.account] = before + event.amount
            available = credited_to.get(event.account, 0) - before
            tally.require(
                W,
                event.amount <= available,
                f"{event.account} withdrew {event.amount} {unit} with only {available} {unit} credited and not yet withdrawn",
                event,
            )
    if views is None:
        if ether:
            tally.skip(T, "no Treasury views (events only)")
        return tally
    figures = views.of(asset)
    totals = figures.totals
    of = "" if ether else f" in {asset}"
    tally.expect(T, f"Treasury total deposited{of}", deposited, totals.deposited)
    tally.expect(T, f"Treasury total withdrawn{of}", withdrawn, totals.withdrawn)
    tally.expect(T, f"Treasury total held (deposited - credited){of}", deposited - credited, totals.held)
    tally.expect(T, f"Treasury total claimable (credited - withdrawn){of}", credited - withdrawn, totals.claimable)
    if ether:
        tally.expect(T, "Treasury balance (held + claimable)", totals.held + totals.claimable, figures.balance)
    else:
        # Anyone may send tokens to the Treasury directly: they are never counted, so the balance may exceed.
        tally.require(
            T,
            figures.balance >= totals.held + totals.claimable,
            f"the Treasury holds {figures.balance} {unit}, less than the {totals.held + totals.claimable} it owes",
        )
    tally.expect(T, f"sum of every account's claimable balance{of}", totals.claimable, sum(figures.claimable.values()))
    for account in sorted(credited_to):
        owed = credited_to[account] - withdrawn_by.get(account, 0)
        tally.expect(
            W, f"claimable balance of {account}{of} (credited - withdrawn)", owed, figures.claimable.get(account, 0)
        )
    return tally
