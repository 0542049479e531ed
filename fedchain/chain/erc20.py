"""The ERC-20 side of token tasks: the token's views, approving the Treasury, amounts with symbol and decimals.

A task's money is ether or one ERC-20 token (``Treasury.tokenOf``). Every amount the
contracts keep is in the asset's smallest unit; this module names those units for people
(``12.5 fcUSD`` for 12,500,000 units of a 6-decimal token) and lets agents pay in them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fedchain.chain.abi import EIP712_DOMAIN_TYPE
from fedchain.chain.contract import Contract
from fedchain.chain.tx import Receipt, Transactor
from fedchain.units import Asset, is_ether

if TYPE_CHECKING:
    from fedchain.chain.bindings import Treasury

log = logging.getLogger(__name__)

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
    # EIP-2612 and its domain (EIP-5267), for tokens that have them.
    _function("nonces", [("owner", "address")], ["uint256"], "view"),
    _function(
        "eip712Domain",
        [],
        ["bytes1", "string", "string", "uint256", "address", "bytes32", "uint256[]"],
        "view",
    ),
)
#: How long the permits an agent signs stay valid, seconds.
PERMIT_LIFETIME_S = 3600


def read_asset(transactor: Transactor, token: str) -> Asset:
    """The asset named by ``token``: ether for the zero address, else the token's symbol and decimals. A token that
    does not answer ``symbol()`` and ``decimals()`` as strings and a number (the contracts take it all the same) is
    named by its address, its amounts shown in its smallest unit."""
    if is_ether(token):
        return Asset()
    erc20 = Contract(transactor, token, ERC20_ABI)
    try:
        symbol, decimals = str(erc20.call("symbol")), int(erc20.call("decimals"))
    except Exception as err:  # noqa: BLE001 - any failure means the same: amounts stay in raw units
        log.warning("token %s does not answer symbol() and decimals(): amounts shown in its units (%s)", token, err)
        return Asset(token, f"units of {token}", 0)
    return Asset(token, symbol, decimals)


def allowance(transactor: Transactor, token: str, spender: str) -> int:
    """What ``spender`` may pull of the signing account's ``token`` now."""
    return int(Contract(transactor, token, ERC20_ABI).call("allowance", transactor.address, spender))


def ensure_allowance(transactor: Transactor, token: str, spender: str, amount: int) -> Receipt | None:
    """Approve ``spender`` (the Treasury) for ``token`` once, unlimited, if it may not yet pull ``amount``."""
    erc20 = Contract(transactor, token, ERC20_ABI)
    if allowance(transactor, token, spender) >= amount:
        return None
    log.info("approving the Treasury %s to pull %s from %s", spender, token, transactor.address)
    return erc20.transact("approve", spender, UNLIMITED)


@dataclass(frozen=True)
class PermitRequest:
    """What an EIP-2612 permit allows: ``owner`` lets ``spender`` pull ``value`` of the token until ``deadline``."""

    token: str
    #: The token's EIP-712 domain: its name (``name()`` for OpenZeppelin's ERC20Permit), version and chain.
    token_name: str
    chain_id: int
    owner: str
    spender: str
    value: int
    nonce: int
    deadline: int
    version: str = "1"

    def typed_data(self) -> dict[str, Any]:
        """The EIP-712 message (eth-account's ``full_message`` form)."""
        return {
            "types": {
                "EIP712Domain": list(EIP712_DOMAIN_TYPE),
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
                "version": self.version,
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


def task_asset(treasury: Treasury, task_id: int) -> str:
    """The asset of ``task_id``: its token's address, or :data:`ETHER`."""
    return str(treasury.token_of(task_id))


def payment_value(treasury: Treasury, task_id: int, amount: int) -> int:
    """The ``msg.value`` of a call that pays ``amount`` into ``task_id``: ``amount`` for an ether task; 0 for a
    token task, whose payments the Treasury pulls (approved here first, once, when the allowance is short)."""
    token = task_asset(treasury, task_id)
    if is_ether(token):
        return amount
    if amount:
        ensure_allowance(treasury.transactor, token, treasury.address, amount)
    return 0


def sign_permit(
    transactor: Transactor, token: str, spender: str, amount: int, now: int
) -> tuple[int, int, bytes, bytes] | None:
    """The signing account's EIP-2612 permit of ``amount`` of ``token`` for ``spender``, valid
    :data:`PERMIT_LIFETIME_S` from ``now`` (chain time); None when the token does not say its EIP-712 domain
    (EIP-5267) or has no ``nonces``: then the agent approves instead."""
    erc20 = Contract(transactor, token, ERC20_ABI)
    try:
        _fields, name, version, chain_id, verifying, _salt, _extensions = erc20.call("eip712Domain")
        nonce = int(erc20.call("nonces", transactor.address))
    except Exception:  # noqa: BLE001 - a token without EIP-5267 or EIP-2612: approve instead
        return None
    # The domain must be the usual four fields (EIP-5267 bitmap 0x0f: name, version, chainId, verifyingContract).
    if bytes(_fields) != b"\x0f" or int(verifying, 16) != int(token, 16):
        return None
    request = PermitRequest(
        token=token,
        token_name=str(name),
        chain_id=int(chain_id),
        owner=transactor.address,
        spender=spender,
        value=amount,
        nonce=nonce,
        deadline=now + PERMIT_LIFETIME_S,
        version=str(version),
    )
    return request.sign(transactor.account)
