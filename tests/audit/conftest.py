"""A task driven end to end on a real Anvil through the typed bindings, for the audit tests to audit.

One Anvil and one deployment per session (the audit tests' own: their clock
jumps must not disturb other tests). The driven task has four clients and five
fog nodes: client 0 is good, client 1 posts a low quality, client 2's fog node
misses round 2 (slashed, the job goes to the standby bid), client 3's update is
rejected in round 1 (removed, deposit forfeited to the deployment's sink); one
bid on job 3 is never revealed. The aggregator bonds itself before the start.
Every round is posted (pending), and once its challenge window has passed
without a challenge a stranger finalises it (its money moves then). Every
update, job data, spec and model lives in a temporary blob store. After three
rounds the task is settled (the bond goes back to the aggregator), every job is
settled, and some accounts withdraw. A second task (:func:`drive_scored_task`)
posts the scores the aggregator's scoring function gives, for ``--verify-scores``. A third
(:func:`drive_prior_task`) brings the first task's clients back with their
cross-task priors for a round in which client 0 sends garbage. Accounts by role (Anvil's public test keys): 0 deployer,
1 publisher, 2 aggregator, 3..6 clients (7, 8 and 16 the scored task's), 9..14 fog nodes, 15 a stranger (who
finalises), 18 the arbiter committee (one member), 19 the sink.
"""

from __future__ import annotations

import functools
import math
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from eth_abi import encode as abi_encode
from eth_account.signers.local import LocalAccount
from eth_utils import keccak
from web3 import Web3

from fedchain.audit import ChainReadings, mechanism_of, read_chain
from fedchain.chain import bindings
from fedchain.chain.abi import AbiRegistry
from fedchain.chain.bindings import FedChainContracts, Measurement, TaskCreated, TaskParams, UpdateCommitted
from fedchain.chain.deployment import Deployment, deploy
from fedchain.chain.merkle import ZERO_ROOT
from fedchain.chain.node import AnvilNode, AnvilSettings
from fedchain.chain.recipe import ArbiterSettings, deploy_fedchain
from fedchain.chain.tx import Receipt, Transactor
from fedchain.fl.params import unflatten
from fedchain.fl.reputation import WAD, RevealedBid, choose_winner
from fedchain.fl.strategy import StrategyState
from fedchain.store import BlobStore, open_store
from fedchain.taskspec import TaskSpec, ValidationSpec, put_initial_model, put_model, put_spec, update_meta
from fedchain.updates import store_update

