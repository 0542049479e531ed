"""One run of the whole system: a deployment, one task, and its participants as separate processes.

:class:`SystemRun` is what ``fedchain demo`` and the end-to-end and fault tests
drive, step by step::

    run = SystemRun(w3, funder, rpc_url, RunSettings(run_dir), supervisor)
    run.deploy()                                   # contracts and the arbiter committee; keys derive from the deployment
    run.fund(required_funds(roster, terms, budget))
    task_id = run.create_task(PublishConfig(terms=terms, spec=spec, budget=budget))   # as the publisher
    run.start_verifiers(); run.start_fogs(roster.fogs); run.start_aggregator(); run.start_clients(roster.clients)
    run.await_handoffs(len(roster.clients))       # auctions closed, data handed off
    run.start_task()                               # the publisher starts round 1
    run.await_settled([fog.name for fog in roster.fogs])
    report = run.audit()

The publisher acts in this process (through the same service functions as
``fedchain task``); everyone else is a process of its own, started by the
:class:`~fedchain.system.supervisor.Supervisor`, talking to the others only
through the chain and the blob store. Every wait polls the chain and fails
with :class:`~fedchain.errors.SystemTimeout` (what it waited for and where
the logs are) or :class:`~fedchain.errors.ParticipantDied` (with the tail of
the dead process's log).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from eth_account.signers.local import LocalAccount
from web3 import Web3

from fedchain.agent.session import ChainSession, open_session
from fedchain.audit import AuditReport, audit_on_chain
from fedchain.chain.bindings import TaskStatus
from fedchain.chain.deployment import Deployment, deploy
from fedchain.chain.recipe import DEPLOYMENT_ORDER, ArbiterSettings, deploy_fedchain, planned_addresses
from fedchain.chain.tx import Transactor
from fedchain.console import machine_json
from fedchain.errors import SystemTimeout
from fedchain.publisher import PublishConfig, create_task, start_task
from fedchain.publisher.service import check_task_windows, readiness
from fedchain.system.launch import (
    AgentOptions,
    RunFolder,
    aggregator_process,
    client_process,
    fog_process,
    verifier_process,
)
from fedchain.system.progress import EventLog, TaskProgress, read_progress
from fedchain.system.roster import ClientPlan, FogPlan, participant_account
from fedchain.system.supervisor import Supervisor

log = logging.getLogger(__name__)

T = TypeVar("T")

#: The publisher's and the aggregator's names (keys, logs, state files).
PUBLISHER, AGGREGATOR = "publisher", "aggregator"
#: The arbiter committee of a run: members (``verifier-0``...), the quorum, and the verdict window in seconds.
ARBITERS, QUORUM, VERDICT_WINDOW_S = 3, 2, 120
#: Seconds between two looks at the chain while waiting.
WAIT_POLL_S = 0.25


@dataclass(frozen=True)
class RunSettings:
    """Where a run writes, and the options its agents share.

    Attributes:
        run_dir: the run folder (deployment, store, states, logs); created if missing.
        agents: data root, poll interval and seed handed to every participant's command.
        arbiters: members of the deployment's arbiter committee (each a ``verifier run`` process).
        quorum: signatures a verdict needs.
        verdict_window: seconds the committee has to judge a challenge.
        store: the blob store's URL every participant uses (None: the run folder's ``store/``).
    """

    run_dir: Path
    agents: AgentOptions = field(default_factory=AgentOptions)
    arbiters: int = ARBITERS
    quorum: int = QUORUM
    verdict_window: int = VERDICT_WINDOW_S
    store: str | None = None

    @property
    def verifiers(self) -> tuple[str, ...]:
        """The committee members' names (keys, logs, state files)."""
        return tuple(f"verifier-{i}" for i in range(self.arbiters))


