"""A deployment's history comes back as typed events, in chain order, however it is paged."""

from __future__ import annotations

import dataclasses
from operator import attrgetter

import pytest
from web3 import Web3

from fedchain.chain.abi import AbiRegistry, ChainEvent
from fedchain.chain.compile import Artifact
from fedchain.chain.contract import Contract
from fedchain.chain.events import LogQuery, events_of, fetch_events
from fedchain.chain.node import AnvilNode
from fedchain.chain.tx import Transactor


@pytest.fixture()
def history(anvil: AnvilNode, w3: Web3, probe_artifact: Artifact) -> tuple[Contract, Contract, int]:
    """Two Probes and five events across them, in a known order; returns both and the first block."""
    transactor = Transactor(w3, anvil.dev_account(3), AbiRegistry())
    first = Contract.deploy(transactor, probe_artifact.bytecode, 0, abi=probe_artifact.abi)
    second = Contract.deploy(transactor, probe_artifact.bytecode, 0, abi=probe_artifact.abi)
    start = first.transact("store", 11, "a").block_number
    second.transact("store", 12, "b")
    first.transact("pair", 7, (9, transactor.address), [1, 2, 3])
    second.transact("pay", value=5)
    first.transact("store", 13, "c")
    return first, second, start


@pytest.mark.parametrize("page_size", [1, 2, 5_000])
def test_fetch_returns_every_event_in_chain_order_whatever_the_page_size(
    history: tuple[Contract, Contract, int], w3: Web3, page_size: int
) -> None:
    first, second, start = history

    events = fetch_events(
        w3, first.transactor.registry, LogQuery((first.address, second.address), start, None, page_size)
    )

    assert [type(e).__name__ for e in events] == ["Stored", "Stored", "Paired", "Paid", "Stored"]
    assert [e.position for e in events] == sorted(e.position for e in events)
    assert [e.address for e in events] == [first.address, second.address, first.address, second.address, first.address]
    assert [getattr(e, "value", None) for e in events] == [11, 12, None, None, 13]


def test_events_are_frozen_dataclasses_with_decoded_struct_and_array(
    history: tuple[Contract, Contract, int], w3: Web3
) -> None:
    first, _, start = history
    registry = first.transactor.registry

    events = fetch_events(w3, registry, LogQuery((first.address,), start))
    (paired,) = events_of(events, registry.event("Paired"))  # a class built from Probe's ABI at run time

    assert isinstance(paired, ChainEvent) and dataclasses.is_dataclass(paired)
    paired_id, pair, flags = attrgetter("id", "pair", "flags")(paired)
    assert paired_id == 7
    assert tuple(pair) == (9, first.transactor.address)
    assert flags == (1, 2, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        paired.__setattr__("id", 8)


def test_block_range_limits_the_events(history: tuple[Contract, Contract, int], w3: Web3) -> None:
    first, second, start = history

    events = fetch_events(
        w3, first.transactor.registry, LogQuery((first.address, second.address), start + 1, start + 2)
    )

    assert [e.block_number for e in events] == [start + 1, start + 2]


def test_bad_query_is_rejected() -> None:
    with pytest.raises(ValueError, match="block range"):
        LogQuery(("0x" + "00" * 20,), from_block=5, to_block=4)
