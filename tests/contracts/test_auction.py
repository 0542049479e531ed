"""FogAuction: sealed bids, reveal, the eq. 18 winner, escrow, commits, slashing and re-award, job settlement."""

from __future__ import annotations

import dataclasses

from eth_utils import keccak

from fedchain.chain import bindings
from fedchain.fl.reputation import WAD, MechanismParams, RevealedBid, auction_utility, choose_winner
from tests.contracts.conftest import CLIENTS, FOGS, PUBLISHER, STRANGER, FedChain, TaskParams, bid_commitment

PARAMS = TaskParams()
CLIENT = CLIENTS[0]


def opened(chain: FedChain, params: TaskParams = PARAMS) -> int:
    task = chain.create_task(params)
    chain.join(task, CLIENT, params=params)
    chain.open_auction(task, CLIENT)
    return task


def test_open_auction_reveals_the_committed_data_size(chain: FedChain) -> None:
    task = chain.create_task()
    chain.join(task, CLIENT, data_size=600)
    with chain.reverts(bindings.AuctionDataSizeMismatch, task, 0, 601):
        chain.send("FogAuction", "openAuction", task, 601, keccak(text=f"salt-{CLIENT}"), by=CLIENT)
    with chain.reverts(bindings.LedgerNotClient, task, chain.account(STRANGER)):
        chain.open_auction(task, STRANGER)
    receipt = chain.send("FogAuction", "openAuction", task, 600, keccak(text=f"salt-{CLIENT}"), by=CLIENT)
    event = receipt.events_of(bindings.AuctionOpened)[0]
    assert event.data_size == 600
    assert event.reveal_deadline - event.bidding_deadline == PARAMS.reveal_duration
    job = chain.view("FogAuction", "job", task, 0)
    assert (job.status, job.data_size, job.bidding_deadline) == (
        bindings.JobStatus.BIDDING,
        600,
        event.bidding_deadline,
    )
    with chain.reverts(bindings.AuctionWrongJobStatus, task, 0, bindings.JobStatus.BIDDING):
        chain.open_auction(task, CLIENT)


def test_bids_need_the_fog_deposit_once_per_fog_before_the_deadline(chain: FedChain) -> None:
    task = opened(chain)
    commitment = bid_commitment(10**6, 10**14, b"\1" * 32, chain.account(FOGS[0]))
    with chain.reverts(bindings.AuctionWrongValue, 1, PARAMS.fog_deposit):
        chain.send("FogAuction", "commitBid", task, 0, commitment, by=FOGS[0], value=1)
    receipt = chain.send("FogAuction", "commitBid", task, 0, commitment, by=FOGS[0], value=PARAMS.fog_deposit)
    assert receipt.events_of(bindings.BidCommitted)[0].commitment == commitment
    assert chain.view("FogAuction", "heldFor", task) == PARAMS.fog_deposit
    with chain.reverts(bindings.AuctionAlreadyBid, task, 0, chain.account(FOGS[0])):
        chain.send("FogAuction", "commitBid", task, 0, commitment, by=FOGS[0], value=PARAMS.fog_deposit)
    with chain.reverts(bindings.AuctionWrongJobStatus, task, 1, bindings.JobStatus.NONE):
        chain.send("FogAuction", "commitBid", task, 1, commitment, by=FOGS[1], value=PARAMS.fog_deposit)
    chain.advance(PARAMS.bidding_duration + 1)
    deadline = chain.view("FogAuction", "job", task, 0).bidding_deadline
    error = bindings.AuctionBidTooLate
    try:
        chain.send("FogAuction", "commitBid", task, 0, commitment, by=FOGS[1], value=PARAMS.fog_deposit)
    except error as err:
        assert err.values[:3] == (task, 0, deadline) and err.values[3] > deadline
    else:
        raise AssertionError("a late bid was accepted")


