"""The chain seam: compile, deploy, typed contract wrappers, node launcher, event decoding.

The public API, importable from here (loaded on first use, so that importing
``fedchain.chain`` stays cheap):

* nodes: :class:`AnvilNode`, :class:`AnvilSettings`, :class:`InProcessChain`, :func:`connect`, :func:`free_port`
* keys: :func:`resolve_account` (``FEDCHAIN_PRIVATE_KEY`` or an encrypted keystore)
* block clock: :func:`block_interval`, :func:`next_block_time`, :class:`BlockInterval`
* sending: :class:`Transactor`, :class:`TxSettings`, :class:`PendingTx`, :class:`Receipt`
* transport: :class:`RetrySettings` (how long a failing JSON-RPC endpoint is retried)
* contracts: :class:`Contract` (any ABI); typed classes in :mod:`fedchain.chain.bindings`
* decoding: :class:`AbiRegistry`, :class:`CustomError`, :class:`ChainEvent`
* history: :func:`fetch_events`, :class:`LogQuery`
* deployments: :func:`deploy`, :class:`Deployment`, :func:`load_deployment`, :func:`open_deployment`
* compiling: :func:`compile_contracts`, :class:`Artifact`
"""

from __future__ import annotations

from fedchain._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "AnvilNode": "node",
    "AnvilSettings": "node",
    "InProcessChain": "node",
    "connect": "node",
    "free_port": "node",
    "resolve_account": "keys",
    "BlockInterval": "blocktime",
    "block_interval": "blocktime",
    "next_block_time": "blocktime",
    "Transactor": "tx",
    "TxSettings": "tx",
    "PendingTx": "tx",
    "Receipt": "tx",
    "RetrySettings": "rpc",
    "Contract": "contract",
    "AbiRegistry": "abi",
    "CustomError": "abi",
    "ChainEvent": "abi",
    "fetch_events": "events",
    "LogQuery": "events",
    "deploy": "deployment",
    "Deployment": "deployment",
    "load_deployment": "deployment",
    "open_deployment": "deployment",
    "DEFAULT_DEPLOYMENT_FILE": "deployment",
    "compile_contracts": "compile",
    "Artifact": "compile",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
