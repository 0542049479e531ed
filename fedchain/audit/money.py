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


def check_treasury(events: Iterable[ChainEvent], views: TreasuryViews | None) -> Tally:
    """Conservation for the Treasury as a whole and bounded withdrawals, over every task's events."""
    tally = Tally()
    T, W = CheckName.ESCROW_TREASURY, CheckName.WITHDRAWALS
    deposited = credited = withdrawn = 0
    credited_to: dict[str, int] = {}
    withdrawn_by: dict[str, int] = {}
    for event in sorted(events):
        if isinstance(event, b.Deposited):
            deposited += event.amount
        elif isinstance(event, b.Credited):
            credited += event.amount
            credited_to[event.to] = credited_to.get(event.to, 0) + event.amount
            tally.require(
                T,
                credited <= deposited,
                f"{credited} wei credited in all, more than the {deposited} wei deposited",
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
                f"{event.account} withdrew {event.amount} wei with only {available} wei credited and not yet withdrawn",
                event,
            )
    if views is None:
        tally.skip(T, "no Treasury views (events only)")
        return tally
    totals = views.totals
    tally.expect(T, "Treasury total deposited", deposited, totals.deposited)
    tally.expect(T, "Treasury total withdrawn", withdrawn, totals.withdrawn)
    tally.expect(T, "Treasury total held (deposited - credited)", deposited - credited, totals.held)
    tally.expect(T, "Treasury total claimable (credited - withdrawn)", credited - withdrawn, totals.claimable)
    tally.expect(T, "Treasury balance (held + claimable)", totals.held + totals.claimable, views.balance)
    tally.expect(T, "sum of every account's claimable balance", totals.claimable, sum(views.claimable.values()))
    for account in sorted(credited_to):
        owed = credited_to[account] - withdrawn_by.get(account, 0)
        tally.expect(W, f"claimable balance of {account} (credited - withdrawn)", owed, views.claimable.get(account, 0))
    return tally