def test_any_number_of_fog_nodes_bid_and_the_ranking_keeps_the_best_refunding_the_others_at_once(
    chain: FedChain,
) -> None:
    # prepare: more bidders than the ranking keeps, at prices rising with their account number
    task = opened(chain)
    max_ranked = chain.view("FogAuction", "MAX_RANKED")
    bidders = [i for i in range(20) if i != CLIENT][: max_ranked + 2]
    for n, fog in enumerate(bidders):
        chain.commit_bid(task, 0, fog, 10**6, 10**14 + n)
    chain.advance(PARAMS.bidding_duration + 1)

    # execute: the dearest reveal first, so the two cheapest push the two dearest out of the ranking
    receipts = [chain.reveal_bid(task, 0, fog, 10**6, 10**14 + n) for n, fog in reversed(list(enumerate(bidders)))]

    # assert: the ranking is the sixteen cheapest, best first; the two dearest got their deposits back at once
    ranked = chain.view("FogAuction", "ranked", task, 0)
    assert list(ranked) == list(range(max_ranked))
    outranked = [e.bid_index for r in receipts for e in r.events_of(bindings.BidOutranked)]
    assert sorted(outranked) == [max_ranked, max_ranked + 1]
    for n in outranked:
        assert chain.claimable(bidders[n]) == PARAMS.fog_deposit
    assert chain.view("FogAuction", "heldFor", task) == max_ranked * PARAMS.fog_deposit


def test_a_bid_the_client_could_never_accept_forfeits_its_deposit_to_the_client_at_its_reveal(chain: FedChain) -> None:
    # prepare: a price above what the job pays a round (psi * cap^2 at r_a = 1)
    task = opened(chain)
    too_dear = 10**15 * 100 + 1
    chain.commit_bid(task, 0, FOGS[0], 10**6, too_dear)
    chain.advance(PARAMS.bidding_duration + 1)
    utility = auction_utility(PARAMS.mechanism(), WAD, 600, RevealedBid(10**6, too_dear))

    # execute
    receipt = chain.reveal_bid(task, 0, FOGS[0], 10**6, too_dear)

    # assert
    (rejected,) = receipt.events_of(bindings.BidRejected)
    assert (rejected.bid_index, rejected.utility) == (0, utility) and utility < 0
    assert chain.claimable(CLIENT) == PARAMS.fog_deposit
    assert list(chain.view("FogAuction", "ranked", task, 0)) == []
    chain.advance(PARAMS.reveal_duration + 1)
    closed = chain.close_auction(task, 0, CLIENT).events_of(bindings.AuctionClosed)[0]
    assert closed.winner == 2**32 - 1  # vacant: no bid qualifies


def test_reveals_must_match_the_commitment_inside_the_reveal_phase(chain: FedChain) -> None:
    task = opened(chain)
    chain.commit_bid(task, 0, FOGS[0], 10**6, 10**14)
    job = chain.view("FogAuction", "job", task, 0)
    try:
        chain.reveal_bid(task, 0, FOGS[0], 10**6, 10**14)
    except bindings.AuctionNotRevealPhase as err:
        assert err.values[:4] == (task, 0, job.bidding_deadline, job.reveal_deadline)
    else:
        raise AssertionError("a reveal during bidding was accepted")
    chain.advance(PARAMS.bidding_duration + 1)
    with chain.reverts(bindings.AuctionBadReveal, task, 0, chain.account(FOGS[0])):
        chain.reveal_bid(task, 0, FOGS[0], 10**6, 10**14 + 1)
    with chain.reverts(bindings.AuctionBadReveal, task, 0, chain.account(FOGS[1])):
        chain.reveal_bid(task, 0, FOGS[1], 10**6, 10**14)
    receipt = chain.reveal_bid(task, 0, FOGS[0], 10**6, 10**14)
    revealed = receipt.events_of(bindings.BidRevealed)[0]
    assert (revealed.frequency, revealed.price) == (10**6, 10**14)
    with chain.reverts(bindings.AuctionBadReveal, task, 0, chain.account(FOGS[0])):
        chain.reveal_bid(task, 0, FOGS[0], 10**6, 10**14)


