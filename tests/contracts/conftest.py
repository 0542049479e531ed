"""Fixtures of the contract tests: one Anvil and one deployment per session, a snapshot per test.

Every test starts from the same freshly deployed contracts: the session deploys
once, each test runs between ``evm_snapshot`` and ``evm_revert``. Reverts are
raised as the typed exception classes of :mod:`fedchain.chain.bindings`. Accounts by
role (Anvil's public test keys): 0 deployer, 1 publisher, 2 aggregator,
3..8 clients, 9..14 fog nodes, 15 a stranger, 16..18 the arbiter committee
(quorum 2), 19 the sink.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from eth_abi import encode as abi_encode
from eth_utils import keccak
from web3 import Web3

from fedchain.audit import AuditReport, audit_task, read_chain
from fedchain.chain import bindings
from fedchain.chain.abi import AbiRegistry, CustomError, E, snake_case
from fedchain.chain.bindings import REGISTRY
from fedchain.chain.compile import Artifact, compile_contracts
from fedchain.chain.contract import Contract
from fedchain.chain.deployment import DeployedContract, Deployment
from fedchain.chain.merkle import ZERO_ROOT
from fedchain.chain.node import AnvilNode, AnvilSettings
from fedchain.chain.recipe import DEPLOYMENT_ORDER, ArbiterSettings, deploy_fedchain
from fedchain.chain.tx import Receipt, Transactor
from fedchain.fl.reputation import WAD, MechanismParams

ZERO_ADDRESS = "0x" + "00" * 20
DEPLOYER, PUBLISHER, AGGREGATOR = 0, 1, 2
CLIENTS = tuple(range(3, 9))
FOGS = tuple(range(9, 15))
STRANGER = 15
ARBITERS = (16, 17, 18)
SINK = 19
QUORUM = 2
#: The committee's verdict window in the contract tests, seconds.
VERDICT_WINDOW = 600


@dataclass(frozen=True)
class TaskParams:
    """The contract's ``ITaskRegistry.TaskParams``, field for field (small defaults that keep tests readable)."""

    model_id: bytes = keccak(text="lenet5")
    dataset_id: bytes = keccak(text="mnist")
    rounds: int = 3
    target_accuracy: int = 0
    expected_duration: int = 600  # T = 200 s per round
    psi: int = 10**15
    phi: int = 10**12
    min_loss_reputation: int = WAD // 10
    min_time_reputation: int = WAD // 10
    min_quality: int = WAD // 2
    max_round_time: int = 300
    reputation_cap: int = 10 * WAD
    client_deposit: int = 10**16
    fog_deposit: int = 2 * 10**16
    cycles_per_sample: int = 1000
    round_duration: int = 400
    bidding_duration: int = 100
    reveal_duration: int = 100
    time_tolerance: int = 5
    max_clients: int = 50
    second_price: bool = False
    # One second: most tests post and finalise a round at once (the window is exercised with longer ones).
    challenge_window: int = 1
    challenge_bond: int = 5 * 10**15
    # At least max_clients * d + min(budget, max_clients * psi * cap^3) for the default budget (1 ether): 1.5 ether.
    aggregator_bond: int = 2 * 10**18
    self_trained: bool = False

    def as_tuple(self) -> tuple[Any, ...]:
        return dataclasses.astuple(self)

    def self_trained_task(self) -> TaskParams:
        """These terms for a self-trained task: no auction terms."""
        return dataclasses.replace(self, self_trained=True, fog_deposit=0, bidding_duration=0, reveal_duration=0)

    def mechanism(self) -> MechanismParams:
        """The subset fedchain.fl.reputation reads."""
        return MechanismParams.of(self)


def data_commitment(data_size: int, salt: bytes) -> bytes:
    """keccak256(abi.encode(uint256 dataSize, bytes32 salt)), as the client commits at join."""
    return keccak(abi_encode(["uint256", "bytes32"], [data_size, salt]))


def bid_commitment(frequency: int, price: int, salt: bytes, bidder: str) -> bytes:
    """keccak256(abi.encode(uint64 frequency, uint96 price, bytes32 salt, address bidder))."""
    return keccak(abi_encode(["uint64", "uint96", "bytes32", "address"], [frequency, price, salt, bidder]))


