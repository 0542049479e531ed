"""Reading a deployment's history: every known event in a block range, typed and in chain order.

The auditor rebuilds all state from these events alone, so the fetch is
exhaustive: it pages ``eth_getLogs`` over the range (nodes cap how many blocks
or logs one request may cover) and halves a page the node refuses as too large.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eth_utils import to_checksum_address
from web3 import Web3

from fedchain.chain.abi import AbiRegistry, ChainEvent, E
from fedchain.errors import ChainError

if TYPE_CHECKING:
    from fedchain.chain.deployment import Deployment

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LogQuery:
    """Which logs to fetch: the contracts, and the first and last block (both included)."""

    addresses: tuple[str, ...]
    from_block: int = 0
    #: None: the latest block when the fetch starts.
    to_block: int | None = None
    #: Blocks per eth_getLogs request.
    page_size: int = 5_000
    #: Values the logs' indexed fields (topics 1, 2, ...) must have, as 32-byte words; empty: any.
    indexed: tuple[bytes, ...] = ()

    @classmethod
    def of(cls, deployment: Deployment, *, to_block: int | None = None, page_size: int = 5_000) -> LogQuery:
        """Every contract of ``deployment``, from its first block to ``to_block`` (None: the latest)."""
        return cls(tuple(c.address for c in deployment.contracts), deployment.block_number, to_block, page_size)

    def __post_init__(self) -> None:
        if not self.addresses:
            raise ValueError("a log query needs at least one contract address")
        if self.from_block < 0 or (self.to_block is not None and self.to_block < self.from_block):
            raise ValueError(f"bad block range {self.from_block}..{self.to_block}")
        if self.page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {self.page_size}")


def fetch_events(w3: Web3, registry: AbiRegistry, query: LogQuery) -> list[ChainEvent]:
    """Every event ``registry`` knows, emitted by ``query.addresses`` in the block range, ordered by (block, log index)."""
    return sorted(iter_events(w3, registry, query))


def iter_events(w3: Web3, registry: AbiRegistry, query: LogQuery) -> Iterator[ChainEvent]:
    """Like :func:`fetch_events`, page by page (chain order within and across pages), without holding them all."""
    last = int(w3.eth.block_number) if query.to_block is None else query.to_block
    addresses = [to_checksum_address(a) for a in query.addresses]
    topics = ["0x" + t.hex() for t in registry.topics]
    if not topics:
        return
    filters: list[Any] = [topics, *("0x" + word.hex() for word in query.indexed)]
    start, size = query.from_block, query.page_size
    while start <= last:
        end = min(start + size - 1, last)
        try:
            logs = w3.eth.get_logs({"address": addresses, "fromBlock": start, "toBlock": end, "topics": filters})
        except Exception as err:  # a node's "range too large" comes in many shapes
            if size == 1:
                raise ChainError(f"eth_getLogs failed for block {start}: {err}") from err
            size = max(1, size // 2)
            log.debug("eth_getLogs refused %d..%d (%s); retrying with %d blocks", start, end, err, size)
            continue
        yield from registry.decode_logs(logs)
        start = end + 1


def task_events(w3: Web3, address: str, cls: type[E], task_id: int, *, from_block: int) -> Iterator[E]:
    """The ``cls`` events of task ``task_id`` (their first indexed field) that the contract at ``address`` emitted
    from ``from_block`` on, in chain order: one filtered ``eth_getLogs`` per page, not the deployment's every event."""
    query = LogQuery((address,), from_block, indexed=(task_id.to_bytes(32, "big"),))
    for event in iter_events(w3, AbiRegistry(events=[cls]), query):
        if isinstance(event, cls):
            yield event


def events_of(events: Iterable[ChainEvent], cls: type[E]) -> list[E]:
    """The events of type ``cls``, in the given order."""
    return [e for e in events if isinstance(e, cls)]
