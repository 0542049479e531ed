"""FogAuction's batch entry points: each batch is the same single calls in one transaction, all or nothing.

Every comparison runs the same prepared state twice, between ``evm_snapshot``
and ``evm_revert``: once with one single call per job, once with the batch.
The clock is frozen (every block has the same time), so commit times match.
The FogAuction's state and events must be the same; the Treasury's balances
must be the same, though a batch may move one fog node's money for all its
jobs in one Treasury event (``commitBids``: one deposit; ``commitUpdates``:
one payment). The auditor, replaying the events, must still account for every wei.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from eth_utils import keccak
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedchain.audit import audit_task
from fedchain.chain import bindings
from fedchain.chain.abi import ChainEvent
from fedchain.chain.bindings import REGISTRY
from fedchain.chain.events import LogQuery, fetch_events
from fedchain.chain.tx import Receipt
from fedchain.fl.reputation import WAD
from tests.contracts.conftest import CLIENTS, FOGS, PUBLISHER, STRANGER, FedChain, TaskParams, bid_commitment

PARAMS = TaskParams(rounds=1)
JOBS = (0, 1, 2)
FOG, RIVAL = FOGS[0], FOGS[1]
FREQUENCY, PRICE = 10**6, 10**14


@dataclass(frozen=True)
class Outcome:
    """What a way of doing the same thing left behind: the state, and the events of each contract."""

    state: tuple[Any, ...]
    auction_events: list[tuple[str, dict[str, Any]]]
    treasury_events: list[tuple[str, dict[str, Any]]]

    def treasury_sums(self) -> Counter[tuple[Any, ...]]:
        """Wei moved by the Treasury's events, summed by (event, account, reason)."""
        sums: Counter[tuple[Any, ...]] = Counter()
        for name, fields in self.treasury_events:
            account = fields.get("from_", fields.get("to"))
            sums[(name, account, fields.get("reason"))] += fields["amount"]
        return sums


def fresh(chain: FedChain) -> FedChain:
    """The same deployment through new transactors (their nonces do not survive an ``evm_revert``)."""
    return FedChain(chain.node, chain.w3, chain.addresses, chain.artifacts)


@contextlib.contextmanager
def frozen_clock(chain: FedChain) -> Iterator[None]:
    """Every block mined inside gets the time of the latest one."""
    chain.w3.provider.make_request("anvil_setBlockTimestampInterval", [0])
    try:
        yield
    finally:
        chain.w3.provider.make_request("anvil_removeBlockTimestampInterval", [])


def outcome(chain: FedChain, task: int, receipts: Sequence[Receipt]) -> Outcome:
    accounts = [chain.account(i) for i in (PUBLISHER, *CLIENTS[: len(JOBS)], FOG, RIVAL)]
    state = (
        [chain.view("FogAuction", "job", task, i) for i in JOBS],
        [chain.view("FogAuction", "bids", task, i) for i in JOBS],
        chain.view("FogAuction", "heldFor", task),
        chain.view("Treasury", "held", task),
        [chain.view("Treasury", "claimable", a) for a in accounts],
        chain.solvency(),
    )
    events = [e for r in receipts for e in r.events]

    def of(contract: str) -> list[tuple[str, dict[str, Any]]]:
        address = chain.addresses[contract].lower()
        return [
            (type(e).__name__, {f: getattr(e, f) for f in e.fields}) for e in events if e.address.lower() == address
        ]

    return Outcome(state, of("FogAuction"), of("Treasury"))


def both_ways(
    chain: FedChain, task: int, singles: Callable[[FedChain], list[Receipt]], batch: Callable[[FedChain], Receipt]
) -> tuple[Outcome, Outcome]:
    """The outcome of ``singles`` and of ``batch`` from the same state, with the clock frozen."""
    snapshot = chain.w3.provider.make_request("evm_snapshot", [])["result"]
    with frozen_clock(chain):
        one_by_one = fresh(chain)
        by_singles = outcome(one_by_one, task, singles(one_by_one))
        chain.w3.provider.make_request("evm_revert", [snapshot])
        at_once = fresh(chain)
        by_batch = outcome(at_once, task, [batch(at_once)])
    return by_singles, by_batch


