"""Reading what the auditor needs from the chain: every event of the deployment, and the views at the same block.

This is the audit's only chain access. It signs nothing: the contracts are read
through a :class:`~fedchain.chain.tx.Transactor` whose sender is the zero
address and which refuses to send.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from eth_utils import to_checksum_address
from web3 import Web3

from fedchain.audit.money import asset_of_tasks
from fedchain.audit.views import AssetViews, ChainViews, TaskViews, TreasuryViews
from fedchain.chain import bindings as b
from fedchain.chain.abi import AbiRegistry, ChainEvent
from fedchain.chain.contract import Contract
from fedchain.chain.deployment import Deployment
from fedchain.chain.erc20 import ERC20_ABI, read_asset
from fedchain.chain.events import LogQuery, fetch_events
from fedchain.chain.tx import Receipt, Transactor
from fedchain.errors import ChainError, ConfigError
from fedchain.units import ETHER, Asset

log = logging.getLogger(__name__)

#: The sender of the auditor's eth_calls.
READER_ADDRESS = to_checksum_address("0x" + "00" * 20)


class _ReadOnly(Transactor):
    """A transactor for views only: calls come from the zero address; sending is refused."""

    def __init__(self, w3: Web3) -> None:
        super().__init__(w3, account=None, registry=AbiRegistry().merged(b.REGISTRY))

    @property
    def address(self) -> str:
        return READER_ADDRESS

    def send(self, to: str | None, data: bytes, *, value: int = 0, gas: int | None = None) -> Receipt:
        raise ChainError("the auditor only reads the chain", hint="this is a bug: report it")


@dataclass(frozen=True)
class ChainReadings:
    """A deployment's events up to ``views.block_number`` and the views at that block."""

    events: tuple[ChainEvent, ...]
    views: ChainViews


def read_chain(
    w3: Web3, deployment: Deployment, task_id: int, *, to_block: int | None = None, page_size: int = 5_000
) -> ChainReadings:
    """Every event of the deployment from its first block to ``to_block`` (default: latest), and the views there."""
    block = int(w3.eth.block_number) if to_block is None else to_block
    query = LogQuery(tuple(deployment.addresses.values()), deployment.block_number, block, page_size)
    events = tuple(fetch_events(w3, b.REGISTRY, query))
    log.info("read %d events of blocks %d..%d", len(events), deployment.block_number, block)
    return ChainReadings(events=events, views=read_views(w3, deployment, task_id, events, block))


def read_views(
    w3: Web3, deployment: Deployment, task_id: int, events: tuple[ChainEvent, ...], block: int
) -> ChainViews:
    """The task's and the Treasury's views at ``block`` (a revert, e.g. an unknown task, raises its decoded error)."""
    reader = _ReadOnly(w3)
    registry = b.TaskRegistry(reader, deployment.address("TaskRegistry"))
    ledger = b.RoundLedger(reader, deployment.address("RoundLedger"))
    auction = b.FogAuction(reader, deployment.address("FogAuction"))
    treasury = b.Treasury(reader, deployment.address("Treasury"))
    disputes = b.Disputes(reader, deployment.address("Disputes"))

    def at(contract: Contract, signature: str, *args: object) -> Any:
        """The view ``signature(args)`` at ``block``, decoded by its ABI (the fields below name the types)."""
        return contract.call(signature, *args, block=block)

    tasks = int(at(registry, "taskCount"))
    if not 1 <= task_id <= tasks:
        raise ConfigError(
            f"task {task_id} does not exist on this deployment at block {block} ({tasks} task(s) so far)",
            hint=f"pass --task with an id from 1 to {tasks}"
            if tasks
            else "create a task first (`fedchain task create`)",
        )
    clients = int(at(ledger, "clientCount", task_id))
    task = TaskViews(
        params=at(registry, "params", task_id),
        state=at(registry, "state", task_id),
        clients=tuple(at(ledger, "client", task_id, i) for i in range(clients)),
        deposits_held=at(ledger, "depositsHeld", task_id),
        rewards_held=at(ledger, "rewardsHeld", task_id),
        settled=at(ledger, "settled", task_id),
        jobs=tuple(at(auction, "job", task_id, i) for i in range(clients)),
        auction_held=at(auction, "heldFor", task_id),
        treasury_held=at(treasury, "held", task_id),
        disputes_held=at(disputes, "heldFor", task_id),
        rounds=tuple(at(ledger, "rounds", task_id)),
    )
    assets = asset_of_tasks(events)
    credited: dict[str, set[str]] = {}
    for event in events:
        if isinstance(event, b.Credited):
            credited.setdefault(assets.get(event.task_id, ETHER), set()).add(event.to)
    tokens = {}
    for token in sorted(set(assets.values())):
        erc20 = Contract(reader, token, ERC20_ABI)
        tokens[token] = AssetViews(
            balance=int(erc20.call("balanceOf", treasury.address, block=block)),
            totals=at(treasury, "totalsIn", token),
            claimable={a: at(treasury, "claimableIn", token, a) for a in sorted(credited.get(token, ()))},
        )
    treasury_views = TreasuryViews(
        balance=int(w3.eth.get_balance(treasury.address, block)),
        totals=at(treasury, "totals"),
        claimable={account: at(treasury, "claimable", account) for account in sorted(credited.get(ETHER, ()))},
        tokens=tokens,
    )
    return ChainViews(block_number=block, task=task, treasury=treasury_views)


def read_task_asset(w3: Web3, events: tuple[ChainEvent, ...], task_id: int) -> Asset:
    """The money of ``task_id``: ether, or the token its ``TokenBound`` event names, with symbol and decimals."""
    token = asset_of_tasks(events).get(task_id)
    return Asset() if token is None else read_asset(_ReadOnly(w3), token)