def test_a_zero_frequency_cannot_be_revealed(chain: FedChain) -> None:
    task = opened(chain)
    chain.commit_bid(task, 0, FOGS[0], 0, 10**14)
    chain.advance(PARAMS.bidding_duration + 1)
    with chain.reverts(bindings.AuctionZeroFrequency, task, 0, chain.account(FOGS[0])):
        chain.reveal_bid(task, 0, FOGS[0], 0, 10**14)


def sealed_auction(chain: FedChain, params: TaskParams) -> tuple[int, list[tuple[int, int, int]]]:
    """Three bids: fast and dear (T_x = 0.6 s, r_t capped at 10), slow and cheap (T_x = T = 200 s, r_t = 1), never revealed."""
    task = opened(chain, params)
    bids = [(FOGS[0], 10**6, 3 * 10**14), (FOGS[1], 3000, 10**14), (FOGS[2], 10**7, 1)]
    for fog, frequency, price in bids:
        chain.commit_bid(task, 0, fog, frequency, price, params)
    chain.advance(params.bidding_duration + 1)
    for fog, frequency, price in bids[:2]:
        chain.reveal_bid(task, 0, fog, frequency, price)
    chain.advance(params.reveal_duration + 1)
    return task, bids


def test_the_winner_maximises_the_client_utility_and_a_non_revealer_forfeits(chain: FedChain) -> None:
    # Prepare: utilities from the model. Fast fog: T_x = 1000*600/1e6 = 0.6 s -> r_t capped at 10.
    task, bids = sealed_auction(chain, PARAMS)
    mechanism = PARAMS.mechanism()
    utilities = [auction_utility(mechanism, WAD, 600, RevealedBid(f, p)) for _, f, p in bids[:2]]
    assert utilities[0] > utilities[1]
    assert chain.view("FogAuction", "utility", task, 0, bids[0][1], bids[0][2]) == utilities[0]
    chain.join(task, CLIENTS[1])
    with chain.reverts(bindings.AuctionNotClient, task, 0, chain.account(CLIENTS[1])):
        chain.send("FogAuction", "closeAuction", task, 0, by=CLIENTS[1])
    with chain.reverts(bindings.AuctionWrongValue, 0, 3 * 10**14 * PARAMS.rounds):
        chain.send("FogAuction", "closeAuction", task, 0, by=CLIENT)
    # Execute
    receipt = chain.close_auction(task, 0, CLIENT)
    # Assert: fog 0 wins at its own price (first price); fog 2's deposit goes to the client.
    closed = receipt.events_of(bindings.AuctionClosed)[0]
    assert (closed.winner, closed.price, closed.escrow) == (0, 3 * 10**14, 3 * 10**14 * PARAMS.rounds)
    assert chain.view("Treasury", "claimable", chain.account(CLIENT)) == PARAMS.fog_deposit
    bids_now = chain.view("FogAuction", "bids", task, 0)
    # The close forfeits the unrevealed deposits by their count: their bids keep settled = false.
    assert [(b.revealed, b.settled) for b in bids_now] == [(True, False), (True, False), (False, False)]
    assert list(chain.view("FogAuction", "ranked", task, 0)) == [0, 1]
    assert chain.view("FogAuction", "heldFor", task) == 2 * PARAMS.fog_deposit + closed.escrow


def test_second_price_pays_the_winner_its_margin_over_the_runner_up(chain: FedChain) -> None:
    params = dataclasses.replace(PARAMS, second_price=True)
    task, bids = sealed_auction(chain, params)
    expected = choose_winner(params.mechanism(), WAD, 600, [RevealedBid(f, p) for _, f, p in bids[:2]])
    receipt = chain.close_auction(task, 0, CLIENT)
    closed = receipt.events_of(bindings.AuctionClosed)[0]
    assert (closed.winner, closed.price) == (expected.winner, expected.price)
    assert closed.price > bids[0][2]


