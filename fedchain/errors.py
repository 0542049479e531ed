"""FedChain's one exception tree.

Every error the project raises on purpose derives from :class:`FedchainError`.
Each carries a ``hint``: what the user should do about it. The command line
catches ``FedchainError`` in one place, prints the message and the hint, and
exits non-zero; nothing else in the code base prints errors.
"""

from __future__ import annotations


class FedchainError(Exception):
    """Base of every error FedChain raises on purpose."""

    #: What the user should do; subclasses set a default, callers may refine it.
    hint: str = ""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint

    def __str__(self) -> str:
        message = super().__str__()
        return f"{message}\n  hint: {self.hint}" if self.hint else message


class ConfigError(FedchainError):
    """A configuration file, flag or parameter is invalid."""

    hint = "check the option against `fedchain COMMAND --help`"


class DataError(FedchainError):
    """A dataset, data root or partition cannot be used."""

    hint = "point --data-root (or FEDCHAIN_DATA_ROOT) at a folder holding the dataset files"


class ModelError(FedchainError):
    """A model name or model parameters are invalid."""


class UpdateRejected(FedchainError):
    """A client update is malformed (wrong hash, shape, dtype, NaN/inf, size) and was not aggregated."""

    hint = "the update was excluded from the round; the client's quality check fails"


class StoreError(FedchainError):
    """The blob store cannot read or write an object."""

    hint = "check the --store URL and that the folder or bucket is reachable"


class ChainError(FedchainError):
    """The chain cannot be reached or used (RPC, node, keys, deployment)."""

    hint = "check --rpc-url and that the node is running"


class ContractRevert(ChainError):
    """A transaction or call reverted; subclasses are named after the contract's custom error."""

    hint = "the contract refused the call; the error's name and arguments say why"


class AgentError(FedchainError):
    """A long-running agent (fog node, aggregator, client) cannot proceed."""