def auctions(chain: FedChain, params: TaskParams = PARAMS) -> int:
    """A task whose clients have opened the auctions of ``JOBS``."""
    task = chain.create_task(params)
    for client in CLIENTS[: len(JOBS)]:
        chain.join(task, client, params=params)
        chain.open_auction(task, client)
    return task


def salt(fog: int, index: int) -> bytes:
    return keccak(text=f"bid-{fog}-{index}")


def sealed(chain: FedChain, fog: int, index: int) -> bytes:
    return bid_commitment(FREQUENCY, PRICE, salt(fog, index), chain.account(fog))


def commit_bids(chain: FedChain, task: int, fog: int, indices: Sequence[int]) -> Receipt:
    commitments = [sealed(chain, fog, i) for i in indices]
    value = PARAMS.fog_deposit * len(indices)
    return chain.send("FogAuction", "commitBids", task, list(indices), commitments, by=fog, value=value)


def reveal_bids(chain: FedChain, task: int, fog: int, indices: Sequence[int]) -> Receipt:
    n = len(indices)
    salts = [salt(fog, i) for i in indices]
    return chain.send("FogAuction", "revealBids", task, list(indices), [FREQUENCY] * n, [PRICE] * n, salts, by=fog)


def awarded(chain: FedChain) -> int:
    """``JOBS`` all won by FOG at PRICE, RIVAL on standby for job 0; the task not yet started."""
    task = auctions(chain)
    commit_bids(chain, task, FOG, JOBS)
    commit_bids(chain, task, RIVAL, [0])
    chain.advance(PARAMS.bidding_duration + 1)
    reveal_bids(chain, task, FOG, JOBS)
    reveal_bids(chain, task, RIVAL, [0])
    chain.advance(PARAMS.reveal_duration + 1)
    for i in JOBS:
        chain.close_auction(task, i, CLIENTS[i])
    return task


def update_hash(index: int) -> bytes:
    return keccak(text=f"update-{index}")


def transcript_root(index: int) -> bytes:
    return keccak(text=f"transcript-{index}")


def roots(indices: Iterable[int]) -> list[bytes]:
    return [transcript_root(i) for i in indices]


def finished(chain: FedChain) -> int:
    """The one-round task of :func:`awarded`, finished: FOG committed jobs 0 and 1 and missed job 2."""
    task = awarded(chain)
    chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)
    receipt = chain.send(
        "FogAuction", "commitUpdates", task, 1, [0, 1], [update_hash(0), update_hash(1)], roots([0, 1]), by=FOG
    )
    started = chain.view("TaskRegistry", "state", task).round_started_at
    seconds = receipt.events_of(bindings.UpdateCommitted)[0].committed_at - started
    chain.advance(PARAMS.round_duration + 1)
    chain.post_round(task, 1, [(WAD, seconds, True), (WAD, seconds, True), (0, 0, False)])
    return task


# --------------------------------------------------------------------------- a batch is the same single calls


def test_commit_bids_is_one_commit_bid_per_job_with_one_deposit(chain: FedChain) -> None:
    # Prepare: RIVAL bid on job 1 first, so FOG's bid there is the second.
    task = auctions(chain)
    commit_bids(chain, task, RIVAL, [1])
    commitments = [sealed(chain, FOG, i) for i in JOBS]
    auction = chain.contract("FogAuction", by=FOG)
    # Execute
    returned = auction.call("commitBids", task, list(JOBS), commitments, value=PARAMS.fog_deposit * len(JOBS))
    singles, batch = both_ways(
        chain,
        task,
        lambda c: [
            c.send("FogAuction", "commitBid", task, i, commitments[i], by=FOG, value=PARAMS.fog_deposit) for i in JOBS
        ],
        lambda c: commit_bids(c, task, FOG, JOBS),
    )
    # Assert
    assert list(returned) == [0, 1, 0]
    assert batch.state == singles.state
    assert batch.auction_events == singles.auction_events
    assert [fields["bid_index"] for _, fields in batch.auction_events] == [0, 1, 0]
    assert batch.treasury_sums() == singles.treasury_sums()
    assert [(name, fields["amount"]) for name, fields in batch.treasury_events] == [
        ("Deposited", PARAMS.fog_deposit * len(JOBS))
    ]


