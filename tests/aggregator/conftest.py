"""A FedChain deployment on an Anvil of this package's own, and the participants of a task, each with its own key.

The chain's clock is moved on (``evm_increaseTime``) to pass bidding, reveal
and round deadlines, so these tests use their own node. Accounts (Anvil's
public test keys): 0 deployer, 1 publisher, 2 aggregator, 3..8 clients, 9..14 fog nodes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from eth_utils import keccak

from fedchain.agent.session import ChainSession, open_session
from fedchain.audit.replay import mechanism_of
from fedchain.chain.deployment import Deployment, deploy
from fedchain.chain.node import AnvilNode, AnvilSettings
from fedchain.client.commitments import bid_commitment, data_commitment
from fedchain.fl.params import flatten, unflatten
from fedchain.fl.reputation import RevealedBid, choose_winner
from fedchain.publisher import PublishConfig, TaskTerms, create_task, start_task
from fedchain.publisher.service import post_bond
from fedchain.taskspec import TaskSpec, ValidationSpec, load_model, load_spec, update_meta
from fedchain.trainer.evaluation import local_losses
from fedchain.trainer.local import client_generator, train_one_client
from fedchain.updates import store_update

DEPLOYER, PUBLISHER, AGGREGATOR = 0, 1, 2
CLIENTS = tuple(range(3, 9))
FOGS = tuple(range(9, 15))

#: Small, fast task terms: rounds of 2; auction windows the tests cross by moving the clock, wide enough for a loaded machine.
TERMS = TaskTerms(
    rounds=2,
    expected_duration=200,
    round_duration=60,
    bidding_duration=120,
    reveal_duration=120,
    max_round_time=100,
    time_tolerance=5,
)
#: A LeNet-5 on MNIST, validated on 200 test images.
SPEC = TaskSpec(dataset="mnist", model="lenet5", lr=0.05, batch_size=32, validation=ValidationSpec(size=200))


@pytest.fixture(scope="session")
def chain_node() -> Iterator[AnvilNode]:
    """This package's Anvil (its clock jumps must not disturb other tests)."""
    with AnvilNode(AnvilSettings(accounts=16)) as node:
        yield node


@pytest.fixture(scope="session")
def deployment_file(chain_node: AnvilNode, tmp_path_factory: pytest.TempPathFactory) -> Path:
    deployment: Deployment = deploy(
        chain_node.web3(), chain_node.dev_account(DEPLOYER), rpc_url=chain_node.rpc_url, rehearse_first=False
    )
    return deployment.save(tmp_path_factory.mktemp("deployment") / "deployment.json")


