"""The demo's cast, checked by hand and against the auction rule (eq. 18): pure planning, no processes."""

from __future__ import annotations

from fedchain.demo import DemoConfig
from fedchain.fl.reputation import WAD, MechanismParams, RevealedBid, choose_winner
from fedchain.system import AuctionScale, demo_roster, participant_account, required_funds
from fedchain.system.roster import CHALLENGES_PER_PARTICIPANT, GAS_ALLOWANCE_WEI

#: c = 5e8 cycles per sample, T = 40 s, cap 2: the capped time reputation needs f >= c * D * cap / T = 2.5e7 * D.
SCALE = AuctionScale(cycles_per_sample=5 * 10**8, expected_round_s=40, reputation_cap=2.0, target_price=5e13)


def test_client_sizes_grow_from_half_to_one_and_a_half_times_the_mean_and_odd_clients_are_noisy() -> None:
    roster = demo_roster(5, 3, 64, SCALE)

    assert [c.samples for c in roster.clients] == [32, 48, 64, 80, 96]
    assert [c.noisy_labels for c in roster.clients] == [0.0, 0.5, 0.0, 0.5, 0.0]
    assert [c.partition_index for c in roster.clients] == [0, 1, 2, 3, 4]


def test_each_fog_frequency_reaches_the_cap_for_the_largest_client_of_its_share() -> None:
    # fog 0: the smallest client (32); fogs 1 and 2 share 48, 64 | 80, 96; f = 2.5e7 * D
    roster = demo_roster(5, 3, 64, SCALE)

    assert [f.cost.frequency for f in roster.fogs] == [800_000_000, 1_600_000_000, 2_400_000_000]
    assert [f.cost.margin for f in roster.fogs] == [0.1, 0.2, 0.3]
    assert [f.lazy for f in roster.fogs] == ["zero", None, None]
    # a mid-sized job (64 samples) at fog 1's frequency costs the target price: E = alpha / 2 * c * D * f^2
    assert roster.fogs[1].cost.cost(64, SCALE.cycles_per_sample) == 5e13


def test_the_demo_auctions_give_each_fog_the_jobs_it_was_fitted_to() -> None:
    # prepare: the demo's own terms and cast; every fog bids its rational price for every job
    config = DemoConfig()
    terms, roster = config.terms(), config.roster()
    params = MechanismParams.of(terms.to_params(model_id=bytes(32), dataset_id=bytes(32)))

    # execute: the contract's rule for each client, with the joining reputation r_a = 1
    winners = []
    for client in roster.clients:
        bids = [
            RevealedBid(f.cost.frequency, f.cost.price(client.samples, terms.cycles_per_sample)) for f in roster.fogs
        ]
        winners.append(choose_winner(params, WAD, client.samples, bids).winner)

    # assert: the free rider (fog 0) wins the smallest job only; the others split the rest in size order
    assert winners == [0, 1, 1, 2, 2]


def test_a_single_fog_is_fitted_to_the_largest_client_and_is_honest() -> None:
    roster = demo_roster(3, 1, 20, SCALE)

    assert [c.samples for c in roster.clients] == [10, 20, 30]
    assert roster.fogs[0].cost.frequency == 750_000_000 and roster.fogs[0].lazy is None


def test_required_funds_cover_budget_deposits_escrow_and_gas() -> None:
    config = DemoConfig(clients=2, fogs=2, rounds=3, samples_per_client=20)
    terms, roster = config.terms(), config.roster()

    funds = required_funds(
        roster, terms, 10**17, publisher="publisher", aggregator="aggregator", verifiers=("verifier-0",)
    )

    dearest = max(f.cost.price(30, terms.cycles_per_sample) for f in roster.fogs)  # client-1 holds 30 samples
    challenges = CHALLENGES_PER_PARTICIPANT * terms.effective_challenge_bond
    assert terms.bond(10**17) > 0 and challenges > 0
    assert funds["publisher"] == 10**17 + GAS_ALLOWANCE_WEI
    assert funds["aggregator"] == terms.bond(10**17) + GAS_ALLOWANCE_WEI
    assert funds["client-1"] == terms.client_deposit + 3 * dearest + challenges + GAS_ALLOWANCE_WEI
    assert funds["fog-0"] == funds["fog-1"] == 2 * terms.fog_deposit + challenges + GAS_ALLOWANCE_WEI
    assert funds["verifier-0"] == GAS_ALLOWANCE_WEI


def test_participant_keys_are_derived_again_identically_and_differ_by_name_and_salt() -> None:
    funder = bytes(range(32))

    again = participant_account(funder, "0xabc", "fog-0")

    assert again.address == participant_account(funder, "0xabc", "fog-0").address
    assert again.address != participant_account(funder, "0xabc", "fog-1").address
    assert again.address != participant_account(funder, "0xdef", "fog-0").address
