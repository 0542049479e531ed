"""``fedchain flower example``: the Flower example app, end to end, on a chain and a Flower cluster of its own.

What a federation that already runs on Flower does to pay its clients through FedChain, every step real:

1. a local Anvil (blocks every ``block_time`` seconds), FedChain deployed, a blob store in the run folder;
2. the publisher creates a *self-trained* task (no fog auction) and posts the aggregator's bond for it;
3. each client joins with its own wallet (deposit, data-size commitment): :meth:`FedChainClient.join`;
4. the publisher starts the task; a SuperLink and one SuperNode per client start as processes on loopback
   (:class:`~fedchain.flower.cluster.FlowerCluster`), each SuperNode with its client's key, the SuperLink with
   the aggregator's; ``flwr run`` runs the app with :class:`IncentiveStrategy` around Flower's FedAvg;
5. once the last round's challenge window has passed, each client settles and withdraws;
6. the audit replays the chain and re-runs every score (``fedchain audit --verify-scores``).

With ``baseline`` the same app runs first without FedChain (plain FedAvg) on the same cluster, so the round
times of the two compare on one machine in one run.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedchain.agent.session import ChainSession, open_session
from fedchain.chain.keys import PRIVATE_KEY_ENV
from fedchain.chain.node import AnvilNode, AnvilSettings
from fedchain.data.datasets import DATA_ROOT_ENV, resolve_data_root
from fedchain.errors import ConfigError, FedchainError
from fedchain.flower.cluster import ConfigValue, RunResult
from fedchain.publisher.terms import PublishConfig, TaskTerms
from fedchain.taskspec import TaskSpec, ValidationSpec

log = logging.getLogger(__name__)

#: Anvil's dev accounts: 0 deploys, then the publisher, the aggregator and one per client.
DEPLOYER, PUBLISHER, AGGREGATOR, FIRST_CLIENT = 0, 1, 2, 3


@dataclass(frozen=True)
class ExampleSettings:
    """One run of the example.

    Attributes:
        app_dir: the Flower app (``examples/flower``).
        run_dir: where the deployment, store, Flower's logs and the results go.
        clients: SuperNodes, one client (wallet) each.
        rounds: the task's rounds.
        samples: MNIST training samples per client.
        free_rider: the partition id of a client that trains nothing; None: every client trains.
        lost_reply: the partition id of an honest client whose reply of round 2 is lost after it committed (its
            ClientApp fails): the server scores the committed update from the store. None: no reply is lost.
        baseline: run the app without FedChain first, for the round-time comparison.
        block_time: seconds between the local chain's blocks (None: a block per transaction).
        challenge_window: seconds a round can be challenged before its money moves.
        data_root: the datasets' folder (None: ``$FEDCHAIN_DATA_ROOT``).
        simulation: run the apps in Flower's simulation engine (Ray) instead of a SuperLink and SuperNodes.
        aggregate: the model each round posts: the wrapped FedAvg's, or FedChain's own strategy's (``fedchain``).
    """

    app_dir: Path
    run_dir: Path
    clients: int = 3
    rounds: int = 3
    samples: int = 600
    free_rider: int | None = None
    lost_reply: int | None = None
    baseline: bool = True
    block_time: float | None = 1.0
    challenge_window: int = 4
    data_root: str | None = None
    simulation: bool = False
    aggregate: str = "wrapped"

    def __post_init__(self) -> None:
        if self.clients < 2:
            raise ConfigError(f"the example needs at least 2 clients, got {self.clients}")
        if self.aggregate not in ("wrapped", "fedchain"):
            raise ConfigError(f"aggregate must be 'wrapped' or 'fedchain', got {self.aggregate!r}")
        if self.free_rider is not None and not 0 <= self.free_rider < self.clients:
            raise ConfigError(f"free_rider must be a partition id below {self.clients}, got {self.free_rider}")
        if self.lost_reply is not None and not 0 <= self.lost_reply < self.clients:
            raise ConfigError(f"lost_reply must be a partition id below {self.clients}, got {self.lost_reply}")
        if not (self.app_dir / "pyproject.toml").is_file():
            raise ConfigError(
                f"{self.app_dir} is not a Flower app (no pyproject.toml)",
                hint="pass --app with the path of examples/flower in a FedChain checkout",
            )


@dataclass(frozen=True)
class ClientOutcome:
    """One client after settlement."""

    partition: int
    account: str
    index: int
    #: The round whose finalisation removed it (its deposit forfeited to the sink); None: in good standing.
    removed_round: int | None
    #: Eq. 15 pay of its final rounds, eq. 16 bonus and deposit back at settlement, wei (from the audit's replay).
    earned: int
    bonus: int
    deposit_returned: int
    withdrawn: int


@dataclass(frozen=True)
class ExampleResult:
    task_id: int
    deployment_file: Path
    store_url: str
    rpc_url: str
    clients: tuple[ClientOutcome, ...]
    deposit: int
    audit: Any
    #: The ServerApp's figures (round wall times, the drain after the loop, gas per post), by mode.
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)


def example_task(settings: ExampleSettings) -> PublishConfig:
    """The self-trained task the example runs: FedAvg scoring, windows sized for a local chain."""
    terms = TaskTerms(
        rounds=settings.rounds,
        expected_duration=120 * settings.rounds,
        max_round_time=120,
        round_duration=300,
        max_clients=settings.clients,
        challenge_window=settings.challenge_window,
        self_trained=True,
    )
    spec = TaskSpec(model="cnn", strategy="fedavg", validation=ValidationSpec(size=500))
    return PublishConfig(terms=terms, spec=spec, budget=10**18, fund_bond=True, expected_clients=settings.clients)


def run_example(
    settings: ExampleSettings,
    *,
    progress: Callable[[str], None] = log.info,
    inspect: Callable[[ChainSession, int], None] | None = None,
) -> ExampleResult:
    """Run the example (module docstring) and return each client's outcome, the audit and the figures.

    ``inspect``, if given, is called with the publisher's session and the task id once everything is done, while
    the chain still runs (a test's look at the chain and the store)."""
    from fedchain.audit.auditor import audit_on_chain
    from fedchain.chain.deployment import deploy
    from fedchain.chain.recipe import deploy_fedchain
    from fedchain.flower.client import SIMULATION_KEYS_ENV, FedChainClient
    from fedchain.flower.cluster import FlowerCluster, partition_nodes, run_simulation
    from fedchain.publisher.service import create_task, start_task

    data_root = str(resolve_data_root(settings.data_root))
    run_dir = settings.run_dir.resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    deployment_file, store_url = run_dir / "deployment.json", str(run_dir / "store")
    accounts = FIRST_CLIENT + settings.clients
    with AnvilNode(AnvilSettings(block_time=settings.block_time, accounts=max(accounts, 10))) as node:
        assert node.rpc_url is not None
        w3 = node.web3()
        deployment = deploy(
            w3, node.dev_account(DEPLOYER), rpc_url=node.rpc_url, recipe=functools.partial(deploy_fedchain)
        )
        deployment.save(deployment_file)

        def session(index: int) -> ChainSession:
            return open_session(
                deployment_file, rpc_url=node.rpc_url, store_url=store_url, account=node.dev_account(index)
            )

        publisher = session(PUBLISHER)
        config = example_task(settings)
        aggregator = node.dev_account(AGGREGATOR)
        config = dataclasses.replace(config, aggregator=aggregator.address)
        task_id = create_task(publisher, config).task_id
        progress(
            f"task {task_id} created (self-trained, {settings.rounds} rounds); the publisher bonded its aggregator"
        )
        clients = [FedChainClient(session(FIRST_CLIENT + p), task_id) for p in range(settings.clients)]
        indices = [client.join(settings.samples) for client in clients]
        progress(f"{settings.clients} clients joined with {settings.samples} samples each")
        start_task(publisher, task_id)
        progress("task started: round 1 is open")

        figures_dir = run_dir / "figures"
        common: dict[str, ConfigValue] = {
            "fedchain-deployment": str(deployment_file),
            "fedchain-store": store_url,
            "fedchain-task": task_id,
            "fedchain-rpc-url": node.rpc_url,
            "num-clients": settings.clients,
            "num-server-rounds": settings.rounds,
            "samples-per-client": settings.samples,
            "free-rider": -1 if settings.free_rider is None else settings.free_rider,
            "lost-reply": -1 if settings.lost_reply is None else settings.lost_reply,
            "out-dir": str(figures_dir),
            "fedchain-aggregate": settings.aggregate,
        }
        keys = [client.session.transactor.account.key.hex() for client in clients]
        runs = [("plain FedAvg", False)] if settings.baseline else []
        runs.append(("FedAvg with FedChain", True))
        if settings.simulation:
            # One process environment for the ServerApp and every virtual client: a key per partition.
            env = {DATA_ROOT_ENV: data_root, PRIVATE_KEY_ENV: aggregator.key.hex(), SIMULATION_KEYS_ENV: ",".join(keys)}
            progress(f"Flower: the simulation engine with {settings.clients} virtual SuperNodes")
            for name, on in runs:
                _finished(
                    run_simulation(
                        settings.app_dir, run_dir / "flower", settings.clients, {**common, "fedchain": on}, env=env
                    ),
                    name,
                    progress,
                )
        else:
            envs = [{PRIVATE_KEY_ENV: key, DATA_ROOT_ENV: data_root} for key in keys]
            with FlowerCluster(
                run_dir / "flower",
                partition_nodes(settings.clients, envs),
                env={DATA_ROOT_ENV: data_root},
                superlink_env={PRIVATE_KEY_ENV: aggregator.key.hex()},
            ) as cluster:
                progress(f"Flower: a SuperLink at {cluster.superlink_address} and {settings.clients} SuperNodes")
                for name, on in runs:
                    _finished(cluster.run(settings.app_dir, {**common, "fedchain": on}, timeout_s=900), name, progress)

        withdrawn = [_withdraw(client, progress) for client in clients]
        progress("auditing the task: the chain's events replayed, every score re-run from the store")
        report = audit_on_chain(w3, deployment, task_id, publisher.store, verify_scores=True, data_root=data_root)
        replayed = {c.index: c for c in report.history.clients}
        outcomes = tuple(
            ClientOutcome(
                p,
                c.account,
                i,
                replayed[i].removed_round,
                replayed[i].earned,
                replayed[i].bonus or 0,
                replayed[i].deposit_returned or 0,
                w,
            )
            for p, (c, i, w) in enumerate(zip(clients, indices, withdrawn, strict=True))
        )
        figures = {
            path.stem: json.loads(path.read_text()) for path in sorted(figures_dir.glob("*.json")) if path.is_file()
        }
        deposit = int(publisher.contracts.task_registry.params(task_id).client_deposit)
        if inspect is not None:
            inspect(publisher, task_id)
        return ExampleResult(task_id, deployment_file, store_url, node.rpc_url, outcomes, deposit, report, figures)


def _finished(result: RunResult, name: str, progress: Callable[[str], None]) -> None:
    """Report a finished Flower run; raise unless it completed."""
    if not result.succeeded:
        raise FedchainError(
            f"the Flower run ({name}) ended {result.status}: {result.details}\n{result.log[-3000:]}",
            hint=f"read the run's log {result.log_path} and the SuperNodes' logs beside it",
        )
    progress(f"{name}: run {result.run_id} completed")


def _withdraw(client: Any, progress: Callable[[str], None], timeout_s: float = 120.0) -> int:
    """Settle and withdraw as ``client`` once the last round is final (waits out its challenge window)."""
    deadline = time.monotonic() + timeout_s
    while True:
        settlement, amount = client.withdraw()
        if not settlement.pending:
            progress(f"client {client.account} withdrew {amount / 1e18:.4f} ETH")
            return int(amount)
        if time.monotonic() > deadline:
            raise FedchainError(f"rounds {settlement.pending} of the task did not become final in {timeout_s:.0f} s")
        time.sleep(1.0)
