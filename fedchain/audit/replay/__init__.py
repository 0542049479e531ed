"""Replaying a task's events: rebuild its history and recompute every number the contracts produced.

:func:`replay_task` walks the events in chain order (block, log index) the way
the contracts applied them, keeping its own copy of every client's reputation,
every job and the task's budget. At each event it recomputes what the event
should say with the Python mechanism (:mod:`fedchain.fl.reputation`, exact 1e18
fixed point) and records any difference in a :class:`~fedchain.audit.checks.Tally`:

* auctions: each revealed bid's rank by eq. 18 (a bid of negative utility
  forfeits its deposit, one outranked by MAX_RANKED others gets it back), the
  winner and price, the escrow, and the standby bid that takes a slashed job over;
* reputation: r_a and r_t of every scored client after every round (with the
  posted cross-task priors of eq. 8 applied), and who falls below the
  thresholds and is removed;
* payments: each final round's eq. 15 payments after pro-rata scaling, the
  budget left, fog payments, the final bonuses of eq. 16, refunds and forfeits;
  and that every ``Credited`` event is one of these (and each of these has one).
  A fog node's deposits and payments count per transaction: a batch call
  (``commitBids``, ``commitUpdates``) moves them for all its jobs in one event;
* accountability: the aggregator's bond and its top-ups, every challenge of the
  four kinds, verdict and expiry, the fate each gives its entry (the first
  challenge opened wins; applied when the round is finalised, the priors' when
  round 1 is), the entry slash each paid entry takes, a voided early finish, an
  abandoned task's neutral rounds and forfeited bond, and that every forfeit
  went to the deployment's sink (announced by the Treasury's ``SinkSet``),
  never to the publisher or the aggregator.

A post is pending: the replay scores a round when its ``RoundFinalized``
event comes, with the measurements of its ``RoundPosted`` event and the
fates of its challenged entries.

The chain's own values carry the replay on after a mismatch, so one wrong
event gives one finding rather than a cascade. Everything here is pure: events
in, history and findings out. The handlers live by contract:
:mod:`.tasks` (TaskRegistry), :mod:`.rounds` (RoundLedger), :mod:`.auctions`
(FogAuction, DataHandoff), :mod:`.disputes` (Disputes) and :mod:`.money`
(Treasury), over one :class:`~fedchain.audit.replay.state.ReplayState`;
:mod:`.record` turns it into the :class:`~fedchain.audit.history.TaskHistory`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from fedchain.audit.replay import auctions, disputes, money, rounds, tasks
from fedchain.audit.replay.record import history_of
from fedchain.audit.replay.state import (
    BID_FORFEIT,
    BID_REFUND,
    BOND_FORFEIT,
    BOND_REFUND,
    BOND_SLASH,
    BUDGET_REFUND,
    BURN_SINK,
    CHALLENGE_FORFEIT,
    CHALLENGE_REFUND,
    CHALLENGE_REWARD,
    CLIENT_REWARD,
    DEPOSIT_FORFEIT,
    DEPOSIT_RETURN,
    ESCROW_REFUND,
    FOG_COMPENSATION,
    FOG_PAYMENT,
    FOG_SLASH,
    FORFEIT_REASONS,
    D,
    E,
    H,
    PoolParts,
    R,
    Replay,
    ReplayState,
    S,
    mechanism_of,
    reason_name,
)
from fedchain.chain import bindings as b
from fedchain.chain.abi import ChainEvent
from fedchain.fl.reputation import MechanismParams
from fedchain.units import ETHER

__all__ = [
    "BID_FORFEIT",
    "BID_REFUND",
    "BOND_FORFEIT",
    "BOND_REFUND",
    "BOND_SLASH",
    "BUDGET_REFUND",
    "CHALLENGE_FORFEIT",
    "CHALLENGE_REFUND",
    "CHALLENGE_REWARD",
    "CLIENT_REWARD",
    "DEPOSIT_FORFEIT",
    "DEPOSIT_RETURN",
    "ESCROW_REFUND",
    "FOG_COMPENSATION",
    "FOG_PAYMENT",
    "FOG_SLASH",
    "FORFEIT_REASONS",
    "PoolParts",
    "Replay",
    "mechanism_of",
    "reason_name",
    "replay_task",
]

#: The replay's handler of each event type (events of other types do not change a task).
HANDLERS: dict[type[ChainEvent], Callable[[ReplayState, Any], None]] = {
    **tasks.HANDLERS,
    **rounds.HANDLERS,
    **auctions.HANDLERS,
    **disputes.HANDLERS,
    **money.HANDLERS,
}


def _apply(r: ReplayState, event: ChainEvent) -> None:
    handler = HANDLERS.get(type(event))
    if handler is None:
        return
    if r.created is None and not isinstance(event, b.TaskCreated):
        r.tally.fail(H, f"{type(event).__name__} before the task was created", event)
        return
    handler(r, event)


def _finish(r: ReplayState, withdrawn: dict[str, int]) -> Replay:
    for removal in r.pending_removals:
        r.tally.fail(R, f"client {removal.client_index} removed outside a round's finalisation", removal)
    for (tx, kind), expected in r.expected_in_tx.items():
        r.tally.fail(D, f"the {kind} event a call implied is missing from transaction {tx} ({expected})")
    money.check_sink(r)
    for (_, bidder), amount in r.bid_deposits.items():
        r.expected_deposits[(bidder, amount)] += 1
    for (_, fog), amount in r.fog_payments.items():
        r.credit(fog, amount, FOG_PAYMENT)
    money.match_credits(r)
    money.match_deposits(r)
    history = history_of(r, withdrawn)
    pool = PoolParts(
        r.budget_left, r.deposits_held, r.rewards_held, r.auction_held, r.disputes_held, r.deposited, r.credited
    )
    if r.created is not None:
        r.tally.expect(
            E,
            "the pool (deposited - credited) against the modules' holdings rebuilt from their events",
            pool.parts,
            pool.held,
        )
    return Replay(history=history, mechanism=r.mechanism, pool=pool, tally=r.tally)


def replay_task(task_id: int, events: Iterable[ChainEvent], *, mechanism: MechanismParams | None = None) -> Replay:
    """Rebuild task ``task_id`` from ``events`` (a deployment's events, any order) and recompute every number.

    ``mechanism`` replaces the parameters the task was created with (to ask
    "what if"; an audit leaves it None). Events of other tasks are ignored,
    except withdrawals, which are per account, and the deployment's own
    (the Treasury's ``SinkSet``, the committee's ``CommitteeFormed``).
    """
    events = sorted(events)
    sinks = [e.sink for e in events if isinstance(e, b.SinkSet)]
    windows = [e.verdict_window for e in events if isinstance(e, b.CommitteeFormed)]
    r = ReplayState(task_id, mechanism, sinks[0] if sinks else BURN_SINK, windows[0] if windows else None)
    if not sinks:
        r.tally.note(S, "the deployment's SinkSet event is not among the events: the zero address is assumed")
    # Withdrawals are per account and asset: those in the task's asset (ether, or its token) count.
    asset = next((e.token for e in events if isinstance(e, b.TokenBound) and e.task_id == task_id), ETHER)
    withdrawn: dict[str, int] = {}
    for event in events:
        if isinstance(event, b.Withdrawn):
            if int(event.token, 16) == int(asset, 16):
                withdrawn[event.account] = withdrawn.get(event.account, 0) + event.amount
        elif getattr(event, "task_id", None) == task_id:
            _apply(r, event)
    if r.created is None:
        r.tally.fail(H, f"no TaskCreated event for task {task_id}")
    return _finish(r, withdrawn)
