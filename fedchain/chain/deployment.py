"""Deploying the contracts and the deployment file every later command reads.

:func:`deploy` runs a deployment recipe (by default the contracts' own,
:func:`fedchain.chain.recipe.deploy_fedchain`) with a local signing key. On a
node reachable over HTTP it first rehearses the whole recipe on a throw-away
Anvil fork of that chain, so that a revert or a deployer that cannot pay is
found before anything is sent: bad input changes nothing.

The result is a :class:`Deployment`, saved as JSON (by default
``.fedchain/deployment.json``)::

    {"format": "fedchain-deployment/1", "chain_id": 31337, "rpc_url": "http://127.0.0.1:8545",
     "deployer": "0xf39F...", "block_number": 1, "compiler": "solc 0.8.37 (evm prague)",
     "contracts": [{"name": "Treasury", "address": "0x5FbD...", "code_hash": "0x..."}, ...]}

``code_hash`` is the keccak256 of the runtime code on chain (what EXTCODEHASH
returns, immutables included). :meth:`Deployment.verify` checks a file against
a chain: same chain id, and that code at every address.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eth_account.signers.local import LocalAccount
from eth_utils import is_checksum_address, keccak, to_checksum_address
from web3 import Web3
from web3.exceptions import Web3Exception

from fedchain.chain.abi import AbiRegistry
from fedchain.chain.compile import EVM_VERSION, SOLC_VERSION
from fedchain.chain.node import AnvilNode, AnvilSettings, NodeError, anvil_binary, connect
from fedchain.chain.tx import current_fees, max_fee_per_gas, revert_data
from fedchain.errors import ChainError, DeploymentError, FedchainError, InsufficientFunds
from fedchain.files import write_atomic

log = logging.getLogger(__name__)

#: Where `fedchain deploy` writes and every later command reads the deployment, relative to the working directory.
DEFAULT_DEPLOYMENT_FILE = Path(".fedchain") / "deployment.json"
FORMAT = "fedchain-deployment/1"

#: A deployment recipe: ``recipe(w3, deployer_address, confirmations=K) -> {contract name: address}`` in
#: deployment order. It sends with ``w3.eth.send_transaction({"from": deployer_address, ...})``; the caller
#: makes that address able to send (a signing middleware, or impersonation on a dry-run fork).
Recipe = Callable[..., Mapping[str, str]]


@dataclass(frozen=True)
class DeployedContract:
    """One deployed contract."""

    name: str
    address: str
    #: keccak256 of the runtime code at ``address`` (0x-prefixed hex), as EXTCODEHASH returns it.
    code_hash: str


@dataclass(frozen=True)
class Deployment:
    """Where FedChain's contracts live on one chain; the content of the deployment file."""

    chain_id: int
    #: The JSON-RPC URL deployed to, or None for a chain only its own process can reach.
    rpc_url: str | None
    deployer: str
    #: The first block of the deployment: history (events) starts here.
    block_number: int
    #: The compiler and EVM version the contracts were built with.
    compiler: str
    #: In deployment order.
    contracts: tuple[DeployedContract, ...]

    def address(self, name: str) -> str:
        """The address of contract ``name``."""
        for contract in self.contracts:
            if contract.name == name:
                return contract.address
        raise DeploymentError(
            f"the deployment has no contract {name}",
            hint=f"it has {', '.join(c.name for c in self.contracts) or 'none'}; deploy again with the current contracts",
        )

    @property
    def addresses(self) -> dict[str, str]:
        """Contract name -> address, in deployment order."""
        return {c.name: c.address for c in self.contracts}

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "chain_id": self.chain_id,
            "rpc_url": self.rpc_url,
            "deployer": self.deployer,
            "block_number": self.block_number,
            "compiler": self.compiler,
            "contracts": [{"name": c.name, "address": c.address, "code_hash": c.code_hash} for c in self.contracts],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "deployment") -> Deployment:
        """Parse and check a deployment mapping; a DeploymentError names the first bad field."""

        def bad(what: str) -> DeploymentError:
            return DeploymentError(
                f"{source} is not a FedChain deployment file: {what}",
                hint="deploy again with `fedchain deploy --out FILE`, or pass the right --deployment FILE",
            )

        if not isinstance(data, Mapping):
            raise bad(f"it holds a {type(data).__name__}, not a JSON object")
        if data.get("format") != FORMAT:
            raise bad(f"format is {data.get('format')!r}, expected {FORMAT!r}")
        for key, kind in (
            ("chain_id", int),
            ("deployer", str),
            ("block_number", int),
            ("compiler", str),
            ("contracts", list),
        ):
            if not isinstance(data.get(key), kind) or isinstance(data.get(key), bool):
                raise bad(f"{key} must be a {kind.__name__}, got {data.get(key)!r}")
        if data.get("rpc_url") is not None and not isinstance(data["rpc_url"], str):
            raise bad(f"rpc_url must be a string or null, got {data['rpc_url']!r}")
        if not is_checksum_address(data["deployer"]):
            raise bad(f"deployer {data['deployer']!r} is not a checksum address")
        contracts = []
        for index, entry in enumerate(data["contracts"]):
            if not isinstance(entry, Mapping) or not all(
                isinstance(entry.get(k), str) for k in ("name", "address", "code_hash")
            ):
                raise bad(f"contracts[{index}] needs string fields name, address and code_hash")
            if not is_checksum_address(entry["address"]):
                raise bad(f"contracts[{index}].address {entry['address']!r} is not a checksum address")
            if len(entry["code_hash"]) != 66 or not entry["code_hash"].startswith("0x"):
                raise bad(f"contracts[{index}].code_hash must be 32 bytes of 0x-prefixed hex")
            contracts.append(DeployedContract(entry["name"], entry["address"], entry["code_hash"]))
        return cls(
            chain_id=data["chain_id"],
            rpc_url=data.get("rpc_url"),
            deployer=data["deployer"],
            block_number=data["block_number"],
            compiler=data["compiler"],
            contracts=tuple(contracts),
        )

    def save(self, path: Path) -> Path:
        """Write the deployment file atomically (a crash leaves the old file or the new one)."""
        write_atomic(path, self.to_json().encode())
        return path

    def verify(self, w3: Web3) -> None:
        """Check that ``w3`` serves this deployment: same chain id, and the recorded code at every address."""
        actual = int(w3.eth.chain_id)
        if actual != self.chain_id:
            raise DeploymentError(
                f"the deployment is on chain id {self.chain_id} but the node serves chain id {actual}",
                hint=f"pass the --rpc-url of chain {self.chain_id}, or deploy again on this chain",
            )
        for contract in self.contracts:
            code = bytes(w3.eth.get_code(contract.address))
            if "0x" + keccak(code).hex() != contract.code_hash:
                what = "no code" if not code else "different code"
                raise DeploymentError(
                    f"{contract.name} at {contract.address} has {what} on chain {actual}",
                    hint="the chain was reset (a restarted local node forgets everything) or the file is "
                    "from another deployment; run `fedchain deploy` again",
                )