DEPLOYER, PUBLISHER, AGGREGATOR = 0, 1, 2
STRANGER, ARBITER, SINK = 15, 18, 19
CLIENTS = (3, 4, 5, 6)
DATA_SIZES = (600, 800, 500, 700)
#: (fog account, job, frequency Hz, price wei per round, revealed)
BIDS = (
    (9, 0, 5_000, 10**14, True),
    (10, 1, 5_000, 10**14, True),
    (11, 2, 5_000, 10**14, True),
    (12, 2, 2_000, 5 * 10**13, True),  # standby for job 2: lower utility, price within the escrow
    (13, 3, 5_000, 10**14, True),
    (14, 3, 5_000, 10**13, False),  # never revealed: its deposit goes to client 3
)
#: Quality (fixed point, None = rejected update) per client per round; missing entries: no commit.
QUALITIES: tuple[dict[int, int | None], ...] = (
    {0: 12 * WAD // 10, 1: 4 * WAD // 10, 2: WAD, 3: None},
    {0: WAD, 1: 6 * WAD // 10},  # job 2's fog node misses round 2
    {0: 11 * WAD // 10, 1: 5 * WAD // 10, 2: 9 * WAD // 10},
)
#: Seconds after the round's start at which each client's fog node commits (t_max is 300 s, the deadline 400 s).
COMMIT_OFFSETS = {0: 100, 1: 250, 2: 350, 3: 50}
#: The scored task's clients: none of the first task's, so its cross-task priors are 0 whichever task runs first.
SCORED_CLIENTS = (7, 8, 16)
#: Accounts that withdraw at the end.
WITHDRAWERS = (PUBLISHER, CLIENTS[0], 9, 11)

PARAMS = {
    "rounds": 3,
    "target_accuracy": 0,
    "expected_duration": 600,
    "psi": 10**15,
    "phi": 10**12,
    "min_loss_reputation": WAD // 10,
    "min_time_reputation": WAD // 10,
    "min_quality": WAD // 2,
    "max_round_time": 300,
    "reputation_cap": 10 * WAD,
    "client_deposit": 10**16,
    "fog_deposit": 2 * 10**16,
    "cycles_per_sample": 1000,
    "round_duration": 400,
    "bidding_duration": 100,
    "reveal_duration": 100,
    "time_tolerance": 5,
    "max_clients": 10,
    "second_price": False,
    # A short window, so that each round is final before the next round's first commit (50 s after its start at the
    # earliest); the bond is at least max_clients * d + min(budget, max_clients * psi * cap^3) = 1.1 ETH.
    "challenge_window": 10,
    "challenge_bond": 5 * 10**15,
    "aggregator_bond": 2 * 10**18,
    "self_trained": False,
}


@dataclass(frozen=True)
class DrivenTask:
    """The driven task: where it lives and what the audit reads of it."""

    node: AnvilNode
    w3: Web3
    deployment: Deployment
    deployment_file: Path
    store_url: Path
    task_id: int
    readings: ChainReadings

    def store(self) -> BlobStore:
        """The task's blob store (do not alter it: tests share it)."""
        return open_store(self.store_url)

    def store_copy(self, folder: Path) -> BlobStore:
        """A copy of the task's blob store in ``folder`` (to tamper with)."""
        shutil.copytree(self.store_url, folder)
        return open_store(folder)


class Driver:
    """Sends each role's transactions through its own typed contracts."""

    def __init__(self, node: AnvilNode, deployment: Deployment) -> None:
        self.node = node
        self.w3 = node.web3()
        self.deployment = deployment
        self._bound: dict[int, FedChainContracts] = {}
        self._keys: dict[int, LocalAccount] = {}

    def key(self, account: int) -> LocalAccount:
        """Test account ``account`` (derived once: a mnemonic derivation takes tens of milliseconds)."""
        if account not in self._keys:
            self._keys[account] = self.node.dev_account(account)
        return self._keys[account]

    def as_(self, account: int) -> FedChainContracts:
        if account not in self._bound:
            transactor = Transactor(self.w3, self.key(account), AbiRegistry())
            self._bound[account] = FedChainContracts.bind(self.deployment, transactor)
        return self._bound[account]

    def address(self, account: int) -> str:
        return self.key(account).address

    def set_next_timestamp(self, timestamp: int) -> None:
        """The next block (the next transaction) gets exactly ``timestamp``."""
        self.w3.provider.make_request("evm_setNextBlockTimestamp", [timestamp])

    def advance(self, seconds: int) -> None:
        self.w3.provider.make_request("evm_increaseTime", [seconds])
        self.w3.provider.make_request("evm_mine", [])

    def now(self) -> int:
        """The latest block's time."""
        return int(self.w3.eth.get_block("latest")["timestamp"])

    def priors(self, task_id: int) -> tuple[int, ...]:
        """Task ``task_id``'s cross-task priors as the aggregator computes them before round 1."""
        from fedchain.aggregator.priors import chain_priors, start_block

        aggregator = self.as_(AGGREGATOR)
        registry, ledger = aggregator.task_registry, aggregator.round_ledger
        block = start_block(self.w3, registry, task_id, from_block=self.deployment.block_number)
        return chain_priors(registry, ledger, task_id, registry.state(task_id), block=block).priors


def _salt(label: str) -> bytes:
    return keccak(text=label)


def staff_task(
    driver: Driver,
    store: BlobStore,
    spec: TaskSpec,
    params: dict,
    sizes: tuple[int, ...],
    bids: tuple,
    clients: tuple[int, ...] = CLIENTS,
) -> tuple[int, TaskParams]:
    """Create a task for ``spec``, bond the aggregator, let ``clients`` join with ``sizes``, run the auctions of
    ``bids``, hand off data, start."""
    task = TaskParams(model_id=put_initial_model(store, spec), dataset_id=put_spec(store, spec), **params)
    mechanism = mechanism_of(task)
    receipt = driver.as_(PUBLISHER).task_registry.create_task(task, driver.address(AGGREGATOR), value=10**18)
    task_id = receipt.events_of(TaskCreated)[0].task_id
    driver.as_(AGGREGATOR).disputes.post_bond(task_id, value=task.aggregator_bond)
    for client, size in zip(clients, sizes, strict=True):
        commitment = keccak(abi_encode(["uint256", "bytes32"], [size, _salt(f"data-{client}")]))
        driver.as_(client).round_ledger.join(task_id, commitment, value=task.client_deposit)
        driver.as_(client).fog_auction.open_auction(task_id, size, _salt(f"data-{client}"))
    for fog, job, frequency, price, _ in bids:
        salt = _salt(f"bid-{fog}-{job}")
        sealed = keccak(
            abi_encode(["uint64", "uint96", "bytes32", "address"], [frequency, price, salt, driver.address(fog)])
        )
        driver.as_(fog).fog_auction.commit_bid(task_id, job, sealed, value=task.fog_deposit)
    driver.advance(task.bidding_duration + 1)
    for fog, job, frequency, price, revealed in bids:
        if revealed:
            driver.as_(fog).fog_auction.reveal_bid(task_id, job, frequency, price, _salt(f"bid-{fog}-{job}"))
    driver.advance(task.reveal_duration + 1)
    for index, (client, size) in enumerate(zip(clients, sizes, strict=True)):
        offers = [RevealedBid(f, p) if revealed else None for _, job, f, p, revealed in bids if job == index]
        price = choose_winner(mechanism, mechanism.initial_reputation, size, offers).price
        driver.as_(client).fog_auction.close_auction(task_id, index, value=price * task.rounds)
        driver.as_(client).data_handoff.commit_data(task_id, index, store.put(f"job data of client {index}".encode()))
    driver.as_(PUBLISHER).task_registry.start_task(task_id)
    return task_id, task


def commit_update(
    driver: Driver,
    store: BlobStore,
    spec: TaskSpec,
    task_id: int,
    round_number: int,
    index: int,
    delta: torch.Tensor,
    at: int,
    clients: tuple[int, ...] = CLIENTS,
) -> UpdateCommitted:
    """The job's current winner stores ``delta`` as its update and commits its hash at block time ``at``."""
    auction = driver.as_(AGGREGATOR).fog_auction
    winner = auction.bids(task_id, index)[auction.job(task_id, index).winner].bidder
    fog = next(account for account, *_ in BIDS if driver.address(account) == winner)
    meta = update_meta(spec, task_id, round_number, index, driver.address(clients[index]))
    update = store_update(store, unflatten(delta, spec.param_spec()), meta)
    driver.set_next_timestamp(at)
    root = keccak(text=f"transcript {task_id} {index} {round_number}")  # no fog challenge is judged here
    committed = driver.as_(fog).fog_auction.commit_update(task_id, index, round_number, update, root)
    return committed.events_of(UpdateCommitted)[0]


def finalize_round(driver: Driver, task_id: int, round_number: int, measurements: list[Measurement]) -> Receipt:
    """Nobody challenges the posted round: once its challenge window has closed (a block is mined just after it, so
    that the transaction's gas estimate runs after it too) a stranger finalises it with the measurements it was
    posted with."""
    stranger = driver.as_(STRANGER)
    window = stranger.task_registry.params(task_id).challenge_window
    closes = stranger.round_ledger.round_record(task_id, round_number).posted_at + window
    if driver.now() <= closes:
        driver.set_next_timestamp(closes + 1)
        driver.w3.provider.make_request("evm_mine", [])
    return stranger.round_ledger.finalize_round(task_id, round_number, measurements)


def settle_everything(driver: Driver, task_id: int, jobs: int, withdrawers: tuple[int, ...]) -> None:
    """Settle the task and every job, then let ``withdrawers`` take their money out."""
    driver.as_(DEPLOYER).round_ledger.settle(task_id)
    for index in range(jobs):
        driver.as_(DEPLOYER).fog_auction.settle_job(task_id, index)
    for account in withdrawers:
        driver.as_(account).treasury.withdraw()


def drive_task(driver: Driver, store: BlobStore) -> int:
    """Run the module docstring's task (qualities posted as given, not measured) to withdrawals; returns its id."""
    spec = TaskSpec(dataset="mnist", model="lenet5", validation=ValidationSpec(size=64))
    task_id, params = staff_task(driver, store, spec, PARAMS, DATA_SIZES, BIDS)
    aggregator = driver.as_(AGGREGATOR)
    generator = torch.Generator().manual_seed(7)
    global_params = torch.cat([t.reshape(-1) for t in spec.initial_params().values()])
    for round_number, qualities in enumerate(QUALITIES, start=1):
        started = aggregator.task_registry.state(task_id).round_started_at
        commits = {
            index: commit_update(
                driver,
                store,
                spec,
                task_id,
                round_number,
                index,
                torch.randn(global_params.numel(), generator=generator) * 0.01,
                started + COMMIT_OFFSETS[index],
            )
            for index in sorted(qualities, key=COMMIT_OFFSETS.__getitem__)
        }
        if round_number == 2:  # job 2's fog node missed the round: after the deadline anyone reports it
            driver.advance(params.round_duration + 1)
            aggregator.fog_auction.report_missed_round(task_id, 2)
        measurements = [
            Measurement(
                quality=qualities.get(i) or 0,
                round_time=commits[i].committed_at - started if i in commits else 0,
                accepted=qualities.get(i) is not None,
                committed=i in commits,
            )
            for i in range(len(CLIENTS))
        ]
        global_params = global_params + 0.001 * round_number
        model_hash = put_model(store, spec, task_id, round_number, unflatten(global_params, spec.param_spec()))
        aggregator.round_ledger.post_round(
            task_id, round_number, model_hash, 9 * WAD // 10, ZERO_ROOT, ZERO_ROOT, measurements
        )
        finalize_round(driver, task_id, round_number, measurements)
    settle_everything(driver, task_id, len(CLIENTS), WITHDRAWERS)
    return task_id


def drive_scored_task(driver: Driver, store: BlobStore) -> int:
    """A two-round fedavg task whose rounds are scored as the aggregator scores them; client 2's update is NaN.

    The driver keeps every update in memory and scores with the aggregator's
    :func:`~fedchain.aggregator.scoring.score_round` on the publisher's
    validation set; the audit must reproduce the posted numbers from the chain
    and the store alone.
    """
    from fedchain.aggregator.scoring import ClientInput, Evaluator, score_round, task_floor, task_grace
    from fedchain.fl.registry import get_strategy
    from fedchain.taskspec import load_validation

    spec = TaskSpec(dataset="mnist", model="lenet5", strategy="fedavg", seed=3, validation=ValidationSpec(size=64))
    sizes = DATA_SIZES[:3]
    task_id, task = staff_task(driver, store, spec, dict(PARAMS, rounds=2), sizes, BIDS[:3], SCORED_CLIENTS)
    aggregator = driver.as_(AGGREGATOR)
    # As the aggregator does before round 1: the cross-task priors (all 0: no earlier task shares its clients).
    aggregator.round_ledger.post_priors(task_id, list(driver.priors(task_id)))
    strategy, evaluator = get_strategy("fedavg"), Evaluator(spec.model_spec(), load_validation(spec), "cpu")
    generator = torch.Generator().manual_seed(11)
    global_params = torch.cat([t.reshape(-1) for t in spec.initial_params().values()])
    strategy_state: StrategyState | None = None
    active = [True] * len(sizes)
    for round_number in (1, 2):
        started = aggregator.task_registry.state(task_id).round_started_at
        deltas = [torch.randn(global_params.numel(), generator=generator) * scale for scale in (0.01, 0.05, 0.02)]
        deltas[2][0] = math.nan  # client 2's update is malformed: the aggregator rejects it
        inputs = []
        for index, delta in enumerate(deltas):
            if not active[index]:
                inputs.append(ClientInput(update=None, data_size=sizes[index], round_time=None, active=False))
                continue
            at = started + 60 * (index + 1)
            commit = commit_update(driver, store, spec, task_id, round_number, index, delta, at, SCORED_CLIENTS)
            usable = delta if torch.isfinite(delta).all() else None
            inputs.append(ClientInput(update=usable, data_size=sizes[index], round_time=commit.committed_at - started))
        outcome = score_round(
            strategy,
            global_params,
            inputs,
            evaluator,
            strategy_state,
            quality="loss",
            screening=spec.screening,
            quality_floor=task_floor(spec, task, round_number),
            data_credit=spec.data_credit,
            grace=task_grace(spec, task),
        )
        global_params, strategy_state = outcome.global_params, outcome.state
        model_hash = put_model(store, spec, task_id, round_number, unflatten(global_params, spec.param_spec()))
        aggregator.round_ledger.post_round(
            task_id, round_number, model_hash, outcome.accuracy_wad, ZERO_ROOT, ZERO_ROOT, list(outcome.measurements)
        )
        receipt = finalize_round(driver, task_id, round_number, list(outcome.measurements))
        removed = {e.client_index for e in receipt.events_of(bindings.ClientRemoved)}
        active = [a and i not in removed for i, a in enumerate(active)]
    settle_everything(driver, task_id, len(sizes), ())
    return task_id


def drive_prior_task(driver: Driver, store: BlobStore) -> int:
    """A one-round task with :func:`drive_task`'s clients, run after it: they bring priors, client 0 sends garbage.

    The priors are what the aggregator computes from the earlier tasks on the chain (client 0's is its
    final r_a of :func:`drive_task`, above 1). In the round client 0's update scores quality 0.1, below
    q_min 0.5, the others 1.0: the prior does not apply in that round, so client 0 is removed.
    """
    spec = TaskSpec(dataset="mnist", model="lenet5", validation=ValidationSpec(size=64))
    task_id, _ = staff_task(driver, store, spec, dict(PARAMS, rounds=1), DATA_SIZES, BIDS)
    aggregator = driver.as_(AGGREGATOR)
    priors = driver.priors(task_id)
    assert priors[0] > WAD, priors  # the history this task is about
    aggregator.round_ledger.post_priors(task_id, list(priors))
    started = aggregator.task_registry.state(task_id).round_started_at
    generator = torch.Generator().manual_seed(5)
    global_params = torch.cat([t.reshape(-1) for t in spec.initial_params().values()])
    measurements = []
    for index in sorted(range(len(CLIENTS)), key=COMMIT_OFFSETS.__getitem__):
        delta = torch.randn(global_params.numel(), generator=generator) * 0.01
        commit = commit_update(driver, store, spec, task_id, 1, index, delta, started + COMMIT_OFFSETS[index])
        quality = WAD // 10 if index == 0 else WAD
        measurements.append(
            (
                index,
                Measurement(quality=quality, round_time=commit.committed_at - started, accepted=True, committed=True),
            )
        )
    model_hash = put_model(store, spec, task_id, 1, unflatten(global_params, spec.param_spec()))
    entries = [m for _, m in sorted(measurements)]
    aggregator.round_ledger.post_round(task_id, 1, model_hash, WAD // 2, ZERO_ROOT, ZERO_ROOT, entries)
    finalize_round(driver, task_id, 1, entries)
    settle_everything(driver, task_id, len(CLIENTS), ())
    return task_id


@pytest.fixture(scope="session")
def audit_node() -> Iterator[AnvilNode]:
    """The audit tests' own Anvil."""
    with AnvilNode(AnvilSettings(accounts=20)) as node:
        yield node


@dataclass(frozen=True)
class AuditChain:
    """The audit tests' deployment and blob store."""

    node: AnvilNode
    deployment: Deployment
    deployment_file: Path
    store_url: Path
    driver: Driver


@pytest.fixture(scope="session")
def audit_chain(audit_node: AnvilNode, tmp_path_factory: pytest.TempPathFactory) -> AuditChain:
    folder = tmp_path_factory.mktemp("audit")
    # A committee of one and a sink of its own: the audit must read where forfeits go from the deployment's SinkSet.
    arbiters = ArbiterSettings.of([audit_node.dev_account(ARBITER).address], sink=audit_node.dev_account(SINK).address)
    deployment = deploy(
        audit_node.web3(),
        audit_node.dev_account(DEPLOYER),
        rpc_url=audit_node.rpc_url,
        recipe=functools.partial(deploy_fedchain, arbiters=arbiters),
        rehearse_first=False,
    )
    return AuditChain(
        audit_node,
        deployment,
        deployment.save(folder / "deployment.json"),
        folder / "store",
        Driver(audit_node, deployment),
    )


def _driven(chain: AuditChain, drive: Callable[[Driver, BlobStore], int]) -> DrivenTask:
    task_id = drive(chain.driver, open_store(chain.store_url))
    w3 = chain.node.web3()
    return DrivenTask(
        chain.node,
        w3,
        chain.deployment,
        chain.deployment_file,
        chain.store_url,
        task_id,
        read_chain(w3, chain.deployment, task_id),
    )


@pytest.fixture(scope="session")
def driven_task(audit_chain: AuditChain) -> DrivenTask:
    """The module docstring's task, driven once per session, and the audit's readings of it."""
    return _driven(audit_chain, drive_task)


@pytest.fixture(scope="session")
def prior_task(audit_chain: AuditChain, driven_task: DrivenTask) -> DrivenTask:
    """:func:`drive_prior_task`'s task, driven once per session after ``driven_task`` (its history)."""
    return _driven(audit_chain, drive_prior_task)


@pytest.fixture(scope="session")
def scored_task(audit_chain: AuditChain) -> DrivenTask:
    """:func:`drive_scored_task`'s task, driven once per session, and the audit's readings of it."""
    return _driven(audit_chain, drive_scored_task)