def test_reveal_bids_is_one_reveal_bid_per_job(chain: FedChain) -> None:
    task = auctions(chain)
    commit_bids(chain, task, FOG, JOBS)
    chain.advance(PARAMS.bidding_duration + 1)

    singles, batch = both_ways(
        chain,
        task,
        lambda c: [c.send("FogAuction", "revealBid", task, i, FREQUENCY, PRICE, salt(FOG, i), by=FOG) for i in JOBS],
        lambda c: reveal_bids(c, task, FOG, JOBS),
    )

    assert batch == singles
    assert [name for name, _ in batch.auction_events] == ["BidRevealed"] * len(JOBS)


def test_commit_updates_is_one_commit_update_per_job_with_one_payment(chain: FedChain) -> None:
    task = awarded(chain)
    chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)

    singles, batch = both_ways(
        chain,
        task,
        lambda c: [
            c.send("FogAuction", "commitUpdate", task, i, 1, update_hash(i), transcript_root(i), by=FOG) for i in JOBS
        ],
        lambda c: c.send(
            "FogAuction", "commitUpdates", task, 1, list(JOBS), [update_hash(i) for i in JOBS], roots(JOBS), by=FOG
        ),
    )

    assert batch.state == singles.state
    assert batch.auction_events == singles.auction_events
    assert batch.treasury_sums() == singles.treasury_sums()
    assert [(name, fields["amount"]) for name, fields in batch.treasury_events] == [("Credited", PRICE * len(JOBS))]


def test_settle_jobs_is_one_settle_job_per_job(chain: FedChain) -> None:
    # Prepare: job 0 has a standby bid to refund, job 2's winner missed the last round and forfeits.
    task = finished(chain)

    singles, batch = both_ways(
        chain,
        task,
        lambda c: [c.send("FogAuction", "settleJob", task, i, by=STRANGER) for i in JOBS],
        lambda c: c.send("FogAuction", "settleJobs", task, list(JOBS), by=STRANGER),
    )

    assert batch == singles
    settled = [fields for name, fields in batch.auction_events if name == "JobSettled"]
    assert [s["deposits_forfeited"] for s in settled] == [0, 0, PARAMS.fog_deposit]
    assert batch.state[2] == 0  # heldFor: nothing left in the auction


# --------------------------------------------------------------------------- settleJobs skips lost races


def test_settle_jobs_skips_settled_and_unknown_jobs_and_returns_the_count(chain: FedChain) -> None:
    # Prepare: someone settled job 1 first; job 7 was never auctioned.
    task = finished(chain)
    chain.send("FogAuction", "settleJob", task, 1, by=STRANGER)
    indices = [0, 1, 2, 1, 7]
    auction = chain.contract("FogAuction", by=STRANGER)
    # Execute
    count = auction.call("settleJobs", task, indices)
    receipt = chain.send("FogAuction", "settleJobs", task, indices, by=STRANGER)
    # Assert: jobs 0 and 2 settled once each; a second call settles nothing and does not revert.
    assert count == 2
    assert [e.client_index for e in receipt.events_of(bindings.JobSettled)] == [0, 2]
    assert all(chain.view("FogAuction", "job", task, i).status == bindings.JobStatus.SETTLED for i in JOBS)
    assert auction.call("settleJobs", task, indices) == 0
    assert chain.send("FogAuction", "settleJobs", task, indices, by=STRANGER).events == ()


# --------------------------------------------------------------------------- refusals


def test_every_batch_refuses_an_empty_batch(chain: FedChain) -> None:
    task = finished(chain)
    calls: list[tuple[str, tuple[Any, ...]]] = [
        ("commitBids", (task, [], [])),
        ("revealBids", (task, [], [], [], [])),
        ("commitUpdates", (task, 1, [], [], [])),
        ("settleJobs", (task, [])),
    ]
    for function, args in calls:
        with chain.reverts(bindings.AuctionEmptyBatch):
            chain.send("FogAuction", function, *args, by=FOG)


