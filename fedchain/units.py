"""The contracts' units: wei and ether, and the 1e18 fixed point of reputations, qualities and accuracies."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation, localcontext

from fedchain.errors import ConfigError

#: One in the contracts' 1e18 fixed point (``WAD`` in Solidity's fixed-point libraries).
WAD = 10**18
#: Wei in one ether.
WEI_PER_ETHER = 10**18
#: Units an amount may be written in, as wei per unit.
WEI_UNITS: dict[str, int] = {"wei": 1, "gwei": 10**9, "ether": 10**18, "eth": 10**18}
#: Significant digits of the arithmetic that parses amounts: every uint256 (78 digits) exactly; Decimal's
#: default of 28 would round a budget of 2^96 wei and let it pass as another amount.
AMOUNT_DIGITS = 80


def ether(wei: int | str, places: int | None = None) -> str:
    """Wei as ether: with ``places`` decimals (``0.012500`` for 6), or exactly when ``None`` (``0.0125``)."""
    amount = Decimal(int(wei)) / WEI_PER_ETHER
    return f"{amount:f}" if places is None else f"{amount:.{places}f}"


def fixed(value: int, places: int) -> str:
    """A 1e18 fixed-point value as a decimal with ``places`` decimals (``1.2500`` for 4)."""
    return f"{Decimal(value) / WAD:.{places}f}"


def parse_wei(value: int | str) -> int:
    """An amount in wei from an integer, or text such as ``"1e15"``, ``"0.01ether"`` or ``"5 gwei"``."""
    if isinstance(value, bool):
        raise ConfigError(f"an amount must be a number of wei, got {value!r}")
    if isinstance(value, int):
        amount = Decimal(value)
    else:
        text = str(value).strip().lower().replace("_", "")
        unit = next((u for u in sorted(WEI_UNITS, key=len, reverse=True) if text.endswith(u)), "wei")
        number = text.removesuffix(unit).strip() if text.endswith(unit) else text
        try:
            with localcontext(prec=AMOUNT_DIGITS):
                amount = Decimal(number) * WEI_UNITS[unit]
        except InvalidOperation as err:
            raise ConfigError(
                f"{value!r} is not an amount", hint="write wei as an integer, or a number with a unit: 0.5ether, 20gwei"
            ) from err
    if amount != amount.to_integral_value() or amount < 0:
        raise ConfigError(f"{value!r} is not a whole, non-negative number of wei")
    return int(amount)
