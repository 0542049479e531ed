"""Amounts of a task's asset as people read them, and wei moved into a token's units."""

from __future__ import annotations

from fedchain.publisher.terms import TaskTerms
from fedchain.units import ETHER, Asset, is_ether, to_units


def test_an_asset_formats_its_smallest_units_with_symbol_and_decimals() -> None:
    usdc = Asset("0x" + "ab" * 20, "USDC", 6)
    assert usdc.format(12_500_000) == "12.5 USDC"
    assert usdc.format(1) == "0.000001 USDC"
    assert usdc.format(12_500_000, 2) == "12.50 USDC"
    assert Asset().format(10**16) == "0.01 ETH"
    assert Asset("0x" + "cd" * 20, "WHOLE", 0).format(7) == "7 WHOLE"
    assert is_ether(ETHER) and Asset().ether and not usdc.ether


def test_terms_in_a_token_move_every_amount_and_nothing_else() -> None:
    terms = TaskTerms(psi=10**15, phi=10**12, client_deposit=10**16, challenge_bond=None, rounds=4)
    # 1000 fcUSD (6 decimals) for one ether
    moved = terms.in_units(1000 * 10**6)
    assert (moved.psi, moved.phi, moved.client_deposit, moved.fog_deposit) == (10**6, 10**3, 10**7, 2 * 10**7)
    assert moved.challenge_bond is None and moved.effective_challenge_bond == 5 * 10**6
    assert (moved.rounds, moved.round_duration, moved.min_quality) == (4, terms.round_duration, terms.min_quality)
    assert to_units(10**17, 1000 * 10**6) == 10**8
