"""Disputes and the ArbiterCommittee: challenges of posted entries and of fog updates, verdicts signed by M of N
members, expiries, the fates finalisation applies, and where every bond goes."""

from __future__ import annotations

from typing import Any

from eth_account import Account

from fedchain.audit import CheckName, CheckStatus
from fedchain.chain import bindings
from fedchain.chain.contract import Contract
from fedchain.fl.reputation import WAD, ClientReputation, score_round
from tests.contracts.conftest import (
    AGGREGATOR,
    ARBITERS,
    CLIENTS,
    FOGS,
    PUBLISHER,
    SINK,
    STRANGER,
    VERDICT_WINDOW,
    FedChain,
    TaskParams,
)

PARAMS = TaskParams(challenge_window=300, round_duration=2000)
#: What one upheld challenge takes from the aggregator's bond: what one client's entry can move.
SLASH = PARAMS.aggregator_bond // PARAMS.max_clients
PRICE = 10**14
#: Fog 3 bids for job 0 too, dearer in time: it waits on standby.
STANDBY = FOGS[3]
Fate, Status, Kind = bindings.Fate, bindings.ChallengeStatus, bindings.ChallengeKind


def _task(chain: FedChain) -> int:
    """Three clients, job i won by fog i, fog 3 on standby for job 0; round 1 committed by every fog, not posted."""
    task = chain.create_task(PARAMS)
    for client in CLIENTS[:3]:
        chain.join(task, client, params=PARAMS)
        chain.open_auction(task, client)
    for index in range(3):
        chain.commit_bid(task, index, FOGS[index], 10**6, PRICE, PARAMS)
    chain.commit_bid(task, 0, STANDBY, 10**5, PRICE, PARAMS)
    chain.advance(PARAMS.bidding_duration + 1)
    for index in range(3):
        chain.reveal_bid(task, index, FOGS[index], 10**6, PRICE)
    chain.reveal_bid(task, 0, STANDBY, 10**5, PRICE)
    chain.advance(PARAMS.reveal_duration + 1)
    for index, client in enumerate(CLIENTS[:3]):
        chain.close_auction(task, index, client)
    chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)
    start = chain.view("TaskRegistry", "state", task).round_started_at
    for index in range(3):
        chain.set_next_timestamp(start + 100 + index)
        chain.commit_update(task, index, FOGS[index], 1)
    return task


def _post(chain: FedChain, task: int, qualities: tuple[tuple[int, bool], ...]) -> None:
    """Post round 1 (pending) with these (quality, accepted) entries; round times from the commits."""
    chain.post_round(task, 1, [(q, 100 + i, ok) for i, (q, ok) in enumerate(qualities)], final=False)


