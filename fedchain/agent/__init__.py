"""What every long-running agent (fog node, aggregator, client) shares.

- :class:`Agent`: a polling loop over confirmed block ranges that saves its
  progress after every step, resumes where it stopped, rewinds when blocks it
  handled are reorganised away, and stops cleanly on SIGTERM/SIGINT.
- :class:`AgentState`: the persisted state (last block, jobs, pending
  transactions), saved atomically as JSON.
- :class:`AgentLogger`: log lines that end with ``agent=... round=... job=... tx=...``.

Two modules are imported by name, not from here, because they load web3:
:mod:`fedchain.agent.session` (:class:`~fedchain.agent.session.ChainSession`,
the deployment, signing key and blob store every command opens) and
:mod:`fedchain.agent.chainloop` (the loop over a session's chain and the
chain's clock).

A minimal agent that follows a contract's logs::

    w3 = Web3(Web3.HTTPProvider(rpc_url))

    def handle(blocks: BlockRange, state: AgentState) -> None:
        for entry in w3.eth.get_logs({"fromBlock": blocks.first, "toBlock": blocks.last, "address": address}):
            ...  # act, recording what was done in state.jobs / state.pending_txs

    settings = AgentSettings(name="fog-1", state_path=Path(".fedchain/fog-1.json"), start_block=deploy_block)
    Agent(settings, head=lambda: w3.eth.block_number, handle=handle, block_hash=block_hash_reader(w3)).run()

(:func:`fedchain.agent.chainloop.block_hash_reader`; pass ``on_reorg`` too when
the handler derives state from events that a reorganisation can take back.)
"""

from fedchain.agent.logs import AgentLogger, record_fields
from fedchain.agent.runtime import (
    Agent,
    AgentSettings,
    BlockHashReader,
    BlockRange,
    Handler,
    IdleHandler,
    ReorgHandler,
    next_range,
)
from fedchain.agent.state import AgentState, load_state, save_state, write_atomic

__all__ = [
    "Agent",
    "AgentLogger",
    "AgentSettings",
    "AgentState",
    "BlockHashReader",
    "BlockRange",
    "Handler",
    "IdleHandler",
    "ReorgHandler",
    "load_state",
    "next_range",
    "record_fields",
    "save_state",
    "write_atomic",
]
