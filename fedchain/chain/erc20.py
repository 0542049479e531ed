"""The ERC-20 side of token tasks: the token's views, approving the Treasury, amounts with symbol and decimals.

A task's money is ether or one ERC-20 token (``Treasury.tokenOf``). Every amount the
contracts keep is in the asset's smallest unit; this module names those units for people
(``12.5 fcUSD`` for 12,500,000 units of a 6-decimal token) and lets agents pay in them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from fedchain.chain.contract import Contract
from fedchain.chain.tx import Receipt, Transactor
from fedchain.errors import ChainError
from fedchain.units import WEI_PER_ETHER

log = logging.getLogger(__name__)

#: The asset key of ether: ``Treasury.tokenOf`` of an ether task.
ETHER = "0x" + "00" * 20
#: The allowance agents give the Treasury once: it can only pull what the owner's own FedChain calls pay.
UNLIMITED = 2**256 - 1


def _function(name: str, inputs: list[tuple[str, str]], outputs: list[str], mutability: str) -> dict[str, Any]:
    return {
        "type": "function",
        "name": name,
        "stateMutability": mutability,
        "inputs": [{"name": n, "type": t} for n, t in inputs],
        "outputs": [{"name": "", "type": t} for t in outputs],
    }


#: The part of ERC-20 FedChain uses.
ERC20_ABI: tuple[dict[str, Any], ...] = (
    _function("name", [], ["string"], "view"),
    _function("symbol", [], ["string"], "view"),
    _function("decimals", [], ["uint8"], "view"),
    _function("balanceOf", [("account", "address")], ["uint256"], "view"),
    _function("allowance", [("owner", "address"), ("spender", "address")], ["uint256"], "view"),
    # Tokens such as USDT return nothing from approve: the ABI declares no output, the receipt's status says it all.
    _function("approve", [("spender", "address"), ("value", "uint256")], [], "nonpayable"),
    # EIP-2612, for tokens that have it.
    _function("nonces", [("owner", "address")], ["uint256"], "view"),
)


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

    def format(self, units: int, places: int | None = None) -> str:
        """``units`` (the smallest unit) with the symbol: ``12.5 fcUSD``, ``0.01 ETH``; ``places`` fixes the decimals."""
        amount = Decimal(int(units)) / (10**self.decimals)
        text = f"{amount:f}" if places is None else f"{amount:.{places}f}"
        if places is None and "." in text:
            text = text.rstrip("0").rstrip(".")
        return f"{text} {self.symbol}"

    def from_wei_scale(self, wei: int) -> int:
        """An amount written for ether (1e18 per whole unit) in this asset's units, one whole unit for one ether:
        how the demo turns its ether-sized defaults into a token's."""
        return int(wei) * 10**self.decimals // WEI_PER_ETHER


def read_asset(transactor: Transactor, token: str) -> Asset:
    """The asset named by ``token``: ether for the zero address, else the token's symbol and decimals."""
    if is_ether(token):
        return Asset()
    erc20 = Contract(transactor, token, ERC20_ABI)
    try:
        symbol, decimals = str(erc20.call("symbol")), int(erc20.call("decimals"))
    except Exception as err:  # noqa: BLE001 - any failure means the same: this is no ERC-20 we can name
        raise ChainError(
            f"{token} does not answer symbol() and decimals() as an ERC-20 token does: {err}",
            hint="check the token address (and the --rpc-url's chain)",
        ) from None
    if not 0 <= decimals <= 18:
        raise ChainError(f"token {symbol} at {token} has {decimals} decimals", hint="FedChain takes 0 to 18 decimals")
    return Asset(token, symbol, decimals)


def ensure_allowance(transactor: Transactor, token: str, spender: str, amount: int) -> Receipt | None:
    """Approve ``spender`` (the Treasury) for ``token`` once, unlimited, if it may not yet pull ``amount``."""
    erc20 = Contract(transactor, token, ERC20_ABI)
    if int(erc20.call("allowance", transactor.address, spender)) >= amount:
        return None
    log.info("approving the Treasury %s to pull %s from %s", spender, token, transactor.address)
    return erc20.transact("approve", spender, UNLIMITED)


@dataclass(frozen=True)
class PermitRequest:
    """What an EIP-2612 permit allows: ``owner`` lets ``spender`` pull ``value`` of the token until ``deadline``."""

    token: str
    #: The token's EIP-712 domain name (its ``name()``) and the chain it lives on.
    token_name: str
    chain_id: int
    owner: str
    spender: str
    value: int
    nonce: int
    deadline: int

    def typed_data(self) -> dict[str, Any]:
        """The EIP-712 message (eth-account's ``full_message`` form), version "1" as OpenZeppelin's ERC20Permit."""
        return {
            "types": {
                "EIP712Domain": [
                    {"name": "name", "type": "string"},
                    {"name": "version", "type": "string"},
                    {"name": "chainId", "type": "uint256"},
                    {"name": "verifyingContract", "type": "address"},
                ],
                "Permit": [
                    {"name": "owner", "type": "address"},
                    {"name": "spender", "type": "address"},
                    {"name": "value", "type": "uint256"},
                    {"name": "nonce", "type": "uint256"},
                    {"name": "deadline", "type": "uint256"},
                ],
            },
            "primaryType": "Permit",
            "domain": {
                "name": self.token_name,
                "version": "1",
                "chainId": self.chain_id,
                "verifyingContract": self.token,
            },
            "message": {
                "owner": self.owner,
                "spender": self.spender,
                "value": self.value,
                "nonce": self.nonce,
                "deadline": self.deadline,
            },
        }

    def sign(self, account: Any) -> tuple[int, int, bytes, bytes]:
        """``account``'s signature as the contracts' ``ITreasury.Permit``: (deadline, v, r, s)."""
        from eth_account.messages import encode_typed_data

        signed = account.sign_message(encode_typed_data(full_message=self.typed_data()))
        return (self.deadline, signed.v, signed.r.to_bytes(32, "big"), signed.s.to_bytes(32, "big"))