def as_namespace(params: Any, value: Any) -> Any:
    """A decoded ABI value with struct fields as snake_case attributes."""
    kind = params["type"]
    if kind.endswith("]"):
        element = dict(params, type=kind[: kind.rindex("[")])
        return [as_namespace(element, item) for item in value]
    if kind == "tuple":
        return SimpleNamespace(
            **{snake_case(c["name"]): as_namespace(c, v) for c, v in zip(params["components"], value, strict=True)}
        )
    return value


class Receipts:
    """Several receipts read as one: a post and its finalisation."""

    def __init__(self, *receipts: Receipt) -> None:
        self.receipts = receipts

    def events_of(self, kind: type[E]) -> tuple[E, ...]:
        return tuple(event for receipt in self.receipts for event in receipt.events_of(kind))


class FedChain:
    """The deployed contracts, driven by any of the node's accounts."""

    def __init__(
        self, node: AnvilNode, w3: Web3, addresses: Mapping[str, str], artifacts: Mapping[str, Artifact]
    ) -> None:
        self.node = node
        self.w3 = w3
        self.addresses = dict(addresses)
        self.artifacts = artifacts
        # The bindings' typed classes first: a revert raises e.g. bindings.LedgerNotAggregator.
        self.registry = AbiRegistry().merged(REGISTRY)
        self._transactors: dict[int, Transactor] = {}
        #: The measurements of every round posted through post_round, by (task, round).
        self.posted: dict[tuple[int, int], list[tuple[int, int, bool, bool]]] = {}
        #: The asset of the tasks the helpers create and pay into: None for ether, else a token (see ``use_token``).
        self.token: Contract | None = None
        self._approved: set[int] = set()
        for name in DEPLOYMENT_ORDER:
            self.registry.add_abi(artifacts[name].abi)

    def account(self, index: int) -> str:
        return self.transactor(index).address

    def transactor(self, index: int) -> Transactor:
        if index not in self._transactors:
            self._transactors[index] = Transactor(self.w3, self.node.dev_account(index), self.registry)
        return self._transactors[index]

    def contract(self, name: str, by: int = DEPLOYER) -> Contract:
        return Contract(self.transactor(by), self.addresses[name], self.artifacts[name].abi)

    def send(self, name: str, function: str, *args: Any, by: int, value: int = 0) -> Receipt:
        return self.contract(name, by).transact(function, *args, value=value)

    def view(self, name: str, function: str, *args: Any) -> Any:
        """A view's result; structs come back as namespaces with snake_case fields."""
        contract = self.contract(name)
        outputs = contract.function(function)["outputs"]
        result = contract.call(function, *args)
        if len(outputs) == 1:
            return as_namespace(outputs[0], result)
        return tuple(as_namespace(o, v) for o, v in zip(outputs, result, strict=True))

    # ----------------------------------------------------------------- the asset

    def use_token(self, name: str, *args: Any, mint: int = 10**30) -> Contract:
        """Deploy the test token ``name`` (contracts/test/tokens), mint ``mint`` units to every account, and make it
        the asset of the tasks the helpers create from now on; the helpers approve the Treasury as they pay."""
        artifact = self.artifacts[name]
        self.registry.add_abi(artifact.abi)
        token = Contract.deploy(self.transactor(DEPLOYER), artifact.bytecode, *args, abi=artifact.abi)
        for index in range(20):
            token.transact("mint", self.account(index), mint)
        self.token, self._approved = token, set()
        return token

    @property
    def asset(self) -> str:
        """The helpers' asset as the Treasury names it: the token's address, or the zero address for ether."""
        return self.token.address if self.token is not None else ZERO_ADDRESS

    def pay(self, name: str, function: str, *args: Any, by: int, amount: int) -> Receipt:
        """Call a payable ``function`` that takes ``amount``: as ``msg.value`` for ether, pulled (approved once) for a token."""
        if self.token is None:
            return self.send(name, function, *args, by=by, value=amount)
        if by not in self._approved:
            Contract(self.transactor(by), self.token.address, self.token.abi).transact(
                "approve", self.addresses["Treasury"], 2**256 - 1
            )
            self._approved.add(by)
        return self.send(name, function, *args, by=by)

    def claimable(self, index: int) -> int:
        """What account ``index`` may withdraw in the helpers' asset."""
        return int(self.view("Treasury", "claimableIn", self.asset, self.account(index)))

    def withdraw(self, index: int) -> Receipt:
        """Account ``index`` withdraws its whole balance in the helpers' asset to itself."""
        return self.send("Treasury", "withdrawTo", self.asset, self.account(index), by=index)

    def asset_balance(self, address: str) -> int:
        """``address``'s balance in the helpers' asset."""
        if self.token is None:
            return int(self.w3.eth.get_balance(address))
        return int(self.token.call("balanceOf", address))

    @contextlib.contextmanager
    def reverts(self, error: type[CustomError], *values: Any) -> Iterator[None]:
        """Assert that the block raises exactly ``error`` (a class of the bindings) with ``values`` (all of them, when given).

        An enum member among ``values`` must come back as that enum's member, not as a bare number.
        """
        with pytest.raises(error) as caught:
            yield
        assert type(caught.value) is error
        if values:
            assert caught.value.values == values
            for expected, actual in zip(values, caught.value.values, strict=True):
                if isinstance(expected, enum.Enum):
                    assert type(actual) is type(expected), f"{actual!r} came back as a {type(actual).__name__}"

    # ----------------------------------------------------------------- time

    def now(self) -> int:
        return int(self.w3.eth.get_block("latest")["timestamp"])

    def advance(self, seconds: int) -> None:
        """Move the chain's clock on by ``seconds`` and mine a block."""
        self.w3.provider.make_request("evm_increaseTime", [seconds])
        self.w3.provider.make_request("evm_mine", [])

    def set_next_timestamp(self, timestamp: int) -> None:
        """The next block (the next transaction) gets exactly ``timestamp``."""
        self.w3.provider.make_request("evm_setNextBlockTimestamp", [timestamp])

    def balance(self, index: int) -> int:
        return int(self.w3.eth.get_balance(self.account(index)))

    # ----------------------------------------------------------------- the flow, step by step

    def create_task(self, params: TaskParams = TaskParams(), *, budget: int = 10**18, bond: bool = True) -> int:
        """A task created by the publisher; with ``bond``, the aggregator posts its bond at once."""
        if self.token is None:
            receipt = self.send(
                "TaskRegistry", "createTask", params.as_tuple(), self.account(AGGREGATOR), by=PUBLISHER, value=budget
            )
        else:
            receipt = self.pay(
                "TaskRegistry",
                "createTokenTask",
                params.as_tuple(),
                self.account(AGGREGATOR),
                self.token.address,
                budget,
                by=PUBLISHER,
                amount=budget,
            )
        task_id = receipt.events_of(bindings.TaskCreated)[0].task_id
        if bond:
            self.pay("Disputes", "postBond", task_id, by=AGGREGATOR, amount=params.aggregator_bond)
        return task_id

    def join(self, task_id: int, client: int, data_size: int = 600, params: TaskParams = TaskParams()) -> int:
        salt = keccak(text=f"salt-{client}")
        receipt = self.pay(
            "RoundLedger", "join", task_id, data_commitment(data_size, salt), by=client, amount=params.client_deposit
        )
        return receipt.events_of(bindings.ClientJoined)[0].client_index

    def open_auction(self, task_id: int, client: int, data_size: int = 600) -> None:
        self.send("FogAuction", "openAuction", task_id, data_size, keccak(text=f"salt-{client}"), by=client)

    def commit_bid(
        self, task_id: int, index: int, fog: int, frequency: int, price: int, params: TaskParams = TaskParams()
    ) -> None:
        commitment = bid_commitment(frequency, price, keccak(text=f"bid-{fog}"), self.account(fog))
        self.pay("FogAuction", "commitBid", task_id, index, commitment, by=fog, amount=params.fog_deposit)

    def reveal_bid(self, task_id: int, index: int, fog: int, frequency: int, price: int) -> Receipt:
        return self.send("FogAuction", "revealBid", task_id, index, frequency, price, keccak(text=f"bid-{fog}"), by=fog)

    def close_auction(self, task_id: int, index: int, client: int) -> Receipt:
        job = self.view("FogAuction", "job", task_id, index)
        bids = self.view("FogAuction", "bids", task_id, index)
        params = self.view("TaskRegistry", "params", task_id)
        escrow = self._winning_price(task_id, index, job, bids, params) * params.rounds
        return self.pay("FogAuction", "closeAuction", task_id, index, by=client, amount=escrow)

    def _winning_price(self, task_id: int, index: int, job: Any, bids: list[Any], params: Any) -> int:
        """The price the contract will award, from the Python model (the client must escrow it exactly)."""
        from fedchain.fl.reputation import RevealedBid, choose_winner

        loss_rep, _ = self.view("RoundLedger", "reputation", task_id, index)
        mechanism = MechanismParams.of(params)
        revealed = [RevealedBid(b.frequency, b.price) if b.revealed else None for b in bids]
        return choose_winner(mechanism, loss_rep, job.data_size, revealed).price

    def commit_update(self, task_id: int, index: int, fog: int, round_: int) -> Receipt:
        return self.send(
            "FogAuction",
            "commitUpdate",
            task_id,
            index,
            round_,
            keccak(text=f"update-{index}-{round_}"),
            keccak(text=f"transcript-{index}-{round_}"),
            by=fog,
        )

    def commit_own(self, task_id: int, client: int, round_: int, update_hash: bytes | None = None) -> Receipt:
        """A self-trained task's client commits its update of ``round_`` (a hash of its own by default)."""
        digest = update_hash or keccak(text=f"update-{task_id}-{client}-{round_}")
        return self.send("RoundLedger", "commitOwnUpdate", task_id, round_, digest, by=client)

    def post_round(
        self,
        task_id: int,
        round_: int,
        measurements: list[tuple[int, int, bool]] | list[tuple[int, int, bool, bool]],
        accuracy: int = 0,
        rewards: tuple[bytes, bytes] = (ZERO_ROOT, ZERO_ROOT),
        *,
        final: bool = True,
    ) -> Receipts:
        """Post a round as the aggregator and, with ``final``, let its challenge window pass and finalise it.

        ``measurements`` are (quality, round time, accepted), with ``committed`` read from the chain's commits
        as the aggregator does, or whole (quality, round time, accepted, committed) tuples. ``rewards`` is the
        round's (reward root, reward list), none by default.
        """
        model_hash = keccak(text=f"model-{round_}")
        entries = self.measurements(task_id, round_, measurements)
        post = self.send(
            "RoundLedger", "postRound", task_id, round_, model_hash, accuracy, *rewards, entries, by=AGGREGATOR
        )
        self.posted[(task_id, round_)] = entries
        if not final:
            return Receipts(post)
        return Receipts(post, self.finalize(task_id, round_))

    def measurements(
        self, task_id: int, round_: int, measurements: list[tuple[int, int, bool]] | list[tuple[int, int, bool, bool]]
    ) -> list[tuple[int, int, bool, bool]]:
        """Whole measurements: ``committed`` added from the chain's commit times where it is left out (a fog
        node's, or in a self-trained task the client's own)."""
        own = self.view("TaskRegistry", "params", task_id).self_trained
        source = ("RoundLedger", "ownCommitTimes") if own else ("FogAuction", "commitTimes")
        commits = self.view(*source, task_id, round_, len(measurements))
        whole = []
        for i, m in enumerate(measurements):
            quality, seconds, accepted = m[0], m[1], m[2]
            whole.append((quality, seconds, bool(accepted), bool(m[3]) if len(m) == 4 else commits[i] != 0))
        return whole

    def finalize(self, task_id: int, round_: int, *, by: int = STRANGER, wait: bool = True) -> Receipt:
        """Finalise a posted round (anyone may); with ``wait``, first let its challenge window pass."""
        if wait:
            record = self.view("RoundLedger", "roundRecord", task_id, round_)
            closes = record.posted_at + self.view("TaskRegistry", "params", task_id).challenge_window
            if self.now() <= closes:
                self.advance(closes + 1 - self.now())
        return self.send("RoundLedger", "finalizeRound", task_id, round_, self.posted[(task_id, round_)], by=by)

    def verdict(self, challenge_id: int, upheld: bool, signers: tuple[int, ...] = ARBITERS[:QUORUM]) -> list[bytes]:
        """The committee members' EIP-712 signatures of a verdict, ordered by signer address."""
        c = self.view("Disputes", "challenge", challenge_id)
        digest = self.view(
            "ArbiterCommittee", "verdictDigest", challenge_id, c.task_id, c.round, c.client_index, upheld
        )
        signed = []
        for index in signers:
            account = self.node.dev_account(index)
            signature = account.unsafe_sign_hash(digest)
            signed.append((account.address.lower(), bytes(signature.signature)))
        return [signature for _, signature in sorted(signed)]

    def resolve(self, challenge_id: int, upheld: bool, *, by: int = STRANGER) -> Receipt:
        """Submit a quorum's verdict (anyone may)."""
        return self.send("Disputes", "resolve", challenge_id, upheld, self.verdict(challenge_id, upheld), by=by)

    def staffed_task(
        self,
        params: TaskParams = TaskParams(),
        *,
        clients: tuple[int, ...] = CLIENTS[:2],
        budget: int = 10**18,
        price: int = 10**14,
    ) -> int:
        """A task with ``clients`` joined, each job won by its own fog node (frequency 1e6 Hz), not yet started."""
        task_id = self.create_task(params, budget=budget)
        for client in clients:
            self.join(task_id, client, params=params)
            self.open_auction(task_id, client)
        for offset in range(len(clients)):
            self.commit_bid(task_id, offset, FOGS[offset], 10**6, price, params)
        self.advance(params.bidding_duration + 1)
        for offset in range(len(clients)):
            self.reveal_bid(task_id, offset, FOGS[offset], 10**6, price)
        self.advance(params.reveal_duration + 1)
        for offset, client in enumerate(clients):
            self.close_auction(task_id, offset, client)
        return task_id

    def audit(self, task_id: int) -> AuditReport:
        """The auditor's report of the task from this chain's events and views (no store, no scores)."""
        deployment = Deployment(
            chain_id=self.w3.eth.chain_id,
            rpc_url=None,
            deployer=self.account(DEPLOYER),
            block_number=0,
            compiler="",
            contracts=tuple(DeployedContract(name, address, "") for name, address in self.addresses.items()),
        )
        readings = read_chain(self.w3, deployment, task_id)
        return audit_task(task_id, readings.events, views=readings.views)

    def pool_parts(self, task_id: int) -> tuple[int, ...]:
        """What each module holds of the task's pool: budget left, client deposits, earnings, auction, bonds.
        Their sum equals Treasury.held(task) when no wei is lost or made."""
        return (
            self.view("TaskRegistry", "state", task_id).budget_left,
            self.view("RoundLedger", "depositsHeld", task_id),
            self.view("RoundLedger", "rewardsHeld", task_id),
            self.view("FogAuction", "heldFor", task_id),
            self.view("Disputes", "heldFor", task_id),
        )

    def solvency(self) -> SimpleNamespace:
        """The treasury's totals in the helpers' asset and its balance of that asset on chain."""
        totals = self.view("Treasury", "totalsIn", self.asset)
        totals.balance = self.asset_balance(self.addresses["Treasury"])
        return totals


