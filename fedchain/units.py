"""The contracts' units: wei and ether, and the 1e18 fixed point of reputations, qualities and accuracies."""

from __future__ import annotations

from decimal import Decimal

#: One in the contracts' 1e18 fixed point (``WAD`` in Solidity's fixed-point libraries).
WAD = 10**18
#: Wei in one ether.
WEI_PER_ETHER = 10**18


def ether(wei: int | str, places: int | None = None) -> str:
    """Wei as ether: with ``places`` decimals (``0.012500`` for 6), or exactly when ``None`` (``0.0125``)."""
    amount = Decimal(int(wei)) / WEI_PER_ETHER
    return f"{amount:f}" if places is None else f"{amount:.{places}f}"


def fixed(value: int, places: int) -> str:
    """A 1e18 fixed-point value as a decimal with ``places`` decimals (``1.2500`` for 4)."""
    return f"{Decimal(value) / WAD:.{places}f}"