def test_closing_waits_for_the_reveal_deadline_and_an_auction_without_reveals_leaves_the_job_vacant(
    chain: FedChain,
) -> None:
    task = opened(chain)
    chain.commit_bid(task, 0, FOGS[0], 10**6, 10**14)
    job = chain.view("FogAuction", "job", task, 0)
    try:
        chain.send("FogAuction", "closeAuction", task, 0, by=CLIENT)
    except bindings.AuctionRevealNotOver as err:
        assert err.values[:3] == (task, 0, job.reveal_deadline)
    else:
        raise AssertionError("an auction closed during bidding")
    chain.advance(PARAMS.bidding_duration + PARAMS.reveal_duration + 2)
    receipt = chain.send("FogAuction", "closeAuction", task, 0, by=CLIENT)
    assert receipt.events_of(bindings.AuctionClosed)[0].winner == 2**32 - 1
    assert chain.view("FogAuction", "job", task, 0).status == 3


def test_an_on_time_commit_releases_one_round_of_the_escrow_to_the_fog(chain: FedChain) -> None:
    task = chain.staffed_task(clients=(CLIENT,), price=10**14)
    with chain.reverts(bindings.AuctionWrongTaskStatus, task, bindings.TaskStatus.OPEN):
        chain.commit_update(task, 0, FOGS[0], 1)
    chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)
    with chain.reverts(bindings.AuctionNotWinner, task, 0, chain.account(FOGS[1])):
        chain.commit_update(task, 0, FOGS[1], 1)
    with chain.reverts(bindings.AuctionWrongRound, task, 0, 2, 1):
        chain.commit_update(task, 0, FOGS[0], 2)
    with chain.reverts(bindings.AuctionNoTranscript, task, 0):  # a commit carries its training transcript's root
        chain.send("FogAuction", "commitUpdate", task, 0, 1, keccak(text="update-0-1"), bytes(32), by=FOGS[0])
    receipt = chain.commit_update(task, 0, FOGS[0], 1)
    event = receipt.events_of(bindings.UpdateCommitted)[0]
    assert (event.round, event.fog, event.payment) == (1, chain.account(FOGS[0]), 10**14)
    assert (event.update_hash, event.transcript_root) == (keccak(text="update-0-1"), keccak(text="transcript-0-1"))
    assert chain.view("Treasury", "claimable", chain.account(FOGS[0])) == 10**14
    assert chain.view("FogAuction", "commitTimes", task, 1, 1) == [event.committed_at]
    with chain.reverts(bindings.AuctionWrongRound, task, 0, 1, 1):
        chain.commit_update(task, 0, FOGS[0], 1)