@pytest.fixture(scope="session")
def contracts_node() -> Iterator[AnvilNode]:
    """The contract tests' own Anvil (their clock jumps and snapshots must not disturb other tests)."""
    with AnvilNode(AnvilSettings(accounts=20)) as node:
        yield node


def arbiter_settings(node: AnvilNode) -> ArbiterSettings:
    """The contract tests' committee (accounts 16..18, quorum 2) and sink (account 19)."""
    members = [node.dev_account(index).address for index in ARBITERS]
    return ArbiterSettings.of(
        members, quorum=QUORUM, verdict_window=VERDICT_WINDOW, sink=node.dev_account(SINK).address
    )


@pytest.fixture(scope="session")
def deployment(contracts_node: AnvilNode) -> tuple[dict[str, str], dict[str, Artifact]]:
    artifacts = compile_contracts()
    w3 = contracts_node.web3()
    deployer = contracts_node.dev_account(DEPLOYER)
    w3.eth.default_account = deployer.address
    return deploy_fedchain(w3, deployer.address, arbiters=arbiter_settings(contracts_node)), artifacts


@pytest.fixture
def chain(contracts_node: AnvilNode, deployment: tuple[dict[str, str], dict[str, Artifact]]) -> Iterator[FedChain]:
    """The deployed contracts, reset to their freshly deployed state after the test."""
    w3 = contracts_node.web3()
    snapshot = w3.provider.make_request("evm_snapshot", [])["result"]
    addresses, artifacts = deployment
    try:
        yield FedChain(contracts_node, w3, addresses, artifacts)
    finally:
        w3.provider.make_request("evm_revert", [snapshot])
