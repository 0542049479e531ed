"""What the agent tests do to their Anvil: mine, emit toy events, and reorganise recent blocks.

The emitter is a contract that emits LOG1 with the first calldata word as its
topic, assembled by hand (no compiler needed)::

    runtime  PUSH1 0; CALLDATALOAD; PUSH1 0; PUSH1 0; LOG1; STOP     (LOG1(offset 0, size 0, topic))
    init     PUSH1 9; PUSH1 12; PUSH1 0; CODECOPY; PUSH1 9; PUSH1 0; RETURN   (copy the 9 runtime bytes at 12)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from web3 import Web3

from fedchain.agent import AgentSettings

EMITTER_RUNTIME = "60003560006000a100"
EMITTER_INIT = "6009600c60003960096000f3" + EMITTER_RUNTIME


def mine(w3: Web3, blocks: int) -> None:
    """Mine ``blocks`` empty blocks on Anvil."""
    w3.provider.make_request("anvil_mine", [hex(blocks)])


def settings_for(tmp_path: Path, chain: Web3, **overrides: Any) -> AgentSettings:
    """Settings of an agent that starts at the block after the chain's current head."""
    values = {
        "name": "probe",
        "state_path": tmp_path / "state.json",
        "start_block": chain.eth.block_number + 1,
        "poll_interval_s": 0.01,
    } | overrides
    return AgentSettings(**values)


def deploy_emitter(w3: Web3) -> str:
    sender = w3.eth.accounts[0]
    receipt = w3.eth.wait_for_transaction_receipt(
        w3.eth.send_transaction({"from": sender, "data": "0x" + EMITTER_INIT})
    )
    assert w3.eth.get_code(receipt["contractAddress"]).hex() == EMITTER_RUNTIME
    return receipt["contractAddress"]


def emit_tx(w3: Web3, emitter: str, topic: int) -> dict[str, Any]:
    """The transaction that makes ``emitter`` emit one event with ``topic``."""
    return {"from": w3.eth.accounts[0], "to": emitter, "data": "0x" + topic.to_bytes(32, "big").hex()}


def emit(w3: Web3, emitter: str, *topics: int) -> None:
    """Emit one event per topic, each in a block of its own (Anvil mines one block per transaction)."""
    for topic in topics:
        w3.eth.wait_for_transaction_receipt(w3.eth.send_transaction(emit_tx(w3, emitter, topic)))


def reorganise(w3: Web3, emitter: str, depth: int, topics: dict[int, int]) -> None:
    """Replace the chain's ``depth`` newest blocks by as many new ones, where block ``offset`` (0: the oldest
    replaced) emits ``topics[offset]``; the head's number stays."""
    txs = [[emit_tx(w3, emitter, topic), offset] for offset, topic in topics.items()]
    answer = w3.provider.make_request("anvil_reorg", [depth, txs])
    assert "error" not in answer, answer


def snapshot(w3: Web3) -> str:
    """Anvil's id of the chain as it is now, for :func:`revert`."""
    return str(w3.provider.make_request("evm_snapshot", [])["result"])


def revert(w3: Web3, snapshot_id: str) -> None:
    """Drop every block after ``snapshot_id`` was taken: the chain gets shorter."""
    assert w3.provider.make_request("evm_revert", [snapshot_id])["result"] is True