def load_deployment(path: Path = DEFAULT_DEPLOYMENT_FILE) -> Deployment:
    """Read and check the deployment file at ``path`` (not yet against a chain: see :meth:`Deployment.verify`)."""
    if not path.is_file():
        raise DeploymentError(f"no deployment file at {path}")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DeploymentError(
            f"deployment file {path} is not valid JSON: {err}",
            hint="deploy again with `fedchain deploy`, or pass the right --deployment FILE",
        ) from err
    return Deployment.from_dict(data, source=f"deployment file {path}")


def open_deployment(
    path: Path = DEFAULT_DEPLOYMENT_FILE, *, rpc_url: str | None = None, chain_id: int | None = None
) -> tuple[Web3, Deployment]:
    """Load the deployment file, connect to its chain (or ``rpc_url``) and verify it there."""
    deployment = load_deployment(path)
    url = rpc_url or deployment.rpc_url
    if url is None:
        raise DeploymentError(
            f"deployment file {path} names no RPC URL (it was made on an in-process chain)",
            hint="pass --rpc-url",
        )
    w3 = connect(url, chain_id=chain_id if chain_id is not None else deployment.chain_id)
    deployment.verify(w3)
    return w3, deployment


# --------------------------------------------------------------------------- deploying


@dataclass(frozen=True)
class DeploymentCost:
    """What a deployment costs, measured by a dry run."""

    gas: int
    #: The most the deployer may pay per gas at current fees (EIP-1559 max fee, or the gas price).
    max_fee_per_gas: int

    @property
    def max_wei(self) -> int:
        """The balance the deployer needs."""
        return self.gas * self.max_fee_per_gas


def default_recipe() -> Recipe:
    """The contracts' own recipe, :func:`fedchain.chain.recipe.deploy_fedchain`."""
    try:
        from fedchain.chain.recipe import deploy_fedchain
    except ImportError as err:
        raise ChainError(
            f"the contracts' deployment recipe is missing ({err})",
            hint="update the checkout: fedchain/chain/recipe.py comes with the contracts",
        ) from err
    return deploy_fedchain


def default_registry() -> AbiRegistry:
    """Errors and events of every compiled FedChain contract (the bindings' classes first)."""
    from fedchain.chain.compile import compile_contracts

    registry = AbiRegistry()
    try:
        from fedchain.chain.bindings import REGISTRY

        registry = registry.merged(REGISTRY)
    except ImportError:
        log.debug("no generated bindings; building error classes from the ABIs")
    for artifact in compile_contracts().values():
        registry.add_abi(artifact.abi)
    return registry


