"""The contracts' units: wei and ether, and the 1e18 fixed point of reputations, qualities and accuracies."""

from __future__ import annotations

from dataclasses import dataclass
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
#: The asset key of ether: ``Treasury.tokenOf`` of an ether task.
ETHER = "0x" + "00" * 20


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


def is_ether(asset: str | None) -> bool:
    """Whether ``asset`` (a ``tokenOf`` result) names ether."""
    return asset is None or int(asset, 16) == 0


@dataclass(frozen=True)
class Asset:
    """A task's asset as people read it: ether, or a token's address, symbol and decimals."""

    address: str = ETHER
    symbol: str = "ETH"
    decimals: int = 18

    @property
    def ether(self) -> bool:
        return is_ether(self.address)

    def number(self, units: int, places: int | None = None) -> str:
        """``units`` (the smallest unit) in whole units, no symbol: ``12.5``; ``places`` fixes the decimals."""
        amount = Decimal(int(units)) / (10**self.decimals)
        text = f"{amount:f}" if places is None else f"{amount:.{places}f}"
        if places is None and "." in text:
            text = text.rstrip("0").rstrip(".")
        return text

    def format(self, units: int, places: int | None = None) -> str:
        """``units`` with the symbol: ``12.5 fcUSD``, ``0.01 ETH``; ``places`` fixes the decimals."""
        return f"{self.number(units, places)} {self.symbol}"


def to_units(wei: int, units_per_ether: int) -> int:
    """An amount written in wei in another asset, ``units_per_ether`` of its smallest units for one ether (rounded down)."""
    return int(wei) * units_per_ether // WEI_PER_ETHER