def test_batches_refuse_arrays_of_different_lengths(chain: FedChain) -> None:
    task = auctions(chain)
    one = [keccak(text="x")]
    with chain.reverts(bindings.AuctionBatchLengthMismatch, 2, 1):
        chain.send("FogAuction", "commitBids", task, [0, 1], one, by=FOG, value=2 * PARAMS.fog_deposit)
    with chain.reverts(bindings.AuctionBatchLengthMismatch, 0, 1):
        chain.send("FogAuction", "commitBids", task, [], one, by=FOG)
    with chain.reverts(bindings.AuctionBatchLengthMismatch, 2, 1):
        chain.send("FogAuction", "revealBids", task, [0, 1], [FREQUENCY], [PRICE] * 2, one * 2, by=FOG)
    with chain.reverts(bindings.AuctionBatchLengthMismatch, 2, 3):
        chain.send("FogAuction", "revealBids", task, [0, 1], [FREQUENCY] * 2, [PRICE] * 3, one * 2, by=FOG)
    with chain.reverts(bindings.AuctionBatchLengthMismatch, 2, 1):
        chain.send("FogAuction", "revealBids", task, [0, 1], [FREQUENCY] * 2, [PRICE] * 2, one, by=FOG)
    with chain.reverts(bindings.AuctionBatchLengthMismatch, 1, 2):
        chain.send("FogAuction", "commitUpdates", task, 1, [0], one * 2, one, by=FOG)
    with chain.reverts(bindings.AuctionBatchLengthMismatch, 1, 2):
        chain.send("FogAuction", "commitUpdates", task, 1, [0], one, one * 2, by=FOG)


def test_commit_bids_needs_one_deposit_per_bid(chain: FedChain) -> None:
    task = auctions(chain)
    commitments = [sealed(chain, FOG, i) for i in JOBS]
    with chain.reverts(bindings.AuctionWrongValue, PARAMS.fog_deposit, PARAMS.fog_deposit * len(JOBS)):
        chain.send("FogAuction", "commitBids", task, list(JOBS), commitments, by=FOG, value=PARAMS.fog_deposit)


def test_one_bad_entry_reverts_the_whole_bid_batch(chain: FedChain) -> None:
    # Prepare: FOG already bid on job 2.
    task = auctions(chain)
    commit_bids(chain, task, FOG, [2])
    held = chain.view("FogAuction", "heldFor", task)
    # Execute, assert: job 2 is refused, and job 0's bid before it is undone; a job named twice is refused too.
    with chain.reverts(bindings.AuctionAlreadyBid, task, 2, chain.account(FOG)):
        commit_bids(chain, task, FOG, [0, 2])
    with chain.reverts(bindings.AuctionAlreadyBid, task, 1, chain.account(FOG)):
        commit_bids(chain, task, FOG, [1, 1])
    assert [len(chain.view("FogAuction", "bids", task, i)) for i in JOBS] == [0, 0, 1]
    assert chain.view("FogAuction", "heldFor", task) == held
    # A reveal batch with one bad entry reveals nothing.
    commit_bids(chain, task, FOG, [0, 1])
    chain.advance(PARAMS.bidding_duration + 1)
    salts = [salt(FOG, 0), salt(FOG, 1)]
    with chain.reverts(bindings.AuctionBadReveal, task, 1, chain.account(FOG)):
        chain.send("FogAuction", "revealBids", task, [0, 1], [FREQUENCY] * 2, [PRICE, PRICE + 1], salts, by=FOG)
    assert not any(b.revealed for i in JOBS for b in chain.view("FogAuction", "bids", task, i))


