"""A task driven end to end on a real Anvil through the typed bindings, for the audit tests to audit.

One Anvil and one deployment per session (the audit tests' own: their clock
jumps must not disturb other tests). The driven task has four clients and five
fog nodes: client 0 is good, client 1 posts a low quality, client 2's fog node
misses round 2 (slashed, the job goes to the standby bid), client 3's update is
rejected in round 1 (removed, deposit forfeited); one bid on job 3 is never
revealed. Every update, job data, spec and model lives in a temporary blob
store. After three rounds the task is settled, every job is settled, and some
accounts withdraw. Accounts by role (Anvil's public test keys): 0 deployer,
1 publisher, 2 aggregator, 3..6 clients, 9..14 fog nodes.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
import torch
from eth_abi import encode as abi_encode
from eth_utils import keccak
from web3 import Web3

from fedchain.audit import ChainReadings, read_chain
from fedchain.chain.abi import AbiRegistry
from fedchain.chain.bindings import FedChainContracts, Measurement, TaskCreated, TaskParams, UpdateCommitted
from fedchain.chain.deployment import Deployment, deploy
from fedchain.chain.node import AnvilNode, AnvilSettings
from fedchain.chain.tx import Transactor
from fedchain.fl.params import unflatten
from fedchain.fl.reputation import WAD, RevealedBid, choose_winner
from fedchain.audit.replay import mechanism_of
from fedchain.store import BlobStore, open_store
from fedchain.taskspec import TaskSpec, ValidationSpec, put_initial_model, put_model, put_spec, update_meta
from fedchain.updates import store_update

DEPLOYER, PUBLISHER, AGGREGATOR = 0, 1, 2
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
QUALITIES = (
    {0: 12 * WAD // 10, 1: 4 * WAD // 10, 2: WAD, 3: None},
    {0: WAD, 1: 6 * WAD // 10},  # job 2's fog node misses round 2
    {0: 11 * WAD // 10, 1: 5 * WAD // 10, 2: 9 * WAD // 10},
)
#: Seconds after the round's start at which each client's fog node commits (t_max is 300 s, the deadline 400 s).
COMMIT_OFFSETS = {0: 100, 1: 250, 2: 350, 3: 50}
#: Accounts that withdraw at the end.
WITHDRAWERS = (PUBLISHER, CLIENTS[0], 9, 11)

PARAMS = dict(
    rounds=3, target_accuracy=0, expected_duration=600, psi=10**15, phi=10**12, min_loss_reputation=WAD // 10,
    min_time_reputation=WAD // 10, min_quality=WAD // 2, max_round_time=300, reputation_cap=10 * WAD,
    client_deposit=10**16, fog_deposit=2 * 10**16, cycles_per_sample=1000, round_duration=400, bidding_duration=100,
    reveal_duration=100, time_tolerance=5, max_clients=10, second_price=False,
)


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

    def as_(self, account: int) -> FedChainContracts:
        if account not in self._bound:
            transactor = Transactor(self.w3, self.node.dev_account(account), AbiRegistry())
            self._bound[account] = FedChainContracts.bind(self.deployment, transactor)
        return self._bound[account]

    def address(self, account: int) -> str:
        return self.node.dev_account(account).address

    def set_next_timestamp(self, timestamp: int) -> None:
        """The next block (the next transaction) gets exactly ``timestamp``."""
        self.w3.provider.make_request("evm_setNextBlockTimestamp", [timestamp])  # type: ignore[arg-type]

    def advance(self, seconds: int) -> None:
        self.w3.provider.make_request("evm_increaseTime", [seconds])  # type: ignore[arg-type]
        self.w3.provider.make_request("evm_mine", [])  # type: ignore[arg-type]


def _salt(label: str) -> bytes:
    return keccak(text=label)


def drive_task(driver: Driver, store: BlobStore) -> int:
    """Run the module docstring's task from creation to withdrawals; returns its id."""
    spec = TaskSpec(dataset="mnist", model="lenet5", validation=ValidationSpec(size=64))
    params = TaskParams(model_id=put_initial_model(store, spec), dataset_id=put_spec(store, spec), **PARAMS)
    mechanism = mechanism_of(params)
    publisher, aggregator = driver.as_(PUBLISHER), driver.as_(AGGREGATOR)

    receipt = publisher.task_registry.create_task(params, driver.address(AGGREGATOR), value=10**18)
    task_id = receipt.events_of(TaskCreated)[0].task_id
    for index, (client, size) in enumerate(zip(CLIENTS, DATA_SIZES)):
        commitment = keccak(abi_encode(["uint256", "bytes32"], [size, _salt(f"data-{client}")]))
        driver.as_(client).round_ledger.join(task_id, commitment, value=params.client_deposit)
        driver.as_(client).fog_auction.open_auction(task_id, size, _salt(f"data-{client}"))
    for fog, job, frequency, price, _ in BIDS:
        sealed = keccak(abi_encode(["uint64", "uint96", "bytes32", "address"], [frequency, price, _salt(f"bid-{fog}-{job}"), driver.address(fog)]))
        driver.as_(fog).fog_auction.commit_bid(task_id, job, sealed, value=params.fog_deposit)
    driver.advance(params.bidding_duration + 1)
    for fog, job, frequency, price, revealed in BIDS:
        if revealed:
            driver.as_(fog).fog_auction.reveal_bid(task_id, job, frequency, price, _salt(f"bid-{fog}-{job}"))
    driver.advance(params.reveal_duration + 1)
    for index, client in enumerate(CLIENTS):
        bids = [RevealedBid(f, p) if revealed else None for _, job, f, p, revealed in BIDS if job == index]
        price = choose_winner(mechanism, mechanism.initial_reputation, DATA_SIZES[index], bids).price
        driver.as_(client).fog_auction.close_auction(task_id, index, value=price * params.rounds)
        data = store.put(f"job data of client {index}".encode())
        driver.as_(client).data_handoff.commit_data(task_id, index, data)
    publisher.task_registry.start_task(task_id)

    param_spec = spec.param_spec()
    generator = torch.Generator().manual_seed(7)
    global_params = torch.cat([t.reshape(-1) for t in spec.initial_params().values()])
    for round_number, qualities in enumerate(QUALITIES, start=1):
        commits: dict[int, UpdateCommitted] = {}
        started = aggregator.task_registry.state(task_id).round_started_at
        for index in sorted(qualities, key=COMMIT_OFFSETS.__getitem__):
            job = driver.as_(AGGREGATOR).fog_auction.job(task_id, index)
            winner = driver.as_(AGGREGATOR).fog_auction.bids(task_id, index)[job.winner].bidder
            fog = next(account for account, *_ in BIDS if driver.address(account) == winner)
            delta = unflatten(torch.randn(param_spec.numel, generator=generator) * 0.01, param_spec)
            meta = update_meta(spec, task_id, round_number, index, driver.address(CLIENTS[index]))
            update = store_update(store, delta, meta)
            driver.set_next_timestamp(started + COMMIT_OFFSETS[index])
            receipt = driver.as_(fog).fog_auction.commit_update(task_id, index, round_number, update)
            commits[index] = receipt.events_of(UpdateCommitted)[0]
        if round_number == 2:  # job 2's fog node missed the round: after the deadline anyone reports it
            driver.advance(params.round_duration + 1)
            aggregator.fog_auction.report_missed_round(task_id, 2)
        state = aggregator.task_registry.state(task_id)
        measurements = [
            Measurement(
                quality=0 if qualities.get(i) is None else qualities[i],
                round_time=commits[i].committed_at - state.round_started_at if i in commits else 0,
                accepted=qualities.get(i) is not None,
            )
            for i in range(len(CLIENTS))
        ]
        global_params = global_params + 0.001 * round_number
        model_hash = put_model(store, spec, task_id, round_number, unflatten(global_params, param_spec))
        aggregator.round_ledger.post_round(task_id, round_number, model_hash, 9 * WAD // 10, measurements)

    driver.as_(DEPLOYER).round_ledger.settle(task_id)
    for index in range(len(CLIENTS)):
        driver.as_(DEPLOYER).fog_auction.settle_job(task_id, index)
    for account in WITHDRAWERS:
        driver.as_(account).treasury.withdraw()
    return task_id


@pytest.fixture(scope="session")
def audit_node() -> Iterator[AnvilNode]:
    """The audit tests' own Anvil."""
    with AnvilNode(AnvilSettings(accounts=20)) as node:
        yield node


@pytest.fixture(scope="session")
def driven_task(audit_node: AnvilNode, tmp_path_factory: pytest.TempPathFactory) -> DrivenTask:
    """The module docstring's task, driven once per session, and the audit's readings of it."""
    folder = tmp_path_factory.mktemp("audit")
    w3 = audit_node.web3()
    deployment = deploy(w3, audit_node.dev_account(DEPLOYER), rpc_url=audit_node.rpc_url, rehearse_first=False)
    deployment_file = deployment.save(folder / "deployment.json")
    store_url = folder / "store"
    task_id = drive_task(Driver(audit_node, deployment), open_store(store_url))
    return DrivenTask(audit_node, w3, deployment, deployment_file, store_url, task_id, read_chain(w3, deployment, task_id))