def test_a_late_fog_is_slashed_to_the_client_and_the_job_goes_to_the_next_best_bid(chain: FedChain) -> None:
    # Prepare: fog 0 wins, fog 1 (cheaper, slower) waits on standby; the task starts.
    task, bids = sealed_auction(chain, PARAMS)
    chain.close_auction(task, 0, CLIENT)
    chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)
    with chain.reverts(bindings.AuctionNoMissedRound, task, 0):
        chain.send("FogAuction", "reportMissedRound", task, 0, by=STRANGER)
    # Fog 0 misses round 1's deadline.
    chain.advance(PARAMS.round_duration + 1)
    deadline = chain.view("TaskRegistry", "roundDeadline", task)
    try:
        chain.commit_update(task, 0, FOGS[0], 1)
    except bindings.AuctionCommitTooLate as err:
        assert err.values[:3] == (task, 0, deadline)
    else:
        raise AssertionError("a late commit was accepted")
    before = chain.view("Treasury", "claimable", chain.account(CLIENT))
    # Execute
    receipt = chain.send("FogAuction", "reportMissedRound", task, 0, by=STRANGER)
    # Assert: deposit to the client; fog 1 takes over at its own price from round 2.
    slashed = receipt.events_of(bindings.FogSlashed)[0]
    assert (slashed.fog, slashed.round, slashed.forfeited) == (chain.account(FOGS[0]), 1, PARAMS.fog_deposit)
    reassigned = receipt.events_of(bindings.JobReassigned)[0]
    assert (reassigned.winner, reassigned.price, reassigned.from_round) == (1, bids[1][2], 2)
    assert chain.view("Treasury", "claimable", chain.account(CLIENT)) == before + PARAMS.fog_deposit
    # The round is posted with the client skipped; the new fog commits round 2 and is paid its own price.
    chain.post_round(task, 1, [(0, 0, False)])
    commit = chain.commit_update(task, 0, FOGS[1], 2).events_of(bindings.UpdateCommitted)[0]
    assert commit.payment == bids[1][2]
    with chain.reverts(bindings.AuctionNotWinner, task, 0, chain.account(FOGS[0])):
        chain.commit_update(task, 0, FOGS[0], 2)


def test_settle_job_returns_deposits_and_the_unearned_escrow(chain: FedChain) -> None:
    # Prepare: fog 0 wins and commits both rounds of a 2-round task; fog 1 stays on standby.
    params = dataclasses.replace(PARAMS, rounds=2)
    task, bids = sealed_auction(chain, params)
    chain.close_auction(task, 0, CLIENT)
    with chain.reverts(bindings.AuctionWrongTaskStatus, task, bindings.TaskStatus.OPEN):
        chain.send("FogAuction", "settleJob", task, 0, by=STRANGER)
    chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)
    receipt = chain.commit_update(task, 0, FOGS[0], 1)
    observed = (
        receipt.events_of(bindings.UpdateCommitted)[0].committed_at
        - chain.view("TaskRegistry", "state", task).round_started_at
    )
    chain.post_round(task, 1, [(WAD, observed, True)])
    chain.advance(params.round_duration + 1)
    chain.post_round(task, 2, [(0, 0, False)])  # fog 0 missed round 2: its deposit goes to the client
    client_before = chain.view("Treasury", "claimable", chain.account(CLIENT))
    # Execute
    receipt = chain.send("FogAuction", "settleJob", task, 0, by=STRANGER)
    # Assert
    settled = receipt.events_of(bindings.JobSettled)[0]
    assert (settled.escrow_refund, settled.deposits_refunded, settled.deposits_forfeited) == (
        bids[0][2],
        params.fog_deposit,
        params.fog_deposit,
    )
    assert chain.view("Treasury", "claimable", chain.account(CLIENT)) == client_before + bids[0][2] + params.fog_deposit
    assert chain.view("Treasury", "claimable", chain.account(FOGS[1])) == params.fog_deposit
    assert chain.view("FogAuction", "heldFor", task) == 0
    with chain.reverts(bindings.AuctionWrongJobStatus, task, 0, bindings.JobStatus.SETTLED):
        chain.send("FogAuction", "settleJob", task, 0, by=STRANGER)


def test_cancelling_returns_every_bid_and_escrow(chain: FedChain) -> None:
    task = chain.staffed_task(clients=(CLIENT,), price=10**14)
    chain.send("TaskRegistry", "cancelTask", task, by=PUBLISHER)
    chain.send("FogAuction", "settleJob", task, 0, by=STRANGER)
    assert chain.view("Treasury", "claimable", chain.account(FOGS[0])) == PARAMS.fog_deposit
    assert chain.view("Treasury", "claimable", chain.account(CLIENT)) == 10**14 * PARAMS.rounds
    assert chain.view("FogAuction", "heldFor", task) == 0
    assert MechanismParams.of(chain.view("TaskRegistry", "params", task)) == PARAMS.mechanism()