HONEST = ((WAD, True), (WAD * 9 // 10, True), (WAD * 11 // 10, True))
#: The aggregator zeroes client 1, whose update was as good as the others'.
ZEROED = ((WAD, True), (0, True), (WAD * 11 // 10, True))


def _challenge(chain: FedChain, task: int, index: int, proposed: tuple[int, int, bool, bool], *, by: int) -> int:
    receipt = chain.send("Disputes", "openEntryChallenge", task, 1, index, proposed, by=by, value=PARAMS.challenge_bond)
    return receipt.events_of(bindings.ChallengeOpened)[0].challenge_id


def _fog_challenge(chain: FedChain, task: int, index: int, fog: int) -> int:
    receipt = chain.send(
        "Disputes",
        "openFogChallenge",
        task,
        1,
        index,
        chain.account(fog),
        0,
        by=CLIENTS[index],
        value=PARAMS.challenge_bond,
    )
    return receipt.events_of(bindings.ChallengeOpened)[0].challenge_id


def _claimable(chain: FedChain, index: int) -> int:
    return chain.view("Treasury", "claimable", chain.account(index))


def _score(quality: int, seconds: int) -> Any:
    mechanism = PARAMS.mechanism()
    return score_round(ClientReputation.joined(mechanism), mechanism, quality, seconds, True)


# --------------------------------------------------------------------------- opening


def test_an_entry_challenge_needs_its_bond_a_pending_round_its_window_and_a_client(chain: FedChain) -> None:
    task = _task(chain)
    proposed = (WAD, 101, True, True)
    with chain.reverts(bindings.DisputeRoundNotPosted, task, 1):
        chain.send("Disputes", "openEntryChallenge", task, 1, 1, proposed, by=STRANGER, value=PARAMS.challenge_bond)
    _post(chain, task, ZEROED)
    with chain.reverts(bindings.DisputeWrongValue, 1, PARAMS.challenge_bond):
        chain.send("Disputes", "openEntryChallenge", task, 1, 1, proposed, by=STRANGER, value=1)
    with chain.reverts(bindings.DisputeUnknownClient, task, 3):
        chain.send("Disputes", "openEntryChallenge", task, 1, 3, proposed, by=STRANGER, value=PARAMS.challenge_bond)

    receipt = chain.send(
        "Disputes", "openEntryChallenge", task, 1, 1, proposed, by=STRANGER, value=PARAMS.challenge_bond
    )

    opened = receipt.events_of(bindings.ChallengeOpened)[0]
    now = chain.now()
    assert (opened.task_id, opened.round, opened.client_index, opened.kind) == (task, 1, 1, Kind.ENTRY)
    assert (opened.challenger, opened.accused) == (chain.account(STRANGER), chain.account(AGGREGATOR))
    assert (tuple(opened.proposed), opened.bond, opened.verdict_deadline) == (
        proposed,
        PARAMS.challenge_bond,
        now + VERDICT_WINDOW,
    )
    assert chain.view("Disputes", "roundChallenges", task, 1) == (1, 1)
    assert chain.view("Disputes", "heldFor", task) == PARAMS.aggregator_bond + PARAMS.challenge_bond
    assert chain.view("Treasury", "held", task) == sum(chain.pool_parts(task))
    closes = chain.view("RoundLedger", "roundRecord", task, 1).posted_at + PARAMS.challenge_window
    chain.set_next_timestamp(closes + 1)
    chain.advance(0)
    with chain.reverts(bindings.DisputeWindowClosed, task, 1, closes, closes + 1):
        chain.send("Disputes", "openEntryChallenge", task, 1, 0, proposed, by=STRANGER, value=PARAMS.challenge_bond)


def test_an_open_challenge_holds_its_round_while_later_rounds_go_on(chain: FedChain) -> None:
    task = _task(chain)
    _post(chain, task, ZEROED)
    challenge = _challenge(chain, task, 1, (WAD, 101, True, True), by=CLIENTS[1])
    # Round 2 is trained and posted meanwhile.
    start = chain.view("TaskRegistry", "state", task).round_started_at
    for index in range(3):
        chain.set_next_timestamp(start + 50 + index)
        chain.commit_update(task, index, FOGS[index], 2)
    chain.post_round(task, 2, [(WAD, 50 + i, True) for i in range(3)], final=False)
    chain.advance(PARAMS.challenge_window + 1)
    with chain.reverts(bindings.LedgerChallengesOpen, task, 1, 1):
        chain.finalize(task, 1)
    chain.resolve(challenge, True)
    chain.finalize(task, 1)
    chain.finalize(task, 2)
    assert chain.view("RoundLedger", "rounds", task) == (2, 2)


# --------------------------------------------------------------------------- verdicts


def test_an_upheld_entry_challenge_pays_the_victim_as_if_scored_right_and_slashes_the_bond(chain: FedChain) -> None:
    # ---- prepare: the aggregator zeroes client 1; client 1's own agent challenges with its true score.
    task = _task(chain)
    _post(chain, task, ZEROED)
    proposed = (WAD * 9 // 10, 101, True, True)
    challenge = _challenge(chain, task, 1, proposed, by=CLIENTS[1])

    # ---- execute: two members sign the verdict; a stranger submits it; the round becomes final.
    receipt = chain.resolve(challenge, True)
    final = chain.finalize(task, 1)

    # ---- assert: corrected, paid as honestly scored, not removed; the challenger gets its bond back and half an
    # entry slash of the aggregator's bond, the rest of the slash goes to the sink.
    resolved = receipt.events_of(bindings.ChallengeResolved)[0]
    assert (resolved.status, resolved.fate) == (Status.UPHELD, Fate.CORRECTED)
    slashed = receipt.events_of(bindings.BondSlashed)[0]
    bond = PARAMS.aggregator_bond
    assert (slashed.challenge_id, slashed.reward, slashed.burned) == (challenge, SLASH // 2, SLASH - SLASH // 2)
    assert final.events_of(bindings.ClientRemoved) == ()
    info = chain.view("RoundLedger", "client", task, 1)
    honest = _score(WAD * 9 // 10, 101)
    assert (info.status, info.loss_reputation, info.earned) == (
        bindings.ClientStatus.ACTIVE,
        honest.reputation.loss_reputation,
        honest.payment,
    )
    assert _claimable(chain, CLIENTS[1]) == PARAMS.challenge_bond + SLASH // 2
    assert _claimable(chain, SINK) == SLASH - SLASH // 2
    assert chain.view("Disputes", "bond", task) == (bond - SLASH, chain.account(AGGREGATOR))
    assert chain.view("Disputes", "bondShortfall", task) == SLASH
    assert chain.view("Disputes", "heldFor", task) == bond - SLASH
    assert chain.view("Treasury", "held", task) == sum(chain.pool_parts(task))
    # The posted entries of the others stand.
    assert chain.view("RoundLedger", "client", task, 0).earned == _score(WAD, 100).payment


def test_a_rejected_challenge_costs_the_challenger_its_bond_half_to_the_accused(chain: FedChain) -> None:
    task = _task(chain)
    _post(chain, task, HONEST)
    challenge = _challenge(chain, task, 0, (3 * WAD, 100, True, True), by=STRANGER)  # a greedy, false claim

    receipt = chain.resolve(challenge, False)
    chain.finalize(task, 1)

    resolved = receipt.events_of(bindings.ChallengeResolved)[0]
    assert (resolved.status, resolved.fate) == (Status.REJECTED, Fate.POSTED)
    half = PARAMS.challenge_bond // 2
    assert _claimable(chain, AGGREGATOR) == half
    assert _claimable(chain, SINK) == PARAMS.challenge_bond - half
    assert _claimable(chain, STRANGER) == 0
    assert chain.view("RoundLedger", "client", task, 0).earned == _score(WAD, 100).payment
    assert chain.view("Disputes", "bond", task)[0] == PARAMS.aggregator_bond


def test_a_challenge_without_a_verdict_in_time_expires_neutral_and_returns_the_bond(chain: FedChain) -> None:
    task = _task(chain)
    _post(chain, task, ZEROED)
    challenge = _challenge(chain, task, 1, (WAD, 101, True, True), by=CLIENTS[1])
    deadline = chain.view("Disputes", "challenge", challenge).opened_at + VERDICT_WINDOW
    with chain.reverts(bindings.DisputeVerdictNotDue, challenge, deadline, chain.now()):
        chain.send("Disputes", "expire", challenge, by=STRANGER)
    chain.set_next_timestamp(deadline + 1)
    chain.advance(0)
    with chain.reverts(bindings.DisputeVerdictTooLate, challenge, deadline, deadline + 1):
        chain.resolve(challenge, True)

    receipt = chain.send("Disputes", "expire", challenge, by=STRANGER)
    chain.finalize(task, 1)

    resolved = receipt.events_of(bindings.ChallengeResolved)[0]
    assert (resolved.status, resolved.fate) == (Status.EXPIRED, Fate.NEUTRAL)
    info = chain.view("RoundLedger", "client", task, 1)
    assert (info.status, info.rounds, info.earned) == (
        bindings.ClientStatus.ACTIVE,
        0,
        0,
    )  # neutral: no pay, no removal
    assert _claimable(chain, CLIENTS[1]) == PARAMS.challenge_bond
    assert chain.view("Disputes", "bond", task)[0] == PARAMS.aggregator_bond
    with chain.reverts(bindings.DisputeNotOpen, challenge, Status.EXPIRED):
        chain.send("Disputes", "expire", challenge, by=STRANGER)


def test_several_challenges_of_one_entry_the_first_opened_upheld_one_wins_whichever_verdict_lands_first(
    chain: FedChain,
) -> None:
    # A puppet of the aggregator challenges first with a wrong measurement; the victim's own challenge still counts,
    # and a copy opened after the victim's, whose verdict lands first, takes neither its correction nor its reward.
    task = _task(chain)
    _post(chain, task, ZEROED)
    puppet = _challenge(chain, task, 1, (WAD // 10, 101, True, True), by=STRANGER)
    victim = _challenge(chain, task, 1, (WAD * 9 // 10, 101, True, True), by=CLIENTS[1])
    copy = _challenge(chain, task, 1, (WAD * 95 // 100, 101, True, True), by=CLIENTS[0])

    chain.resolve(puppet, False)
    first = chain.resolve(copy, True)
    last = chain.resolve(victim, True)
    chain.finalize(task, 1)

    # The entry is paid once, when its last challenge closes: one slash, half of it to the victim.
    assert first.events_of(bindings.BondSlashed) == ()
    (slashed,) = last.events_of(bindings.BondSlashed)
    assert (slashed.challenge_id, slashed.reward) == (victim, SLASH // 2)
    assert last.events_of(bindings.ChallengeResolved)[0].fate == Fate.CORRECTED
    assert chain.view("Disputes", "firstUpheld", task, 1, 1) == victim
    assert chain.view("RoundLedger", "client", task, 1).earned == _score(WAD * 9 // 10, 101).payment
    assert _claimable(chain, CLIENTS[1]) == PARAMS.challenge_bond + SLASH // 2
    assert _claimable(chain, CLIENTS[0]) == PARAMS.challenge_bond  # upheld too: its bond back, no reward
    assert chain.view("Disputes", "roundChallenges", task, 1) == (0, 3)


def test_an_upheld_fog_challenge_voids_the_round_slashes_the_fog_and_moves_the_job(chain: FedChain) -> None:
    # ---- prepare: fog 0 committed garbage; the aggregator rightly rejects it (client 0 would be removed).
    task = _task(chain)
    _post(chain, task, ((0, False), (WAD, True), (WAD, True)))
    with chain.reverts(bindings.DisputeNotClient, task, 0, chain.account(STRANGER)):
        chain.send(
            "Disputes",
            "openFogChallenge",
            task,
            1,
            0,
            chain.account(FOGS[0]),
            0,
            by=STRANGER,
            value=PARAMS.challenge_bond,
        )
    # Only the fog node that committed the round can be accused: not nobody, not its standby.
    for named in ("0x" + "00" * 20, chain.account(STANDBY)):
        with chain.reverts(bindings.DisputeNotCommitter, task, 1, 0, named, chain.account(FOGS[0])):
            chain.send("Disputes", "openFogChallenge", task, 1, 0, named, 0, by=CLIENTS[0], value=PARAMS.challenge_bond)
    challenge = _fog_challenge(chain, task, 0, FOGS[0])
    again = _fog_challenge(chain, task, 0, FOGS[0])

    # ---- execute
    receipt = chain.resolve(challenge, True)
    second = chain.resolve(again, True)
    final = chain.finalize(task, 1)

    # ---- assert: fog 0 slashed (the round's price back to the client, the rest to the sink), fog 3 takes the
    # job from round 2 (fog 0 had not committed it), client 0's round is void: not removed, not paid.
    slashed = receipt.events_of(bindings.FogFraudSlashed)[0]
    assert (slashed.fog, slashed.round, slashed.compensation, slashed.burned) == (
        chain.account(FOGS[0]),
        1,
        PRICE,
        PARAMS.fog_deposit - PRICE,
    )
    moved = receipt.events_of(bindings.JobReassigned)[0]
    assert (moved.winner, moved.price, moved.from_round) == (1, PRICE, 2)  # bid 1 of job 0 is fog 3's
    assert receipt.events_of(bindings.ChallengeResolved)[0].fate == Fate.VOID
    assert second.events_of(bindings.FogFraudSlashed) == ()  # nothing left to take from fog 0
    assert final.events_of(bindings.ClientRemoved) == ()
    info = chain.view("RoundLedger", "client", task, 0)
    assert (info.status, info.rounds, info.earned) == (bindings.ClientStatus.ACTIVE, 0, 0)
    assert _claimable(chain, CLIENTS[0]) == 2 * PARAMS.challenge_bond + PRICE
    assert _claimable(chain, SINK) == PARAMS.fog_deposit - PRICE
    chain.commit_update(task, 0, STANDBY, 2)
    assert chain.view("FogAuction", "job", task, 0).paid_up_to == 2
    assert chain.view("Treasury", "held", task) == sum(chain.pool_parts(task))


def test_verdicts_need_a_quorum_of_distinct_members_signing_the_same_outcome_in_order(chain: FedChain) -> None:
    task = _task(chain)
    _post(chain, task, ZEROED)
    challenge = _challenge(chain, task, 1, (WAD, 101, True, True), by=CLIENTS[1])
    upheld = chain.verdict(challenge, True)
    with chain.reverts(bindings.DisputeUnknownChallenge, 99):
        chain.send("Disputes", "resolve", 99, True, upheld, by=STRANGER)
    with chain.reverts(bindings.CommitteeNoQuorum, 1, 2):
        chain.send("Disputes", "resolve", challenge, True, upheld[:1], by=STRANGER)
    with chain.reverts(bindings.CommitteeSignersNotSorted, 1):
        chain.send("Disputes", "resolve", challenge, True, upheld[::-1], by=STRANGER)
    with chain.reverts(bindings.CommitteeSignersNotSorted, 1):
        chain.send("Disputes", "resolve", challenge, True, [upheld[0], upheld[0]], by=STRANGER)
    outsider = chain.verdict(challenge, True, signers=(ARBITERS[0], STRANGER))
    stranger = chain.account(STRANGER)
    with chain.reverts(bindings.CommitteeNotMember, stranger):
        chain.send("Disputes", "resolve", challenge, True, outsider, by=STRANGER)
    with chain.reverts(bindings.CommitteeBadSignature, 0):
        chain.send("Disputes", "resolve", challenge, True, [b"\x01" * 65, upheld[1]], by=STRANGER)
    # Signatures of "upheld" do not make a "rejected" verdict: they recover to other addresses.
    try:
        chain.send("Disputes", "resolve", challenge, False, upheld, by=STRANGER)
        raise AssertionError("a verdict with signatures of the other outcome went through")
    except (bindings.CommitteeNotMember, bindings.CommitteeSignersNotSorted):
        pass
    chain.send("Disputes", "resolve", challenge, True, upheld, by=STRANGER)
    with chain.reverts(bindings.DisputeNotOpen, challenge, Status.UPHELD):
        chain.send("Disputes", "resolve", challenge, True, upheld, by=STRANGER)


def test_the_committee_refuses_unusable_members_quorums_and_windows(chain: FedChain) -> None:
    artifact = chain.artifacts["ArbiterCommittee"]
    a, b_, c = (chain.account(i) for i in ARBITERS)

    def deploy(members: list[str], quorum: int, window: int = 60) -> None:
        Contract.deploy(chain.transactor(STRANGER), artifact.bytecode, members, quorum, window, abi=artifact.abi)

    with chain.reverts(bindings.CommitteeInvalid, 0, 0):
        deploy([], 0)
    with chain.reverts(bindings.CommitteeInvalid, 2, 1):  # 1 of 2 is no majority: two contrary verdicts could pass
        deploy([a, b_], 1)
    with chain.reverts(bindings.CommitteeInvalid, 3, 4):
        deploy([a, b_, c], 4)
    with chain.reverts(bindings.CommitteeBadMember, a):
        deploy([a, b_, a], 2)
    with chain.reverts(bindings.CommitteeBadMember, "0x" + "00" * 20):
        deploy([a, "0x" + "00" * 20], 2)
    with chain.reverts(bindings.CommitteeInvalidWindow, 0):
        deploy([a], 1, 0)
    deploy([a, b_, c], 2)


def test_only_the_ledger_releases_bonds_and_only_disputes_slash_for_fraud(chain: FedChain) -> None:
    task = _task(chain)
    with chain.reverts(bindings.DisputeNotLedger, chain.account(STRANGER)):
        chain.send("Disputes", "releaseBond", task, by=STRANGER)
    with chain.reverts(bindings.AuctionNotDisputes, chain.account(STRANGER)):
        chain.send("FogAuction", "slashFraud", task, 0, chain.account(FOGS[0]), 1, by=STRANGER)


def test_a_disputed_task_settles_every_wei_and_audits_clean(chain: FedChain) -> None:
    # ---- prepare: round 1 with an upheld entry challenge, a rejected one, an upheld fog challenge and an expired
    # one; three rounds in all; settlement, job settlement, and everyone withdraws.
    task = _task(chain)
    _post(chain, task, ((0, False), (0, True), (WAD * 11 // 10, True)))
    upheld = _challenge(chain, task, 1, (WAD * 9 // 10, 101, True, True), by=CLIENTS[1])
    rejected = _challenge(chain, task, 2, (2 * WAD, 102, True, True), by=STRANGER)
    fog = _fog_challenge(chain, task, 0, FOGS[0])
    expired = _challenge(chain, task, 2, (WAD, 102, True, True), by=CLIENTS[2])
    for challenge, outcome in ((upheld, True), (rejected, False), (fog, True)):
        chain.resolve(challenge, outcome)
    # The upheld entry challenge took an entry slash: the aggregator makes its bond whole before it posts again.
    chain.send("Disputes", "topUpBond", task, by=AGGREGATOR, value=SLASH)
    fogs = {0: STANDBY, 1: FOGS[1], 2: FOGS[2]}
    for round_ in (2, 3):
        start = chain.view("TaskRegistry", "state", task).round_started_at
        for index in range(3):
            chain.commit_update(task, index, fogs[index], round_)
        times = chain.view("FogAuction", "commitTimes", task, round_, 3)
        chain.post_round(task, round_, [(WAD, t - start, True) for t in times], final=False)
        if round_ == 2:  # round 2 goes on while round 1's last challenge waits for a verdict that never comes
            chain.advance(VERDICT_WINDOW + 1)
            chain.send("Disputes", "expire", expired, by=STRANGER)
            chain.finalize(task, 1)
            chain.finalize(task, 2)
    chain.finalize(task, 3)
    chain.send("RoundLedger", "settle", task, by=STRANGER)
    chain.send("FogAuction", "settleJobs", task, [0, 1, 2], by=STRANGER)
    owed = [i for i in (PUBLISHER, AGGREGATOR, *CLIENTS[:3], *FOGS[:4], STRANGER) if _claimable(chain, i)]
    for account in owed:
        chain.send("Treasury", "withdraw", by=account)

    # ---- execute
    report = chain.audit(task)

    # ---- assert: every check passes, the disputes and the sink included; what the history says of them.
    assert {c.name.value: [f.message for f in c.findings] for c in report.checks if c.failed} == {}
    statuses = {c.name: c.status for c in report.checks}
    assert statuses[CheckName.DISPUTES] is CheckStatus.PASS and statuses[CheckName.SINK] is CheckStatus.PASS
    history = report.history
    assert [(c.kind, c.status, c.fate) for c in history.challenges] == [
        ("entry", "upheld", "corrected"),
        ("entry", "rejected", "posted"),
        ("fog", "upheld", "void"),
        ("entry", "expired", "neutral"),
    ]
    assert history.rounds[0].fates == ("void", "corrected", "neutral")
    assert (history.task.bond_topped_up, history.task.bond_returned) == (SLASH, PARAMS.aggregator_bond)
    assert [s.kind for s in history.slashes] == ["fraud"]
    to_sink = history.to_sink
    assert set(to_sink) == {"BOND_SLASH", "CHALLENGE_FORFEIT", "FOG_SLASH"}
    assert history.credited_to(history.task.publisher).keys() == {"BUDGET_REFUND"}
    assert chain.solvency().held == 0


def test_signatures_are_eip712_over_the_committee_domain(chain: FedChain) -> None:
    # The digest is the standard EIP-712 one: eth-account's typed-data encoder gives the same, so any wallet can sign.
    task = _task(chain)
    _post(chain, task, ZEROED)
    challenge = _challenge(chain, task, 1, (WAD, 101, True, True), by=CLIENTS[1])
    from eth_account.messages import encode_typed_data

    typed = {
        "types": {
            "EIP712Domain": [
                {"name": "name", "type": "string"},
                {"name": "version", "type": "string"},
                {"name": "chainId", "type": "uint256"},
                {"name": "verifyingContract", "type": "address"},
            ],
            "Verdict": [
                {"name": "challengeId", "type": "uint256"},
                {"name": "taskId", "type": "uint256"},
                {"name": "round", "type": "uint16"},
                {"name": "clientIndex", "type": "uint32"},
                {"name": "upheld", "type": "bool"},
            ],
        },
        "primaryType": "Verdict",
        "domain": {
            "name": "FedChain Arbiter Committee",
            "version": "1",
            "chainId": chain.w3.eth.chain_id,
            "verifyingContract": chain.addresses["ArbiterCommittee"],
        },
        "message": {"challengeId": challenge, "taskId": task, "round": 1, "clientIndex": 1, "upheld": True},
    }
    member = chain.node.dev_account(ARBITERS[0])
    signed = Account.sign_message(encode_typed_data(full_message=typed), member.key)
    digest = chain.view("ArbiterCommittee", "verdictDigest", challenge, task, 1, 1, True)
    assert Account._recover_hash(digest, signature=signed.signature) == member.address


def test_a_fraud_found_after_the_next_commit_withdraws_that_commit_and_moves_the_job_on_from_the_next_round(
    chain: FedChain,
) -> None:
    # ---- prepare: fog 0's round-1 update is challenged; before the verdict it also commits round 2.
    task = _task(chain)
    _post(chain, task, ((0, False), (WAD, True), (WAD, True)))
    challenge = _fog_challenge(chain, task, 0, FOGS[0])
    chain.commit_update(task, 0, FOGS[0], 2)
    escrow = chain.view("FogAuction", "job", task, 0).escrow

    # ---- execute
    receipt = chain.resolve(challenge, True)

    # ---- assert: no commit replaces fog 0's round 2 (contracts/README.md, "One commit per job and round"): it no
    # longer counts, the standby starts at round 3, and the client gets back what it paid fog 0 for rounds 1 and 2.
    slashed = receipt.events_of(bindings.FogFraudSlashed)[0]
    assert (slashed.compensation, slashed.burned) == (2 * PRICE, PARAMS.fog_deposit - 2 * PRICE)
    assert receipt.events_of(bindings.JobReassigned)[0].from_round == 3
    job = chain.view("FogAuction", "job", task, 0)
    assert (job.escrow, job.paid_up_to, job.committed_at) == (escrow, 2, 0)
    assert chain.view("FogAuction", "commitTimes", task, 2, 3)[0] == 0  # fog 0's round-2 commit no longer counts
    with chain.reverts(bindings.AuctionWrongRound, task, 0, 2, 2):
        chain.commit_update(task, 0, STANDBY, 2)
    # An aggregator that scored round 2 before the verdict is mined cannot post what it scored: it scores again.
    stale = [(WAD, 100, True, True), (0, 0, False, False), (0, 0, False, False)]
    with chain.reverts(bindings.LedgerCommitMismatch, task, 0, False):
        chain.post_round(task, 2, stale, final=False)
    assert chain.view("Treasury", "held", task) == sum(chain.pool_parts(task))


def test_a_round_goes_without_a_vacant_job_before_its_deadline(chain: FedChain) -> None:
    # Client 0's job falls vacant (its fog node is found fraudulent, no bid left): the next round need not wait for it.
    task = chain.create_task(PARAMS)
    for client in CLIENTS[:2]:
        chain.join(task, client, params=PARAMS)
        chain.open_auction(task, client)
    for index in range(2):
        chain.commit_bid(task, index, FOGS[index], 10**6, PRICE, PARAMS)
    chain.advance(PARAMS.bidding_duration + 1)
    for index in range(2):
        chain.reveal_bid(task, index, FOGS[index], 10**6, PRICE)
    chain.advance(PARAMS.reveal_duration + 1)
    for index, client in enumerate(CLIENTS[:2]):
        chain.close_auction(task, index, client)
    chain.send("TaskRegistry", "startTask", task, by=PUBLISHER)
    for index in range(2):
        chain.commit_update(task, index, FOGS[index], 1)
    times = chain.view("FogAuction", "commitTimes", task, 1, 2)
    start = chain.view("TaskRegistry", "state", task).round_started_at
    chain.post_round(task, 1, [(0, times[0] - start, False), (WAD, times[1] - start, True)], final=False)
    chain.resolve(_fog_challenge(chain, task, 0, FOGS[0]), True)
    assert chain.view("FogAuction", "job", task, 0).status == bindings.JobStatus.VACANT
    chain.commit_update(task, 1, FOGS[1], 2)
    start = chain.view("TaskRegistry", "state", task).round_started_at
    seconds = chain.view("FogAuction", "commitTimes", task, 2, 2)[1] - start
    assert chain.now() < chain.view("TaskRegistry", "roundDeadline", task)
    chain.post_round(task, 2, [(0, 0, False), (WAD, seconds, True)], final=False)  # before the deadline
    assert chain.view("RoundLedger", "rounds", task) == (2, 0)