def rehearse(rpc_url: str, deployer: str, recipe: Recipe, *, registry: AbiRegistry) -> DeploymentCost:
    """Run ``recipe`` on a throw-away Anvil fork of the chain at ``rpc_url`` and measure its gas.

    The fork impersonates ``deployer`` with an ample balance, so the dry run
    measures the cost whatever the real balance; a revert surfaces here, as the
    contract's custom error, before anything reaches the real chain.
    """
    real = connect(rpc_url)
    chain_id = int(real.eth.chain_id)
    max_fee = max_fee_per_gas(current_fees(real))
    settings = AnvilSettings(chain_id=chain_id, accounts=1, fork_url=rpc_url, auto_impersonate=True)
    with AnvilNode(settings) as fork:
        w3 = fork.web3()
        w3.provider.make_request("anvil_setBalance", [deployer, hex(10**30)])
        start = int(w3.eth.block_number)
        _run_recipe(recipe, w3, deployer, 0, registry)
        gas = 0
        for number in range(start + 1, int(w3.eth.block_number) + 1):
            for tx in w3.eth.get_block(number, full_transactions=True)["transactions"]:
                if to_checksum_address(tx["from"]) == deployer:
                    gas += int(w3.eth.get_transaction_receipt(tx["hash"])["gasUsed"])
    log.info("dry run on a fork: the deployment takes %d gas (at most %d wei/gas)", gas, max_fee)
    return DeploymentCost(gas=gas, max_fee_per_gas=max_fee)


def deploy(
    w3: Web3,
    account: LocalAccount,
    *,
    rpc_url: str | None,
    recipe: Recipe | None = None,
    registry: AbiRegistry | None = None,
    confirmations: int = 0,
    rehearse_first: bool = True,
) -> Deployment:
    """Deploy with ``recipe`` from ``account`` and return the deployment (not yet saved).

    With ``rpc_url`` and ``rehearse_first``, the recipe first runs on a fork
    (:func:`rehearse`): a revert raises its custom error and a deployer that
    cannot pay raises :class:`~fedchain.errors.InsufficientFunds`, both before
    any transaction is sent.
    """
    recipe = recipe or default_recipe()
    registry = registry or default_registry()
    deployer = account.address
    balance = int(w3.eth.get_balance(deployer))
    cost = _rehearsal_cost(rpc_url, deployer, recipe, registry) if rehearse_first else None
    if cost is not None and balance < cost.max_wei:
        raise InsufficientFunds(
            f"deployer {deployer} holds {balance} wei; the deployment takes {cost.gas} gas at up to "
            f"{cost.max_fee_per_gas} wei per gas = {cost.max_wei} wei",
        )
    if balance == 0:
        raise InsufficientFunds(f"deployer {deployer} holds 0 wei and cannot pay for any transaction")
    signer = _signing_web3(w3, account)
    first_block = int(signer.eth.block_number) + 1
    addresses = _run_recipe(recipe, signer, deployer, confirmations, registry)
    contracts = []
    for name, address in addresses.items():
        code = bytes(signer.eth.get_code(address))
        if not code:
            raise DeploymentError(f"the recipe reported {name} at {address}, but there is no code there")
        contracts.append(DeployedContract(name, to_checksum_address(address), "0x" + keccak(code).hex()))
    deployment = Deployment(
        chain_id=int(signer.eth.chain_id),
        rpc_url=rpc_url,
        deployer=deployer,
        block_number=first_block,
        compiler=f"solc {SOLC_VERSION} (evm {EVM_VERSION})",
        contracts=tuple(contracts),
    )
    log.info("deployed %s on chain %d", ", ".join(deployment.addresses), deployment.chain_id)
    return deployment


def _rehearsal_cost(rpc_url: str | None, deployer: str, recipe: Recipe, registry: AbiRegistry) -> DeploymentCost | None:
    """The rehearsal's cost, or None where no fork can be made (no URL, or no Anvil to fork with)."""
    if rpc_url is None:
        log.warning("no RPC URL to fork: deploying without a rehearsal (a failure may leave a partial deployment)")
        return None
    try:
        anvil_binary()
    except NodeError as err:
        log.warning("no rehearsal on a fork (%s): a failure may leave a partial deployment", err)
        return None
    return rehearse(rpc_url, deployer, recipe, registry=registry)


def _run_recipe(
    recipe: Recipe, w3: Web3, deployer: str, confirmations: int, registry: AbiRegistry
) -> Mapping[str, str]:
    """Run the recipe; node errors become FedChain errors (a revert: its custom error)."""
    try:
        return recipe(w3, deployer, confirmations=confirmations)
    except FedchainError:
        raise
    except Exception as err:
        data = revert_data(err)
        if data is None and not isinstance(err, Web3Exception):
            raise  # a bug in the recipe, not a refusal by the chain
        if isinstance(data, FedchainError):
            raise data from None
        if data is not None:
            raise registry.decode_revert(data) from None
        raise ChainError(f"the deployment failed: {err}") from err


def _signing_web3(w3: Web3, account: LocalAccount) -> Web3:
    """A client over ``w3``'s provider that signs ``account``'s transactions locally."""
    from web3.middleware import SignAndSendRawMiddlewareBuilder

    signer = Web3(w3.provider)
    signer.middleware_onion.inject(SignAndSendRawMiddlewareBuilder.build(account), layer=0)
    signer.eth.default_account = account.address
    return signer
