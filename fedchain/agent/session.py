"""One process's connection to FedChain: the chain (deployment, signing key, typed contracts) and the blob store.

Every command of the publisher and the aggregator opens one :class:`ChainSession`
with :func:`open_session` from the same four options (``--deployment``,
``--rpc-url``, ``--keystore``, ``--store``; :func:`session_options`), so all of
them connect the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click
from eth_account import Account
from eth_account.signers.local import LocalAccount
from web3 import Web3

from fedchain.chain.bindings import FedChainContracts
from fedchain.chain.blocktime import ChainClock
from fedchain.chain.deployment import DEFAULT_DEPLOYMENT_FILE, Deployment, open_deployment
from fedchain.chain.keys import KEYSTORE_PASSWORD_ENV, PRIVATE_KEY_ENV, resolve_account
from fedchain.chain.tx import Transactor, TxSettings
from fedchain.errors import FedchainError, SigningKeyError
from fedchain.store import DEFAULT_STORE_URL, BlobStore, open_store

F = TypeVar("F", bound=Callable[..., Any])

#: Environment variables for the deployment file and the blob store, which every participant of a task shares.
DEPLOYMENT_ENV = "FEDCHAIN_DEPLOYMENT"
STORE_ENV = "FEDCHAIN_STORE"


@dataclass(frozen=True)
class ChainSession:
    """The deployed contracts, sending as one account, and the blob store."""

    w3: Web3
    deployment: Deployment
    transactor: Transactor
    contracts: FedChainContracts
    store: BlobStore
    #: The chain's clock: when its next block comes (agents plan against it, not against this machine's clock).
    clock: ChainClock = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "clock", ChainClock(self.w3))

    @property
    def address(self) -> str:
        """The signing account's checksum address."""
        return self.transactor.address

    def block_time(self, block: int | str = "latest") -> int:
        """A block's timestamp, seconds."""
        return int(self.w3.eth.get_block(block)["timestamp"])


def open_session(
    deployment_file: Path = DEFAULT_DEPLOYMENT_FILE,
    *,
    rpc_url: str | None = None,
    store_url: str = DEFAULT_STORE_URL,
    keystore: Path | None = None,
    account: LocalAccount | None = None,
    read_only: bool = False,
    tx_settings: TxSettings | None = None,
) -> ChainSession:
    """Connect to the deployment's chain (or ``rpc_url``), verify it, and sign as ``account`` or the configured key.

    ``read_only``: a command that only reads runs without a key too; its session
    then holds a throw-away account with no funds, which can call but never pay.
    """
    w3, deployment = open_deployment(deployment_file, rpc_url=rpc_url)
    account = account or resolve_account(keystore)
    if account is None:
        if not read_only:
            raise SigningKeyError("no signing key: this command sends transactions")
        account = Account.create()
    transactor = Transactor(w3, account, settings=tx_settings or TxSettings())
    return ChainSession(
        w3=w3,
        deployment=deployment,
        transactor=transactor,
        contracts=FedChainContracts.bind(deployment, transactor),
        store=open_store(store_url),
    )


#: The names of the values :func:`session_options` adds to a command, in :func:`session_from_options`'s order.
SESSION_OPTIONS = ("deployment_file", "rpc_url", "keystore", "store_url", "max_fee")


def _chain_options() -> list[Callable[[Any], Any]]:
    """``--deployment`` and ``--rpc-url``."""
    return [
        click.option(
            "--deployment",
            "deployment_file",
            type=click.Path(dir_okay=False, path_type=Path),
            default=DEFAULT_DEPLOYMENT_FILE,
            show_default=True,
            envvar=DEPLOYMENT_ENV,
            help=f"The deployment file written by `fedchain deploy` (or ${DEPLOYMENT_ENV}).",
        ),
        click.option("--rpc-url", help="JSON-RPC URL of the chain. Default: the one in the deployment file."),
    ]


def _store_option() -> Callable[[Any], Any]:
    return click.option(
        "--store",
        "store_url",
        default=DEFAULT_STORE_URL,
        show_default=True,
        envvar=STORE_ENV,
        help=f"Blob store for specs, models and updates: a folder or any fsspec URL (s3://bucket/prefix); or ${STORE_ENV}.",
    )


def session_options(function: F) -> F:
    """The ``--deployment``, ``--rpc-url``, ``--keystore``, ``--store`` and ``--max-fee`` options of every command
    that signs."""
    options = [
        *_chain_options(),
        click.option(
            "--keystore",
            type=click.Path(dir_okay=False, path_type=Path),
            help=f"Encrypted JSON keystore of the signing account (password from {KEYSTORE_PASSWORD_ENV}); "
            f"default: the hex key in {PRIVATE_KEY_ENV}.",
        ),
        _store_option(),
        click.option(
            "--max-fee",
            "max_fee",
            callback=_parse_fee_cap,
            metavar="AMOUNT",
            help="The most this account pays per unit of gas (EIP-1559 max fee), e.g. 50gwei. A stuck transaction "
            "is re-sent with higher fees up to it; while the chain's base fee is above it, transactions wait, then "
            "fail saying so.  [default: no cap]",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


#: The names of the values :func:`read_options` adds to a command, in :func:`read_session`'s order.
READ_OPTIONS = ("deployment_file", "rpc_url", "store_url")


def read_options(function: F) -> F:
    """The ``--deployment``, ``--rpc-url`` and ``--store`` options of a command that only reads (no key, no fees)."""
    for option in reversed([*_chain_options(), _store_option()]):
        function = option(function)
    return function


def read_session(deployment_file: Path, rpc_url: str | None, store_url: str) -> ChainSession:
    """A keyless session (:func:`open_session` with ``read_only``) from the values of :func:`read_options`."""
    return open_session(deployment_file, rpc_url=rpc_url, store_url=store_url, read_only=True)


def session_from_options(
    deployment_file: Path,
    rpc_url: str | None,
    keystore: Path | None,
    store_url: str,
    max_fee: int | None = None,
    *,
    read_only: bool = False,
) -> ChainSession:
    """:func:`open_session` from the values of :func:`session_options`."""
    return open_session(
        deployment_file,
        rpc_url=rpc_url,
        store_url=store_url,
        keystore=keystore,
        read_only=read_only,
        tx_settings=TxSettings(max_fee_per_gas_cap_wei=max_fee),
    )


def _parse_fee_cap(_context: click.Context, _parameter: click.Parameter, value: str | None) -> int | None:
    """``--max-fee``: wei, or an amount with a unit (``50gwei``)."""
    if value is None:
        return None
    from fedchain.units import parse_wei

    try:
        fee = parse_wei(value)
    except FedchainError as err:
        raise click.BadParameter(str(err.args[0])) from None
    if fee <= 0:
        raise click.BadParameter(f"the cap must be above 0 wei, got {value}")
    return fee
