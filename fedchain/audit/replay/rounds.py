"""The replay of RoundLedger's events: clients, own commits, posts, finalisation (eqs. 4-15) and settlement."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fedchain.audit.history import RoundRecord
from fedchain.audit.replay.state import (
    CLIENT_REWARD,
    DEPOSIT_FORFEIT,
    DEPOSIT_RETURN,
    D,
    H,
    P,
    PostedState,
    R,
    ReplayState,
)
from fedchain.chain import bindings as b
from fedchain.fl.reputation import ClientReputation, final_bonus, scale_pro_rata, score_round


def on_client_joined(r: ReplayState, e: b.ClientJoined) -> None:
    from fedchain.audit.replay.state import ClientState

    r.require_status(e, "Open")
    r.tally.expect(H, "join index", len(r.clients), e.client_index, e)
    r.tally.expect(H, f"deposit of client {e.client_index}", r.params.client_deposit, e.deposit, e)
    assert r.mechanism is not None
    initial = r.mechanism.initial_reputation
    reputation = ClientReputation(loss_reputation=initial, time_reputation=initial)
    r.clients.append(ClientState(len(r.clients), e.client, e.deposit, reputation, commitment=e.data_commitment))
    r.deposits_held += e.deposit
    r.expected_deposits[(e.client, e.deposit)] += 1


def on_client_removed(r: ReplayState, e: b.ClientRemoved) -> None:
    r.pending_removals.append(e)  # emitted before the RoundFinalized of the same transaction


def on_priors_posted(r: ReplayState, e: b.PriorsPosted) -> None:
    r.require_status(e, "Running")
    r.tally.require(H, r.priors is None, "priors posted twice", e)
    r.tally.require(H, not r.rounds and 1 not in r.posted, "priors posted after round 1", e)
    r.tally.expect(H, "priors posted", len(r.clients), len(e.priors), e)
    cap = r.params.reputation_cap
    r.tally.require(R, all(p <= cap for p in e.priors), f"a prior above the reputation cap {cap}", e)
    r.priors = tuple(e.priors)
    # Round 0: the priors' post, challengeable for the task's window.
    r.posted[0] = PostedState(None, posted_at=e.posted_at)


def on_own_update_committed(r: ReplayState, e: b.OwnUpdateCommitted) -> None:
    client = r.client(e.client_index, e)
    r.tally.require(H, r.params.self_trained, "a client committed its own update in an auction task", e)
    r.require_status(e, "Running")
    if client is None:
        return
    r.tally.expect(H, f"committer of client {e.client_index}", client.account, e.client, e)
    r.tally.require(H, client.active, f"removed client {e.client_index} committed round {e.round}", e)
    current = r.current_round
    r.tally.require(
        H,
        e.round in (current, current + 1) and e.round <= r.params.rounds,
        f"client {e.client_index} committed round {e.round} during round {current}",
        e,
    )
    deadline = r.round_started_at + r.params.round_duration
    key = (e.round, e.client_index)
    r.tally.require(H, key not in r.own_commits, f"client {e.client_index} committed round {e.round} twice", e)
    if e.round == current:
        late = f"client {e.client_index} committed round {e.round} at {e.committed_at}, after its deadline {deadline}"
        r.tally.require(H, e.committed_at <= deadline, late, e)
        work_start: int | None = r.round_started_at
    else:
        work_start = _next_round_start(r, current, deadline, e.committed_at)
        r.tally.require(
            H,
            work_start is not None,
            f"client {e.client_index} committed round {e.round} before round {current}'s model could exist",
            e,
        )
    if work_start is not None:
        r.tally.expect(
            H,
            f"round time of client {e.client_index}'s commit of round {e.round}",
            e.committed_at - work_start,
            e.round_time,
            e,
        )
    r.own_commits.setdefault(key, e)
    from fedchain.audit.history import CommitRecord

    r.commits.append(CommitRecord(e.client_index, e.round, e.client, e.update_hash, e.committed_at, 0))


def _next_round_start(r: ReplayState, current: int, deadline: int, now: int) -> int | None:
    """When the round after ``current`` could start: the last active client's commit of ``current`` once every active
    client committed it, else its deadline once passed; None before either (contracts/README.md)."""
    commits = [c.committed_at for (n, _), c in r.own_commits.items() if n == current]
    active = sum(1 for c in r.clients if c.active)
    if commits and len(commits) >= active:
        return max(commits)
    if now > deadline:
        return deadline
    return None


def on_round_posted(r: ReplayState, e: b.RoundPosted) -> None:
    r.require_status(e, "Running")
    r.tally.expect(H, "posted round", r.current_round, e.round, e)
    n = len(r.clients)
    if not r.tally.expect(H, f"measurements in round {e.round}", n, len(e.measurements), e):
        return
    tolerance = r.params.time_tolerance
    for client, m in zip(r.clients, e.measurements, strict=True):
        if not client.active:  # removed by a final round: its entry is ignored
            continue
        i = client.index
        observed: int | None
        if r.params.self_trained:  # the client's own commit records its round time
            own = r.own_commits.get((e.round, i))
            observed = own.round_time if own is not None else None
        else:
            job = r.jobs.get(i)
            fog_commit = job.commits.get(e.round) if job is not None else None
            observed = max(0, fog_commit.committed_at - r.round_started_at) if fog_commit is not None else None
        committed = observed is not None
        r.tally.expect(H, f"client {i} round {e.round} posted as committed", committed, m.committed, e)
        if observed is None:
            r.tally.require(H, not m.accepted, f"client {i} accepted in round {e.round} without a commit", e)
            continue
        r.tally.require(
            H,
            abs(m.round_time - observed) <= tolerance,
            f"client {i} round {e.round}: posted round time {m.round_time} s, the chain observed {observed} s",
            e,
        )
    r.posted[e.round] = PostedState(e, in_task_at_start=r.in_task_at_start)
    target = r.params.target_accuracy
    finished = (target != 0 and e.accuracy >= target) or e.round >= r.params.rounds
    r.pending_close = (e.round, finished)


def effective(r: ReplayState, n: int, measurements: Sequence[b.Measurement]) -> tuple[b.Measurement | None, ...]:
    """Round ``n``'s entries as finalisation takes them, by each entry's fate (see ``PostedRecord.effective``)."""
    entries: list[b.Measurement | None] = []
    for i, m in enumerate(measurements):
        entry = r.entries.get((n, i))
        fate = entry.fate if entry is not None else "posted"
        if fate in ("void", "neutral"):
            entries.append(None)
        elif fate == "corrected" and entry is not None and entry.corrected is not None:
            entries.append(m._replace(quality=entry.corrected.quality, accepted=entry.corrected.accepted))
        else:
            entries.append(m)
    return tuple(entries)


def _apply_prior_fates(r: ReplayState, at: b.RoundFinalized) -> None:
    """Round 1 applies the priors' fates: an upheld challenge's prior replaces the posted one, a neutral one is 0."""
    if r.priors is None:
        return
    opened = [c for c in r.challenges.values() if c.event.round == 0 and c.status == "open"]
    r.tally.require(D, not opened, f"round 1 finalised with {len(opened)} prior challenge(s) open", at)
    priors = list(r.priors)
    for i in range(len(priors)):
        entry = r.entries.get((0, i))
        if entry is None:
            continue
        if entry.fate == "corrected":
            priors[i] = entry.value
        elif entry.fate == "neutral":
            priors[i] = 0
    r.priors = tuple(priors)


def on_round_finalized(r: ReplayState, e: b.RoundFinalized) -> None:
    mechanism = r.mechanism
    assert mechanism is not None
    posted = r.posted.get(e.round)
    expected_round = r.finalized_up_to + 1
    if not r.tally.require(
        H,
        posted is not None and posted.event is not None and e.round == expected_round,
        f"round {e.round} finalised, expected round {expected_round} (posted and next)",
        e,
    ):
        r.pending_removals.clear()
        return
    assert posted is not None and posted.event is not None
    opened = [c for c in r.challenges.values() if c.event.round == e.round and c.status == "open"]
    r.tally.require(D, not opened, f"round {e.round} finalised with {len(opened)} challenge(s) open", e)
    if e.round == 1:
        _apply_prior_fates(r, e)
    n = len(r.clients)
    payments = [0] * n
    scored = [False] * n
    removed: list[int] = []
    fates = []
    for client, m in zip(r.clients, effective(r, e.round, posted.event.measurements), strict=True):
        i = client.index
        entry = r.entries.get((e.round, i))
        fates.append(entry.fate if entry is not None else "posted")
        if not client.active or m is None or not m.committed:
            continue
        prior = r.priors[i] if r.priors is not None and i < len(r.priors) else 0
        score = score_round(client.reputation, mechanism, m.quality, m.round_time, m.accepted, prior)
        client.reputation, scored[i], payments[i] = score.reputation, True, score.payment
        if score.removed:
            client.active, client.removed_round = False, e.round
            removed.append(i)
    scaled = scale_pro_rata(payments, r.budget_left)
    for client, payment in zip(r.clients, scaled, strict=True):
        client.earned += payment
    paid = sum(scaled)
    r.tally.expect(P, f"round {e.round} paid", paid, e.paid, e)
    _check_removals(r, e, scored, removed)
    forfeited = len(removed) * r.params.client_deposit
    r.tally.expect(P, f"round {e.round} forfeited deposits", forfeited, e.forfeited, e)
    r.deposits_held -= forfeited
    r.rewards_held += e.paid
    r.credit_sink(forfeited, DEPOSIT_FORFEIT)
    r.pending_spend = (e.round, e.paid)
    posted.final = True
    r.finalized_up_to = e.round
    r.rounds.append(
        RoundRecord(
            round=e.round,
            model_hash=posted.event.model_hash,
            accuracy=posted.event.accuracy,
            measurements=tuple(posted.event.measurements),
            paid=e.paid,
            scored=tuple(scored),
            loss_reputation=tuple(c.reputation.loss_reputation for c in r.clients),
            time_reputation=tuple(c.reputation.time_reputation for c in r.clients),
            payments=tuple(scaled),
            removed=tuple(removed),
            fates=tuple(fates),
            forfeited=e.forfeited,
            demanded=sum(payments),
        )
    )


def _check_removals(r: ReplayState, e: b.RoundFinalized, scored: list[bool], removed: list[int]) -> None:
    """Each scored client's removal decision (Algorithm 1) against the round's ClientRemoved events."""
    actual = {x.client_index: x for x in r.pending_removals if x.round == e.round}
    stray = [x for x in r.pending_removals if x.round != e.round]
    r.pending_removals.clear()
    for x in stray:
        r.tally.fail(R, f"client {x.client_index} removed in round {x.round} while round {e.round} was finalised", x)
    for i in (i for i, was_scored in enumerate(scored) if was_scored):
        rep = r.clients[i].reputation
        event = actual.pop(i, None)
        r.tally.expect(
            R,
            f"removal of client {i} in round {e.round} (r_a={rep.loss_reputation}, r_t={rep.time_reputation})",
            i in removed,
            event is not None,
            event or e,
        )
        if event is not None and i in removed:
            r.tally.expect(R, f"r_a of removed client {i}", rep.loss_reputation, event.loss_reputation, event)
            r.tally.expect(R, f"r_t of removed client {i}", rep.time_reputation, event.time_reputation, event)
    for i, event in actual.items():
        r.tally.fail(R, f"client {i} was removed in round {e.round} without being scored in it", event)


def on_client_settled(r: ReplayState, e: b.ClientSettled) -> None:
    r.require_status(e, "Finished", "Cancelled", "Abandoned")
    pending = [n for n, p in r.posted.items() if not p.final and n != 0]
    r.tally.require(H, not pending, f"client {e.client_index} settled while round(s) {pending} were pending", e)
    client = r.client(e.client_index, e)
    if client is None:
        return
    if r.expected_bonuses is None:
        r.expected_bonuses = _bonuses(r)
    r.tally.expect(P, f"earned by client {client.index}", client.earned, e.earned, e)
    r.tally.expect(P, f"final bonus of client {client.index}", r.expected_bonuses[client.index], e.bonus, e)
    deposit = client.deposit if client.active else 0
    r.tally.expect(P, f"deposit returned to client {client.index}", deposit, e.deposit_returned, e)
    r.credit(client.account, e.earned + e.bonus, CLIENT_REWARD)
    r.credit(client.account, e.deposit_returned, DEPOSIT_RETURN)
    client.bonus, client.deposit_returned = e.bonus, e.deposit_returned
    r.deposits_held -= e.deposit_returned
    r.rewards_held -= e.earned


def _bonuses(r: ReplayState) -> list[int]:
    """Eq. 16 for every client at settlement, scaled pro rata to the budget left. A cancelled task pays none; an
    abandoned one counts its finish as that of neutral rounds posted at their deadlines."""
    if r.status not in ("Finished", "Abandoned") or r.started_at is None or r.finished_at is None:
        return [0] * len(r.clients)
    duration = r.finished_at - r.started_at
    p = r.params
    bonuses = [
        final_bonus(p.phi, p.expected_duration, duration, c.reputation.total_reputation(p.reputation_cap))
        if c.active and c.reputation.rounds > 0
        else 0
        for c in r.clients
    ]
    r.bonuses_demanded = sum(bonuses)
    return scale_pro_rata(bonuses, r.budget_left)


HANDLERS: dict[type, Callable[[ReplayState, Any], None]] = {
    b.ClientJoined: on_client_joined,
    b.ClientRemoved: on_client_removed,
    b.PriorsPosted: on_priors_posted,
    b.OwnUpdateCommitted: on_own_update_committed,
    b.RoundPosted: on_round_posted,
    b.RoundFinalized: on_round_finalized,
    b.ClientSettled: on_client_settled,
}
