"""What the client and fog-node agents share: their loop over a session's chain, and the chain's clock.

The loop reads block hashes (:func:`block_hash_reader`), so an agent whose
handled blocks are reorganised away rewinds and handles the new ones; an agent
that derives state from events passes ``on_reorg`` to forget what came from
the vanished blocks.

A development chain (Anvil, automining) makes a block only when a transaction
arrives, so between transactions its latest block's timestamp stands still
while time passes: the next block will carry the wall clock's time. Gas
estimation runs against the latest block, so a call that is due only after a
deadline (a reveal, closing an auction) is refused by the estimate although
the block it would land in is on time. :func:`transact_when_due` then sends it
with a fixed gas limit, and the block it creates carries the current time. On
a public chain, blocks keep coming and the estimate succeeds in the first place.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from web3 import Web3
from web3.exceptions import BlockNotFound

from fedchain.agent import Agent, AgentSettings, BlockHashReader, Handler, IdleHandler, ReorgHandler
from fedchain.agent.session import ChainSession
from fedchain.chain.contract import Contract
from fedchain.chain.tx import Receipt


def session_agent(
    session: ChainSession,
    *,
    name: str,
    state_path: Path,
    confirmations: int,
    poll_interval_s: float,
    handle: Handler,
    idle: IdleHandler,
    on_reorg: ReorgHandler | None = None,
) -> Agent:
    """The shared agent loop over ``session``'s chain, starting at the deployment's first block.

    It follows reorganisations by the chain's block hashes; ``on_reorg`` (see
    :data:`~fedchain.agent.ReorgHandler`) is called after each rewind.
    """
    settings = AgentSettings(
        name=name,
        state_path=state_path,
        start_block=session.deployment.block_number,
        confirmations=confirmations,
        poll_interval_s=poll_interval_s,
        owner=session.address,
    )
    return Agent(
        settings,
        head=lambda: int(session.w3.eth.block_number),
        handle=handle,
        idle=idle,
        block_hash=block_hash_reader(session.w3),
        on_reorg=on_reorg,
    )


def block_hash_reader(w3: Web3) -> BlockHashReader:
    """``block_hash(number)`` on ``w3``'s chain, for :class:`~fedchain.agent.Agent`: ``None`` past the head."""

    def block_hash(number: int) -> bytes | None:
        try:
            return bytes(w3.eth.get_block(number)["hash"])
        except BlockNotFound:
            return None

    return block_hash


def chain_now(session: ChainSession) -> int:
    """The time of the chain's next block (:class:`~fedchain.chain.blocktime.ChainClock`): what a transaction
    sent now will most likely see as ``block.timestamp``, so what agents check deadlines against."""
    return session.clock.next_block_time()


def transact_when_due(
    contract: Contract,
    signature: str,
    *args: Any,
    value: int = 0,
    gas: int,
    too_early: tuple[type[Exception], ...],
) -> Receipt:
    """Send ``signature(args)``, which :func:`chain_now` says is due; when the estimate refuses it with
    one of ``too_early`` (measured on a stale latest block), send it anyway with ``gas`` as its limit.

    A call that is still too early in the block it lands in raises its decoded revert, as any other.
    """
    try:
        return contract.transact(signature, *args, value=value)
    except too_early:
        return contract.transactor.send(contract.address, contract.encode(signature, *args), value=value, gas=gas)