def test_one_bad_entry_reverts_the_whole_commit_batch(chain: FedChain) -> None:
    # Prepare: FOG wins every job, RIVAL stands by for job 0.
    task = awarded(chain)
    hashes = [update_hash(i) for i in JOBS]
    with chain.reverts(bindings.AuctionWrongTaskStatus, task, bindings.TaskStatus.OPEN):
        chain.send("FogAuction", "commitUpdates", task, 1, list(JOBS), hashes, roots(JOBS), by=FOG)
    chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)
    # Execute, assert
    with chain.reverts(bindings.AuctionNotWinner, task, 0, chain.account(RIVAL)):
        chain.send("FogAuction", "commitUpdates", task, 1, [0], hashes[:1], roots([0]), by=RIVAL)
    with chain.reverts(bindings.AuctionWrongRound, task, 2, 1, 1):
        chain.send("FogAuction", "commitUpdates", task, 1, [2, 2], hashes[:2], roots([2, 2]), by=FOG)
    with chain.reverts(bindings.AuctionWrongRound, task, 0, 2, 1):
        chain.send("FogAuction", "commitUpdates", task, 2, [0], hashes[:1], roots([0]), by=FOG)
    assert chain.view("FogAuction", "commitTimes", task, 1, len(JOBS)) == [0, 0, 0]
    assert chain.view("Treasury", "claimable", chain.account(FOG)) == 0


def test_settle_jobs_waits_for_the_task_to_end(chain: FedChain) -> None:
    task = awarded(chain)
    with chain.reverts(bindings.AuctionWrongTaskStatus, task, bindings.TaskStatus.OPEN):
        chain.send("FogAuction", "settleJobs", task, list(JOBS), by=STRANGER)


# --------------------------------------------------------------------------- the auditor


def test_the_audit_of_a_task_driven_by_batches_passes(chain: FedChain) -> None:
    # Prepare: bids, reveals and commits in batches, then the jobs settled in one batch.
    task = finished(chain)
    chain.send("RoundLedger", "settle", task, by=STRANGER)
    chain.send("FogAuction", "settleJobs", task, list(JOBS), by=STRANGER)
    query = LogQuery(tuple(chain.addresses.values()), 0, int(chain.w3.eth.block_number), 5_000)
    events: list[ChainEvent] = list(fetch_events(chain.w3, REGISTRY, query))
    # Execute
    report = audit_task(task, events)
    # Assert
    assert {c.name.value: [f.message for f in c.findings] for c in report.checks if c.failed} == {}
    assert sum(c.amount for c in report.history.credits if c.reason == "FOG_PAYMENT") == 2 * PRICE


# --------------------------------------------------------------------------- the money invariant


def task_pool_balances(chain: FedChain, task: int) -> tuple[int, int]:
    """(Treasury.held(t), the modules' holdings): equal when no wei is lost or made."""
    return chain.view("Treasury", "held", task), sum(chain.pool_parts(task))


BIDDERS = (FOG, RIVAL, FOGS[2])


@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    bids=st.lists(st.lists(st.sampled_from(JOBS), min_size=1, max_size=3, unique=True), min_size=3, max_size=3),
    reveals=st.lists(st.booleans(), min_size=3, max_size=3),
    settle_first=st.lists(st.sampled_from(JOBS), min_size=1, max_size=4),
)
def test_batches_keep_every_wei_of_the_task_accounted_for(
    chain: FedChain, bids: list[list[int]], reveals: list[bool], settle_first: list[int]
) -> None:
    """Bid and reveal in random batches, cancel, settle in two batches: the pool always matches the modules' holdings."""
    snapshot = chain.w3.provider.make_request("evm_snapshot", [])["result"]
    c = fresh(chain)

    def balanced() -> None:
        held, parts = task_pool_balances(c, task)
        assert held == parts

    try:
        task = auctions(c)
        for fog, jobs in zip(BIDDERS, bids, strict=True):
            commit_bids(c, task, fog, jobs)
            balanced()
        c.advance(PARAMS.bidding_duration + 1)
        for fog, jobs, revealed in zip(BIDDERS, bids, reveals, strict=True):
            if revealed:
                reveal_bids(c, task, fog, jobs)
                balanced()
        c.advance(PARAMS.reveal_duration + 1)
        for i in JOBS:
            c.close_auction(task, i, CLIENTS[i])
            balanced()
        c.send("TaskRegistry", "cancelTask", task, by=PUBLISHER)
        balanced()
        c.send("FogAuction", "settleJobs", task, settle_first, by=STRANGER)
        balanced()
        c.send("FogAuction", "settleJobs", task, list(JOBS), by=STRANGER)
        balanced()
        assert c.view("FogAuction", "heldFor", task) == 0
    finally:
        chain.w3.provider.make_request("evm_revert", [snapshot])
