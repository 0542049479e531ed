"""The replay of FogAuction's and DataHandoff's events: sealed bids ranked at their reveals (eq. 18), awards, fog
commits, slashes, re-awards and job settlement."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from fedchain.audit.history import NO_WINNER, CommitRecord, SlashRecord
from fedchain.audit.replay.state import (
    BID_FORFEIT,
    BID_REFUND,
    ESCROW_REFUND,
    FOG_COMPENSATION,
    FOG_SLASH,
    A,
    BidState,
    D,
    H,
    JobState,
    P,
    ReplayState,
)
from fedchain.chain import bindings as b
from fedchain.fl.reputation import RevealedBid, auction_utility, rank_reveal


def on_auction_opened(r: ReplayState, e: b.AuctionOpened) -> None:
    r.require_status(e, "Open")
    r.tally.require(H, not r.params.self_trained, "an auction opened in a self-trained task", e)
    client = r.client(e.client_index, e)
    if client is None:
        return
    r.tally.require(H, e.client_index not in r.jobs, f"a second auction for client {e.client_index}", e)
    r.tally.expect(
        H,
        f"reveal phase of job {e.client_index}",
        r.params.reveal_duration,
        e.reveal_deadline - e.bidding_deadline,
        e,
    )
    client.data_size = e.data_size
    r.jobs[e.client_index] = JobState(
        e.client_index, e.data_size, bidding_deadline=e.bidding_deadline, reveal_deadline=e.reveal_deadline
    )


def on_bid_committed(r: ReplayState, e: b.BidCommitted) -> None:
    job = r.job(e.client_index, e, "bidding")
    if job is None:
        return
    r.tally.expect(H, f"bid index for job {e.client_index}", len(job.bids), e.bid_index, e)
    job.bids.append(BidState(e.bidder))
    r.auction_held += r.params.fog_deposit
    r.bid_deposits[(e.transaction_hash, e.bidder)] += r.params.fog_deposit


def on_bid_revealed(r: ReplayState, e: b.BidRevealed) -> None:
    job = r.job(e.client_index, e, "bidding")
    client = r.client(e.client_index, e)
    if job is None or client is None or r.mechanism is None:
        return
    ok = 0 <= e.bid_index < len(job.bids) and job.bids[e.bid_index].bidder == e.bidder
    if not r.tally.require(H, ok, f"bid {e.bid_index} of job {e.client_index} is not {e.bidder}'s", e):
        return
    bid = job.bids[e.bid_index]
    twice = f"bid {e.bid_index} of job {e.client_index} revealed twice or at 0 Hz"
    r.tally.require(H, not bid.revealed and e.frequency > 0, twice, e)
    bid.revealed, bid.frequency, bid.price = True, e.frequency, e.price
    # Ranked at once by its utility to the client (the reputation is the join's while the task is Open).
    utility = auction_utility(
        r.mechanism, client.reputation.loss_reputation, job.data_size, RevealedBid(e.frequency, e.price)
    )
    bid.utility = utility
    deposit = r.params.fog_deposit
    if utility < 0:
        bid.settled, bid.outcome = True, "rejected"
        r.expect_in_tx(e.transaction_hash, f"rejected {e.client_index}:{e.bid_index}", utility)
        r.credit(client.account, deposit, BID_FORFEIT)
        r.auction_held -= deposit
        return
    bid.outcome = "ranked"
    utilities = [b_.utility if b_.utility is not None else 0 for b_ in job.bids]
    job.ranked, dropped = rank_reveal(job.ranked, utilities, e.bid_index)
    if dropped is not None:
        out = job.bids[dropped]
        out.settled, out.outcome = True, "outranked"
        r.expect_in_tx(e.transaction_hash, f"outranked {e.client_index}:{dropped}", out.bidder)
        r.credit(out.bidder, deposit, BID_REFUND)
        r.auction_held -= deposit


def on_bid_rejected(r: ReplayState, e: b.BidRejected) -> None:
    expected = r.take_expected(e.transaction_hash, f"rejected {e.client_index}:{e.bid_index}")
    r.tally.expect(A, f"utility of the rejected bid {e.bid_index} of job {e.client_index}", expected, e.utility, e)


def on_bid_outranked(r: ReplayState, e: b.BidOutranked) -> None:
    expected = r.take_expected(e.transaction_hash, f"outranked {e.client_index}:{e.bid_index}")
    r.tally.expect(A, f"bidder outranked as bid {e.bid_index} of job {e.client_index}", expected, e.bidder, e)


def on_auction_closed(r: ReplayState, e: b.AuctionClosed) -> None:
    job = r.job(e.client_index, e, "bidding")
    client = r.client(e.client_index, e)
    if job is None or client is None:
        return
    winner = job.ranked[0] if job.ranked else NO_WINNER
    price = 0
    if job.ranked:
        best = job.bids[job.ranked[0]]
        price = best.price
        if r.params.second_price and len(job.ranked) > 1:
            runner_up = job.bids[job.ranked[1]]
            price += (best.utility or 0) - (runner_up.utility or 0)
    r.tally.expect(A, f"winner of job {e.client_index}", winner, e.winner, e)
    r.tally.expect(A, f"price of job {e.client_index}", price, e.price, e)
    r.tally.expect(A, f"escrow of job {e.client_index}", e.price * r.params.rounds, e.escrow, e)
    forfeited = _unrevealed(job) * r.params.fog_deposit
    r.credit(client.account, forfeited, BID_FORFEIT)
    if e.escrow:
        r.expected_deposits[(client.account, e.escrow)] += 1
    r.auction_held += e.escrow - forfeited
    job.status = "vacant" if e.winner == NO_WINNER else "awarded"
    job.closed = True
    job.winner, job.price, job.winner_price, job.escrow = e.winner, e.price, e.price, e.escrow


def _unrevealed(job: JobState) -> int:
    return sum(1 for bid in job.bids if not bid.revealed)


def on_update_committed(r: ReplayState, e: b.UpdateCommitted) -> None:
    job = r.job(e.client_index, e, "awarded")
    client = r.client(e.client_index, e)
    if job is None or client is None:
        return
    winner = job.bids[job.winner].bidder if job.winner < len(job.bids) else None
    r.tally.expect(H, f"committer of job {e.client_index}", winner, e.fog, e)
    r.require_status(e, "Running")
    r.tally.require(
        H,
        e.round == r.current_round and job.paid_up_to < e.round,
        f"job {e.client_index} committed round {e.round} during round {r.current_round}",
        e,
    )
    r.tally.require(H, client.active, f"job {e.client_index} committed for a removed client", e)
    deadline = r.round_started_at + r.params.round_duration
    late = f"job {e.client_index} committed at {e.committed_at}, after the deadline {deadline}"
    r.tally.require(H, e.committed_at <= deadline, late, e)
    r.tally.expect(P, f"fog payment of job {e.client_index} round {e.round}", job.winner_price, e.payment, e)
    job.commits[e.round] = e
    job.paid_up_to = e.round
    job.released += e.payment
    r.auction_held -= e.payment
    r.fog_payments[(e.transaction_hash, e.fog)] += e.payment
    r.commits.append(
        CommitRecord(
            e.client_index, e.round, e.fog, e.update_hash, e.committed_at, e.payment, transcript_root=e.transcript_root
        )
    )


def on_fog_slashed(r: ReplayState, e: b.FogSlashed) -> None:
    job = r.job(e.client_index, e, "awarded")
    client = r.client(e.client_index, e)
    if job is None or client is None:
        return
    winner = job.bids[job.winner] if job.winner < len(job.bids) else None
    r.tally.expect(H, f"slashed fog of job {e.client_index}", winner.bidder if winner else None, e.fog, e)
    r.tally.expect(H, f"missed round of job {e.client_index}", job.paid_up_to + 1, e.round, e)
    r.tally.expect(P, f"forfeited deposit of job {e.client_index}", r.params.fog_deposit, e.forfeited, e)
    if winner is not None:
        winner.settled = True
    r.auction_held -= e.forfeited
    r.credit(client.account, e.forfeited, BID_FORFEIT)
    r.last_slash = e


def on_fog_fraud_slashed(r: ReplayState, e: b.FogFraudSlashed) -> None:
    expected = r.take_expected(e.transaction_hash, "fraud")
    r.tally.require(
        D,
        expected == (e.client_index, e.fog, True),
        f"fog {e.fog} slashed for fraud on job {e.client_index} without an upheld fog challenge for it",
        e,
    )
    job = r.job(e.client_index, e, "awarded")
    client = r.client(e.client_index, e)
    if job is None or client is None:
        return
    winner = job.bids[job.winner] if job.winner < len(job.bids) else None
    r.tally.expect(H, f"slashed fog of job {e.client_index}", winner.bidder if winner else None, e.fog, e)
    deposit = r.params.fog_deposit
    paid_rounds = job.paid_up_to + 1 - e.round if job.paid_up_to >= e.round else 1
    compensation = min(paid_rounds * job.winner_price, deposit)
    r.tally.expect(P, f"compensation of client {e.client_index} for fog fraud", compensation, e.compensation, e)
    r.tally.expect(P, f"fog deposit of job {e.client_index} burned for fraud", deposit - compensation, e.burned, e)
    if winner is not None:
        winner.settled = True
    r.auction_held -= e.compensation + e.burned
    r.credit(client.account, e.compensation, FOG_COMPENSATION)
    r.credit_sink(e.burned, FOG_SLASH)
    r.fraud_committed_current = job.paid_up_to >= r.current_round and r.status == "Running"
    r.last_slash = e


def on_job_reassigned(r: ReplayState, e: b.JobReassigned) -> None:
    job = r.job(e.client_index, e, "awarded")
    client = r.client(e.client_index, e)
    slash, r.last_slash = r.last_slash, None
    ok = slash is not None and slash.client_index == e.client_index and slash.transaction_hash == e.transaction_hash
    if not r.tally.require(H, ok, f"job {e.client_index} reassigned without a slash", e):
        return
    if job is None or client is None:
        return
    assert slash is not None
    # The best ranked bid still holding its deposit whose price fits the escrowed price.
    best = next((i for i in job.ranked if not job.bids[i].settled and job.bids[i].price <= job.price), NO_WINNER)
    r.tally.expect(A, f"standby winner of job {e.client_index}", best, e.winner, e)
    price = job.bids[e.winner].price if e.winner < len(job.bids) else 0
    r.tally.expect(A, f"standby price of job {e.client_index}", price, e.price, e)
    # The slashed winner's commit of the unposted round no longer counts (the contract resets committedAt).
    job.commits = {n: c for n, c in job.commits.items() if n in r.posted}
    r.commits = [
        dataclasses.replace(c, withdrawn=True)
        if c.client_index == e.client_index and c.round not in r.posted and c.fog == slash.fog
        else c
        for c in r.commits
    ]
    if e.winner == NO_WINNER:
        r.tally.expect(H, f"first round of vacant job {e.client_index}", 0, e.from_round, e)
        job.status, job.winner_price = "vacant", 0
    else:
        r.tally.require(
            H,
            e.from_round in (r.current_round, r.current_round + 1),
            f"job {e.client_index} reassigned from round {e.from_round} during round {r.current_round}",
            e,
        )
        job.paid_up_to = e.from_round - 1
        job.winner_price = e.price
    job.winner = e.winner
    if isinstance(slash, b.FogFraudSlashed):
        forfeited, kind = slash.compensation + slash.burned, "fraud"
        if e.winner != NO_WINNER and r.fraud_committed_current:  # a commit is never replaced: no redo
            r.tally.expect(
                H,
                f"first round of job {e.client_index} after its winner's fraud, the current round committed",
                r.current_round + 1,
                e.from_round,
                e,
            )
    else:
        forfeited, kind = slash.forfeited, "missed"
    r.slashes.append(
        SlashRecord(
            e.client_index,
            slash.fog,
            slash.round,
            forfeited,
            None if e.winner == NO_WINNER else e.winner,
            e.price,
            e.from_round,
            kind,
        )
    )


def on_job_settled(r: ReplayState, e: b.JobSettled) -> None:
    r.require_status(e, "Finished", "Settled", "Cancelled", "Abandoned")
    job = r.job(e.client_index, e, "bidding", "awarded", "vacant")
    client = r.client(e.client_index, e)
    if job is None or client is None:
        return
    r.tally.expect(P, f"escrow refund of job {e.client_index}", job.escrow - job.released, e.escrow_refund, e)
    # A cancelled or abandoned task slashes nobody at settlement.
    missed = (
        job.status == "awarded"
        and r.status not in ("Cancelled", "Abandoned")
        and job.paid_up_to < r.current_round
        and client.active
    )
    deposit = r.params.fog_deposit
    # A job whose auction was never closed forfeits its unrevealed bids' deposits now, as a close would.
    forfeited = 0 if job.closed else _unrevealed(job) * deposit
    refunded: list[str] = []
    for index in job.ranked:
        bid = job.bids[index]
        if bid.settled:
            continue
        bid.settled = True
        if missed and index == job.winner:
            forfeited += deposit
        else:
            refunded.append(bid.bidder)
    refund = len(refunded) * deposit
    r.tally.expect(P, f"fog deposits refunded by job {e.client_index}", refund, e.deposits_refunded, e)
    r.tally.expect(P, f"fog deposits forfeited by job {e.client_index}", forfeited, e.deposits_forfeited, e)
    r.credit(client.account, e.escrow_refund, ESCROW_REFUND)
    r.credit(client.account, e.deposits_forfeited, BID_FORFEIT)
    for bidder in refunded:
        r.credit(bidder, deposit, BID_REFUND)
    r.auction_held -= e.escrow_refund + e.deposits_refunded + e.deposits_forfeited
    job.released = job.escrow
    job.status = "settled"


def on_data_committed(r: ReplayState, e: b.DataCommitted) -> None:
    client = r.client(e.client_index, e)
    if client is not None:
        r.tally.require(H, client.data_hash is None, f"client {e.client_index} committed its data twice", e)
        client.data_hash = e.data_hash


HANDLERS: dict[type, Callable[[ReplayState, Any], None]] = {
    b.AuctionOpened: on_auction_opened,
    b.BidCommitted: on_bid_committed,
    b.BidRevealed: on_bid_revealed,
    b.BidRejected: on_bid_rejected,
    b.BidOutranked: on_bid_outranked,
    b.AuctionClosed: on_auction_closed,
    b.UpdateCommitted: on_update_committed,
    b.FogSlashed: on_fog_slashed,
    b.FogFraudSlashed: on_fog_fraud_slashed,
    b.JobReassigned: on_job_reassigned,
    b.JobSettled: on_job_settled,
    b.DataCommitted: on_data_committed,
}