class SystemRun:
    """A deployment, one task on it, and the processes of its participants (see the module docstring)."""

    def __init__(
        self, w3: Web3, funder: LocalAccount, rpc_url: str, settings: RunSettings, supervisor: Supervisor
    ) -> None:
        self.w3 = w3
        self.funder = funder
        self.rpc_url = rpc_url
        self.settings = settings
        self.supervisor = supervisor
        self.folder = RunFolder(settings.run_dir, settings.store)
        self._deployment: Deployment | None = None
        self._sessions: dict[str, ChainSession] = {}
        self._events: EventLog | None = None
        self.task_id: int | None = None
        self.partitions = 0
        #: The ERC-20 token of the run's task (:meth:`deploy_demo_token`); None: ether.
        self.token: str | None = None

    # ------------------------------------------------------------------ chain and keys

    @property
    def deployment(self) -> Deployment:
        if self._deployment is None:
            raise RuntimeError("deploy() first")
        return self._deployment

    def deploy(self, *, rehearse: bool = False) -> Deployment:
        """Deploy the contracts from the funding key, with the run's arbiter committee, and write the run's
        deployment file. The members' keys derive from the first contract's address, known from the nonce."""
        self.folder.root.mkdir(parents=True, exist_ok=True)
        nonce = int(self.w3.eth.get_transaction_count(self.funder.address, "pending"))
        salt = planned_addresses(self.funder.address, nonce)[DEPLOYMENT_ORDER[0]]
        members = [participant_account(self.funder.key, salt, name).address for name in self.settings.verifiers]
        committee = ArbiterSettings.of(
            members, quorum=self.settings.quorum, verdict_window=self.settings.verdict_window
        )
        recipe = functools.partial(deploy_fedchain, arbiters=committee)
        self._deployment = deploy(self.w3, self.funder, rpc_url=self.rpc_url, recipe=recipe, rehearse_first=rehearse)
        self._deployment.save(self.folder.deployment_file)
        log.info("deployed to chain %d; deployment file %s", self._deployment.chain_id, self.folder.deployment_file)
        return self._deployment

    def account(self, name: str) -> LocalAccount:
        """Participant ``name``'s key, derived from the funding key and this deployment."""
        return participant_account(self.funder.key, self.deployment.contracts[0].address, name)

    def fund(self, amounts: dict[str, int]) -> None:
        """Top every named participant up to the given wei from the funding key."""
        sender = Transactor(self.w3, self.funder)
        pending = []
        for name, wanted in amounts.items():  # all in flight at once: one block on a chain with a block time
            address = self.account(name).address
            missing = wanted - int(self.w3.eth.get_balance(address))
            if missing > 0:
                pending.append((name, address, missing, sender.submit(address, b"", value=missing)))
        for name, address, missing, tx in pending:
            sender.wait(tx)
            log.info("funded %s (%s) with %d wei", name, address, missing)

    def deploy_demo_token(self, amounts: dict[str, int], units_per_ether: int) -> str:
        """Deploy a demo stablecoin (``DemoStablecoin``: 6 decimals, permit) from the funding key, mint each named
        participant its units, and give the fog nodes its rate (``units_per_ether``); returns its address."""
        from fedchain.chain.bindings import DemoStablecoin
        from fedchain.chain.compile import compile_contracts

        sender = Transactor(self.w3, self.funder)
        token = DemoStablecoin.deploy(sender, compile_contracts()["DemoStablecoin"].bytecode)
        pending = [
            (
                name,
                units,
                token.transactor.submit(
                    token.address, token.encode("mint(address,uint256)", self.account(name).address, units)
                ),
            )
            for name, units in amounts.items()
        ]
        for name, units, tx in pending:  # all in flight at once, as fund()
            sender.wait(tx)
            log.info("minted %s %d units of %s", name, units, token.address)
        agents = dataclasses.replace(self.settings.agents, token_rates={token.address: units_per_ether})
        self.settings = dataclasses.replace(self.settings, agents=agents)
        self.token = token.address
        return token.address

    def session(self, name: str) -> ChainSession:
        """An in-process session signing as participant ``name`` (the publisher's, or a test's look at the chain)."""
        if name not in self._sessions:
            self._sessions[name] = open_session(
                self.folder.deployment_file,
                rpc_url=self.rpc_url,
                store_url=self.folder.store_url,
                account=self.account(name),
            )
        return self._sessions[name]

    @property
    def events(self) -> EventLog:
        """The deployment's events seen so far (call ``refresh()`` or use ``find``)."""
        if self._events is None:
            self._events = EventLog(self.session(PUBLISHER))
        return self._events

    # ------------------------------------------------------------------ the task

    def create_task(self, config: PublishConfig) -> int:
        """Create the run's task as the publisher, with the aggregator's account as its aggregator."""
        config = PublishConfig(
            terms=config.terms,
            spec=config.spec,
            budget=config.budget,
            aggregator=self.account(AGGREGATOR).address,
            confirmations=config.confirmations,
            token=config.token if config.token is not None else self.token,
        )
        check_task_windows(self.session(PUBLISHER), config)  # windows too short for this chain's blocks: refused
        self.task_id = create_task(self.session(PUBLISHER), config).task_id
        return self.task_id

    def start_task(self, *, timeout_s: float = 240.0, tick: Callable[[], None] | None = None) -> None:
        """Start round 1 as the publisher, once the aggregator has posted its bond."""
        self.await_bonded(timeout_s=timeout_s, tick=tick)
        start_task(self.session(PUBLISHER), self._task())

    def progress(self) -> TaskProgress:
        """Where the task is now."""
        return read_progress(self.session(PUBLISHER), self._task(), self.events)

    def _task(self) -> int:
        if self.task_id is None:
            raise RuntimeError("create_task() first")
        return self.task_id

    # ------------------------------------------------------------------ processes

    def start_fogs(
        self, fogs: Sequence[FogPlan], *, timeout_s: float = 180.0, tick: Callable[[], None] | None = None
    ) -> None:
        """Start a process per fog node and wait until each has caught up with the chain (its state file exists)."""
        for plan in fogs:
            self.supervisor.start(
                fog_process(plan, self.folder, self.account(plan.name).key, self._task(), self.settings.agents)
            )
        names = [plan.name for plan in fogs]
        self.wait_until(
            lambda: all(self.folder.state(name).exists() for name in names),
            f"fog nodes {', '.join(names)} to start watching the chain",
            timeout_s,
            tick,
        )

    def start_aggregator(
        self,
        name: str = AGGREGATOR,
        *,
        zero_client: tuple[str, int] | None = None,
        crash_after_round: int | None = None,
    ) -> None:
        """Start the aggregator's process (it posts its bond, then waits while the task is open); ``zero_client``
        (client address, round) makes it post quality 0 for that client in that round: a dishonest aggregator;
        ``crash_after_round`` makes it die by SIGKILL right after posting that round: a silent one."""
        key = self.account(AGGREGATOR).key
        spec = aggregator_process(
            self.folder,
            key,
            self._task(),
            self.settings.agents,
            name=name,
            zero_client=zero_client,
            crash_after_round=crash_after_round,
        )
        self.supervisor.start(spec)

    def start_verifiers(self) -> None:
        """Start a process per member of the arbiter committee (they run until the run stops)."""
        for name in self.settings.verifiers:
            self.supervisor.start(verifier_process(name, self.folder, self.account(name).key, self.settings.agents))

    def await_bonded(self, *, timeout_s: float, tick: Callable[[], None] | None = None) -> None:
        """Wait until the task's aggregator bond is posted (a task does not start without it)."""
        disputes = self.session(PUBLISHER).contracts.disputes
        task_id = self._task()
        self.wait_until(lambda: disputes.bonded(task_id), "the aggregator to post its bond", timeout_s, tick)

    def start_clients(self, clients: Sequence[ClientPlan], partitions: int | None = None) -> None:
        """Start a process per client; the dataset is split into ``partitions`` parts (default: one per client)."""
        self.partitions = partitions or len(clients)
        for plan in clients:
            key = self.account(plan.name).key
            self.supervisor.start(
                client_process(plan, self.partitions, self.folder, key, self._task(), self.settings.agents)
            )

    # ------------------------------------------------------------------ waiting

    def wait_until(
        self, condition: Callable[[], T | None], what: str, timeout_s: float, tick: Callable[[], None] | None = None
    ) -> T:
        """Poll ``condition`` until it returns something truthy (returned); between polls check that no
        participant died and call ``tick`` (a progress display)."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.supervisor.check()
            result = condition()
            if result:
                return result
            if tick is not None:
                tick()
            if time.monotonic() > deadline:
                raise SystemTimeout(f"waited {timeout_s:.0f} s for {what}; the logs are in {self.folder.root / 'logs'}")
            time.sleep(WAIT_POLL_S)

    def await_handoffs(self, clients: int, *, timeout_s: float, tick: Callable[[], None] | None = None) -> None:
        """Wait until ``clients`` clients joined and each job is awarded with its data handed off, or vacant."""
        session = self.session(PUBLISHER)
        task_id = self._task()

        def ready() -> bool:
            state = readiness(session, task_id)
            return state.clients >= clients and not state.waiting

        self.wait_until(
            ready, f"{clients} clients to join, auction their jobs and hand off their data", timeout_s, tick
        )

    def fog_withdrew(self, name: str) -> bool:
        """Whether fog node ``name`` settled its jobs of the task and withdrew (from its state file)."""
        try:
            state = json.loads(self.folder.state(name).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return False
        task = state.get("data", {}).get("tasks", {}).get(str(self._task()), {})
        return task.get("withdrawn") is not None

    def await_settled(self, fogs: Sequence[str], *, timeout_s: float, tick: Callable[[], None] | None = None) -> None:
        """Wait until the task is settled, the clients and the aggregator exited, and ``fogs`` withdrew."""
        registry = self.session(PUBLISHER).contracts.task_registry
        task_id = self._task()
        finishing = [child for child in self.supervisor.children if child.spec.exits_when_done]

        def done() -> bool:
            if registry.state(task_id).status != TaskStatus.SETTLED:
                return False
            return all(not child.running for child in finishing) and all(self.fog_withdrew(name) for name in fogs)

        self.wait_until(done, "the task to finish and every participant to settle and withdraw", timeout_s, tick)

    # ------------------------------------------------------------------ the audit

    def audit(self, *, verify_scores: bool = True) -> AuditReport:
        """Audit the task from the chain and the store, as ``fedchain audit`` does; the JSON goes to the run folder."""
        session = self.session(PUBLISHER)
        report = audit_on_chain(
            session.w3,
            session.deployment,
            self._task(),
            session.store,
            verify_scores=verify_scores,
            data_root=self.settings.agents.data_root,
        )
        (self.folder.root / "audit.json").write_text(machine_json(report.to_dict()))
        return report
