"""The task's history, as the replay leaves it: frozen records (:mod:`fedchain.audit.history`) from its state."""

from __future__ import annotations

from fedchain.audit.history import (
    NO_WINNER,
    AuctionRecord,
    BidRecord,
    ChallengeRecord,
    ClientRecord,
    CreditRecord,
    PostedRecord,
    TaskHistory,
    TaskRecord,
)
from fedchain.audit.replay.rounds import effective
from fedchain.audit.replay.state import ReplayState


def history_of(r: ReplayState, withdrawn: dict[str, int]) -> TaskHistory:
    created = r.created
    task = TaskRecord(
        task_id=r.task_id,
        publisher=created.publisher if created else "",
        aggregator=created.aggregator if created else "",
        budget=created.budget if created else 0,
        params=created.params if created else None,
        status=r.status,
        started_at=r.started_at,
        finished_at=r.finished_at,
        abandoned_at=r.abandoned_at,
        last_round=r.rounds[-1].round if r.rounds else 0,
        target_reached=r.target_reached,
        bonuses=r.settled_bonuses,
        refund=r.settled_refund,
        bonder=r.bonder,
        bond=r.bond,
        bond_returned=r.bond_returned,
        posted_rounds=max((n for n in r.posted if n != 0), default=0),
        final_rounds=r.finalized_up_to,
        sink=r.sink,
        bonuses_demanded=r.bonuses_demanded,
        bond_forfeited=r.bond_forfeited,
        bond_topped_up=r.topped_up,
        early_finish_voided=r.early_finish_voided,
    )
    clients = tuple(
        ClientRecord(
            index=c.index,
            account=c.account,
            status="active" if c.active else "removed",
            deposit=c.deposit,
            data_size=c.data_size,
            rounds=c.reputation.rounds,
            sum_quality=c.reputation.sum_quality,
            sum_time_ratio=c.reputation.sum_time_ratio,
            loss_reputation=c.reputation.loss_reputation,
            time_reputation=c.reputation.time_reputation,
            earned=c.earned,
            bonus=c.bonus,
            deposit_returned=c.deposit_returned,
            removed_round=c.removed_round,
            data_hash=c.data_hash,
            commitment=c.commitment,
            total_reputation=c.reputation.total_reputation(r.params.reputation_cap) if created else 0,
        )
        for c in r.clients
    )
    auctions = tuple(
        AuctionRecord(
            client_index=index,
            data_size=job.data_size,
            bids=tuple(
                BidRecord(i, bid.bidder, bid.revealed, bid.frequency, bid.price, bid.outcome)
                for i, bid in enumerate(job.bids)
            ),
            winner=None if job.winner == NO_WINNER else job.winner,
            price=job.price,
            escrow=job.escrow,
            closed=job.closed,
            ranked=job.ranked,
        )
        for index, job in sorted(r.jobs.items())
    )
    credits = tuple(CreditRecord(event.to, event.amount, reason) for event, reason in r.actual_credits)
    accounts = {c.account for c in r.clients} | {bid.bidder for job in r.jobs.values() for bid in job.bids}
    if created:
        accounts |= {created.publisher}
    challenges = tuple(
        ChallengeRecord(
            challenge_id=c.event.challenge_id,
            round=c.event.round,
            client_index=c.event.client_index,
            kind=c.event.kind.name.lower(),
            challenger=c.event.challenger,
            accused=c.event.accused,
            proposed=c.event.proposed,
            bond=c.event.bond,
            verdict_deadline=c.event.verdict_deadline,
            status=c.status,
            fate=c.fate,
            value=c.event.value,
        )
        for _, c in sorted(r.challenges.items())
    )
    accounts |= {c.challenger for c in challenges} | ({r.bonder} if r.bonder else set())
    return TaskHistory(
        task=task,
        clients=clients,
        auctions=auctions,
        commits=tuple(r.commits),
        slashes=tuple(r.slashes),
        rounds=tuple(r.rounds),
        credits=credits,
        withdrawn=tuple(sorted((a, w) for a, w in withdrawn.items() if a in accounts)),
        challenges=challenges,
        posted=tuple(
            PostedRecord(
                n,
                p.event.model_hash,
                p.event.accuracy,
                tuple(p.event.measurements),
                p.posted_at,
                p.final,
                effective(r, n, p.event.measurements),
                p.in_task_at_start,
            )
            for n, p in sorted(r.posted.items())
            if p.event is not None
        ),
        priors=r.priors,
    )