@dataclass
class World:
    """Sessions of every participant over one deployment and one blob store, and the chain's clock."""

    node: AnvilNode
    deployment_file: Path
    store_url: str
    sessions: dict[int, ChainSession] = field(default_factory=dict)

    def session(self, account: int) -> ChainSession:
        if account not in self.sessions:
            self.sessions[account] = open_session(
                self.deployment_file, store_url=self.store_url, account=self.node.dev_account(account)
            )
        return self.sessions[account]

    @property
    def publisher(self) -> ChainSession:
        return self.session(PUBLISHER)

    @property
    def aggregator(self) -> ChainSession:
        return self.session(AGGREGATOR)

    def advance(self, seconds: int) -> None:
        """Move the chain's clock on by ``seconds`` and mine a block."""
        w3 = self.publisher.w3
        w3.provider.make_request("evm_increaseTime", [seconds])
        w3.provider.make_request("evm_mine", [])

    def pass_challenge_window(self, task_id: int) -> None:
        """Move the chain's clock past the challenge window of every round of ``task_id`` posted so far."""
        self.advance(self.publisher.contracts.task_registry.params(task_id).challenge_window + 1)

    def create(self, terms: TaskTerms = TERMS, spec: TaskSpec = SPEC, budget: int = 10**18) -> int:
        config = PublishConfig(terms=terms, spec=spec, budget=budget, aggregator=self.aggregator.address)
        return create_task(self.publisher, config).task_id

    def join_and_auction(self, task_id: int, client: int, data_size: int) -> None:
        salt = keccak(text=f"salt-{client}")
        session = self.session(client)
        commitment = data_commitment(data_size, salt)
        session.contracts.round_ledger.join(task_id, commitment, value=TERMS.client_deposit)
        session.contracts.fog_auction.open_auction(task_id, data_size, salt)

    def bid(self, task_id: int, index: int, fog: int, frequency: int, price: int) -> None:
        session = self.session(fog)
        salt = keccak(text=f"bid-{fog}-{index}")
        commitment = bid_commitment(frequency, price, salt, session.address)
        session.contracts.fog_auction.commit_bid(task_id, index, commitment, value=TERMS.fog_deposit)

    def reveal(self, task_id: int, index: int, fog: int, frequency: int, price: int) -> None:
        salt = keccak(text=f"bid-{fog}-{index}")
        self.session(fog).contracts.fog_auction.reveal_bid(task_id, index, frequency, price, salt)

    def close(self, task_id: int, index: int, client: int) -> None:
        """Close the auction, escrowing exactly what the contract will award (from the Python mechanism)."""
        contracts = self.session(client).contracts
        params = contracts.task_registry.params(task_id)
        job = contracts.fog_auction.job(task_id, index)
        bids = contracts.fog_auction.bids(task_id, index)
        loss_rep, _ = contracts.round_ledger.reputation(task_id, index)
        mechanism = mechanism_of(params)
        revealed = [RevealedBid(b.frequency, b.price) if b.revealed else None for b in bids]
        price = choose_winner(mechanism, loss_rep, job.data_size, revealed).price
        contracts.fog_auction.close_auction(task_id, index, value=price * params.rounds)

    def staffed_task(
        self,
        bids: dict[int, list[tuple[int, int]]],
        *,
        terms: TaskTerms = TERMS,
        data_size: int = 64,
        start: bool = True,
        spec: TaskSpec = SPEC,
        bond: bool = True,
        budget: int = 10**18,
    ) -> int:
        """A task whose client ``i`` (account CLIENTS[i]) auctioned its job to ``bids[i]`` = [(fog, price), ...].

        With ``bond`` the aggregator posts its bond while the task is open (as ``fedchain aggregator run`` does), so
        that the task can start."""
        task_id = self.create(terms, spec, budget)
        for index in bids:
            self.join_and_auction(task_id, CLIENTS[index], data_size)
        for index, offers in bids.items():
            for fog, price in offers:
                self.bid(task_id, index, fog, 10**9, price)
        self.advance(TERMS.bidding_duration + 1)
        for index, offers in bids.items():
            for fog, price in offers:
                self.reveal(task_id, index, fog, 10**9, price)
        self.advance(TERMS.reveal_duration + 1)
        for index in bids:
            self.close(task_id, index, CLIENTS[index])
        if bond:
            post_bond(self.aggregator, task_id)
        if start:
            start_task(self.publisher, task_id, force=True)  # the tests play the fog nodes: no data handed off
        return task_id

    def global_model(self, task_id: int, model_hash: bytes, round_number: int) -> torch.Tensor:
        spec = load_spec(self.publisher.store, self.publisher.contracts.task_registry.params(task_id).dataset_id)
        params = load_model(self.publisher.store, spec, model_hash, task_id=task_id, round_number=round_number)
        return flatten(params, spec.param_spec())[0]

    def commit_trained_update(
        self,
        task_id: int,
        index: int,
        fog: int,
        round_number: int,
        start: torch.Tensor,
        images: torch.Tensor,
        labels: torch.Tensor,
    ) -> bytes:
        """Train client ``index``'s job from ``start`` as its fog node would, store the delta (with the trained
        model's local losses when the task's strategy needs them) and commit its hash."""
        spec = load_spec(self.publisher.store, self.publisher.contracts.task_registry.params(task_id).dataset_id)
        model = spec.model_spec().build()
        param_spec = spec.param_spec()
        model.load_state_dict(unflatten(start, param_spec))
        train_one_client(model, images, labels, spec.train_config(round_number), client_generator(spec.seed, index))
        flat_delta = flatten(model.state_dict(), param_spec)[0] - start
        losses = None
        if spec.local_loss_count(len(labels)) is not None:
            losses = local_losses(spec.model_spec(), start + flat_delta, (images, labels))
        return self.commit_params(task_id, index, fog, round_number, unflatten(flat_delta, param_spec), spec, losses)

    def commit_params(
        self,
        task_id: int,
        index: int,
        fog: int,
        round_number: int,
        params: dict[str, torch.Tensor],
        spec: TaskSpec,
        losses: torch.Tensor | None = None,
    ) -> bytes:
        client = self.session(CLIENTS[index]).address
        meta = update_meta(spec, task_id, round_number, index, client)
        digest = store_update(self.session(fog).store, params, meta, local_losses=losses)
        root = keccak(text=f"transcript {task_id} {index} {round_number}")  # no fog challenge is judged here
        self.session(fog).contracts.fog_auction.commit_update(task_id, index, round_number, digest, root)
        return digest


@pytest.fixture
def world(chain_node: AnvilNode, deployment_file: Path, tmp_path: Path) -> World:
    """Every participant over the package's deployment and a fresh blob store folder."""
    return World(chain_node, deployment_file, str(tmp_path / "store"))
