"""The replay of the Treasury's events, and the checks at the end: every credit and deposit explained, every forfeit
to the sink."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from fedchain.audit.replay.state import (
    CHALLENGE_FORFEIT,
    FORFEIT_REASONS,
    E,
    P,
    ReplayState,
    S,
    reason_name,
)
from fedchain.chain import bindings as b


def on_deposited(r: ReplayState, e: b.Deposited) -> None:
    r.deposited += e.amount
    r.tally.expect(E, "pool after a deposit", r.deposited - r.credited, e.held, e)
    r.actual_deposits.append(e)


def on_credited(r: ReplayState, e: b.Credited) -> None:
    pool = r.deposited - r.credited
    r.tally.require(E, e.amount <= pool, f"{e.amount} wei credited from a pool of {pool} wei", e)
    r.credited += e.amount
    r.actual_credits.append((e, reason_name(e.reason)))


def check_sink(r: ReplayState) -> None:
    """Every forfeit and slash went to the deployment's sink, except a rejected challenge's share for the accused
    (who did not trigger it: the challenger did); the publisher, who appoints the aggregator, received none."""
    if r.created is None:
        return
    accused = {c.event.accused for c in r.challenges.values() if c.status == "rejected"}
    for event, reason in r.actual_credits:
        if reason not in FORFEIT_REASONS:
            continue
        allowed = event.to == r.sink or (reason == CHALLENGE_FORFEIT and event.to in accused)
        r.tally.require(
            S, allowed, f"{reason} of {event.amount} wei went to {event.to}, not to the sink {r.sink}", event
        )
    received = [(e, reason) for e, reason in r.actual_credits if e.to == r.publisher and reason in FORFEIT_REASONS]
    r.tally.require(S, not received, f"the publisher received forfeits: {[(x, e.amount) for e, x in received]}")


def match_credits(r: ReplayState) -> None:
    """Every Credited event is one the replay expects, and every expected credit happened."""
    expected = Counter(r.expected_credits)
    for event, reason in r.actual_credits:
        key = (event.to, event.amount, reason)
        unexplained = f"{reason} credit of {event.amount} wei to {event.to} is not explained by the task's events"
        if r.tally.require(P, expected[key] > 0, unexplained, event):
            expected[key] -= 1
    for (account, amount, reason), count in expected.items():
        for _ in range(count):
            r.tally.fail(P, f"{reason} credit of {amount} wei to {account} is missing")


def match_deposits(r: ReplayState) -> None:
    """Every Deposited event is a budget, a deposit, a bond, a top-up or an escrow, and vice versa."""
    expected = Counter(r.expected_deposits)
    for event in r.actual_deposits:
        key = (event.from_, event.amount)
        unexplained = f"deposit of {event.amount} wei from {event.from_} is not explained by the task's events"
        if r.tally.require(E, expected[key] > 0, unexplained, event):
            expected[key] -= 1
    for (account, amount), count in expected.items():
        for _ in range(count):
            r.tally.fail(E, f"deposit of {amount} wei from {account} is missing from the Treasury's events")


HANDLERS: dict[type, Callable[[ReplayState, Any], None]] = {
    b.Deposited: on_deposited,
    b.Credited: on_credited,
}
