"""FedChain: an incentive platform for federated learning on an Ethereum chain."""

from fedchain.errors import (
    AgentError,
    ChainError,
    ConfigError,
    ContractRevert,
    DataError,
    FedchainError,
    ModelError,
    StoreError,
    UpdateRejected,
)

__version__ = "0.1.0"

__all__ = [
    "AgentError",
    "ChainError",
    "ConfigError",
    "ContractRevert",
    "DataError",
    "FedchainError",
    "ModelError",
    "StoreError",
    "UpdateRejected",
    "__version__",
]
