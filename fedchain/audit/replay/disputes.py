"""The replay of Disputes' events: the aggregator's bond, challenges of the four kinds, verdicts and the fate each
gives its entry, the first-opened rule and the entry slash."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fedchain.audit.replay.state import (
    ACCURACY_ENTRY,
    BOND_FORFEIT,
    BOND_REFUND,
    BOND_SLASH,
    CHALLENGE_FORFEIT,
    CHALLENGE_REFUND,
    CHALLENGE_REWARD,
    FATES,
    ChallengeState,
    D,
    EntryState,
    ReplayState,
)
from fedchain.chain import bindings as b
from fedchain.fl.reputation import entry_slash


def on_bond_posted(r: ReplayState, e: b.BondPosted) -> None:
    r.require_status(e, "Open")
    r.tally.require(D, r.bonder is None, "the aggregator's bond was posted twice", e)
    r.tally.expect(D, "aggregator bond", r.params.aggregator_bond, e.amount, e)
    r.bonder, r.bond, r.bond_left = e.bonder, e.amount, e.amount
    r.disputes_held += e.amount
    r.expected_deposits[(e.bonder, e.amount)] += 1


def on_bond_topped_up(r: ReplayState, e: b.BondToppedUp) -> None:
    r.require_status(e, "Running", "Finished")
    r.tally.expect(D, "bonder topping the bond up", r.bonder, e.bonder, e)
    r.tally.expect(D, "bond top-up (the shortfall)", r.bond - r.bond_left, e.amount, e)
    r.bond_left += e.amount
    r.topped_up += e.amount
    r.disputes_held += e.amount
    r.expected_deposits[(e.bonder, e.amount)] += 1


def on_bond_released(r: ReplayState, e: b.BondReleased) -> None:
    r.tally.require(D, r.status != "Abandoned", "an abandoned task's bond went back to its bonder", e)
    r.tally.expect(D, "bonder", r.bonder, e.bonder, e)
    r.tally.expect(D, "bond returned at settlement", r.bond_left, e.amount, e)
    r.credit(e.bonder, e.amount, BOND_REFUND)
    r.disputes_held -= e.amount
    r.bond_left, r.bond_returned = 0, e.amount


def on_bond_forfeited(r: ReplayState, e: b.BondForfeited) -> None:
    r.tally.require(D, r.status == "Abandoned", "the bond of a task that was not abandoned was forfeited", e)
    r.tally.expect(D, "bond forfeited at settlement", r.bond_left, e.amount, e)
    r.credit_sink(e.amount, BOND_FORFEIT)
    r.disputes_held -= e.amount
    r.bond_left, r.bond_forfeited = 0, e.amount


def on_challenge_opened(r: ReplayState, e: b.ChallengeOpened) -> None:
    posted = r.posted.get(e.round)
    if not r.tally.require(
        D,
        posted is not None and not posted.final,
        f"challenge {e.challenge_id} of round {e.round}, which is not a pending posted round",
        e,
    ):
        return
    assert posted is not None
    kind = e.kind.name.lower()
    accuracy = e.kind == b.ChallengeKind.ACCURACY
    r.tally.require(D, (e.round == 0) == (kind == "prior"), f"a {kind} challenge of round {e.round}", e)
    r.tally.require(
        D,
        (e.client_index == ACCURACY_ENTRY) if accuracy else 0 <= e.client_index < len(r.clients),
        f"challenge {e.challenge_id} names client {e.client_index}, who never joined",
        e,
    )
    r.tally.expect(D, f"bond of challenge {e.challenge_id}", r.params.challenge_bond, e.bond, e)
    if r.verdict_window is not None and posted.posted_at is not None:
        opened_at = e.verdict_deadline - r.verdict_window
        closes = posted.posted_at + r.params.challenge_window
        r.tally.require(
            D,
            opened_at <= closes,
            f"challenge {e.challenge_id} opened at {opened_at}, after round {e.round}'s window ({closes})",
            e,
        )
    if e.kind == b.ChallengeKind.FOG:
        if 0 <= e.client_index < len(r.clients):
            r.tally.expect(
                D, f"challenger of fog challenge {e.challenge_id}", r.clients[e.client_index].account, e.challenger, e
            )
        job = r.jobs.get(e.client_index)
        commit = job.commits.get(e.round) if job is not None else None
        committer = commit.fog if commit is not None else None
        r.tally.expect(D, f"accused of fog challenge {e.challenge_id} (the committer)", committer, e.accused, e)
    else:
        r.tally.expect(D, f"accused of {kind} challenge {e.challenge_id}", r.aggregator, e.accused, e)
    if accuracy:
        p = r.params
        early = r.status == "Finished" and e.round == r.current_round and e.round < p.rounds
        r.tally.require(D, early, f"accuracy challenge {e.challenge_id} of round {e.round}, which ended nothing", e)
        r.tally.require(D, e.value < p.target_accuracy, f"accuracy challenge {e.challenge_id} claims the target", e)
    r.challenges[e.challenge_id] = ChallengeState(e)
    r.entry(e.round, e.client_index).open += 1
    r.disputes_held += e.bond
    r.expected_deposits[(e.challenger, e.bond)] += 1


def on_challenge_resolved(r: ReplayState, e: b.ChallengeResolved) -> None:
    record = r.challenges.get(e.challenge_id)
    if not r.tally.require(
        D, record is not None and record.status == "open", f"challenge {e.challenge_id} resolved but not open", e
    ):
        return
    assert record is not None
    c = record.event
    status = e.status.name.lower()
    record.status = status
    r.disputes_held -= c.bond
    entry = r.entry(c.round, c.client_index)
    entry.open -= 1
    if status == "expired":
        outcome = "neutral"
    elif status == "upheld" and c.kind == b.ChallengeKind.FOG:
        outcome = "void"
    elif status == "upheld":
        outcome = "corrected"
        # The first challenge opened wins, whichever verdict came first.
        if entry.first_upheld is None or c.challenge_id < entry.first_upheld:
            entry.first_upheld, entry.corrected, entry.value = c.challenge_id, c.proposed, c.value
    else:
        outcome = "posted"
    if FATES.index(outcome) > FATES.index(entry.fate):
        entry.fate = outcome
    record.fate = entry.fate
    r.tally.expect(
        D,
        f"fate of round {c.round} entry {c.client_index} after challenge {c.challenge_id}",
        entry.fate,
        FATES[int(e.fate)],
        e,
    )
    if status == "rejected":
        half = c.bond // 2
        r.credit(c.accused, half, CHALLENGE_FORFEIT)
        r.credit_sink(c.bond - half, CHALLENGE_FORFEIT)
    else:
        r.credit(c.challenger, c.bond, CHALLENGE_REFUND)
    if status == "upheld" and c.kind == b.ChallengeKind.FOG:
        _expect_fraud_slash(r, c, e)
    _settle_entry(r, c.round, c.client_index, entry, e)


def _expect_fraud_slash(r: ReplayState, c: b.ChallengeOpened, e: b.ChallengeResolved) -> None:
    job = r.jobs.get(c.client_index)
    commit = job.commits.get(c.round) if job is not None else None
    r.tally.require(
        D,
        commit is not None and commit.fog == c.accused,
        f"fog challenge {c.challenge_id} upheld against {c.accused}, who did not commit round "
        f"{c.round} of job {c.client_index}",
        e,
    )
    holds = (
        job is not None
        and job.status == "awarded"
        and job.winner < len(job.bids)
        and job.bids[job.winner].bidder == c.accused
        and not job.bids[job.winner].settled
    )
    if holds:
        r.expect_in_tx(e.transaction_hash, "fraud", (c.client_index, c.accused, True))


def _settle_entry(r: ReplayState, round_number: int, index: int, entry: EntryState, e: b.ChallengeResolved) -> None:
    """Once an entry has no open challenge left: its upheld challenges are paid once (one entry slash, half to the
    earliest opened), and a corrected or neutral accuracy voids the early finish."""
    if entry.open != 0:
        return
    if entry.first_upheld is not None and not entry.paid:
        entry.paid = True
        taken = min(entry_slash(r.params.aggregator_bond, r.params.max_clients), r.bond_left)
        reward = taken // 2
        winner = r.challenges[entry.first_upheld].event
        r.credit(winner.challenger, reward, CHALLENGE_REWARD)
        r.credit_sink(taken - reward, BOND_SLASH)
        r.expect_in_tx(e.transaction_hash, "bond", (entry.first_upheld, reward, taken - reward))
        r.bond_left -= taken
        r.disputes_held -= taken
    if index == ACCURACY_ENTRY and entry.fate in ("corrected", "neutral") and not entry.applied:
        entry.applied = True
        r.expect_in_tx(e.transaction_hash, "void", round_number)


def on_bond_slashed(r: ReplayState, e: b.BondSlashed) -> None:
    expected = r.take_expected(e.transaction_hash, "bond")
    r.tally.expect(
        D, "aggregator bond slashed (challenge, reward, burned)", expected, (e.challenge_id, e.reward, e.burned), e
    )


HANDLERS: dict[type, Callable[[ReplayState, Any], None]] = {
    b.BondPosted: on_bond_posted,
    b.BondToppedUp: on_bond_topped_up,
    b.BondReleased: on_bond_released,
    b.BondForfeited: on_bond_forfeited,
    b.ChallengeOpened: on_challenge_opened,
    b.ChallengeResolved: on_challenge_resolved,
    b.BondSlashed: on_bond_slashed,
}
