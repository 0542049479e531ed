"""A flaky RPC: every participant talks to the chain through a proxy that drops, refuses and stalls requests.

Public endpoints answer HTTP 429 when busy, 502/503 when a backend restarts,
reset connections, and sometimes time out after the request took effect. The
proxy (tests/faultproxy.py) does all of these, to one request in five, between
every process of a small task and the chain; the task must still complete with
a clean audit, so no transaction was lost or sent twice and no wei went astray.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fedchain.chain.node import AnvilNode
from fedchain.publisher import PublishConfig, TaskTerms
from fedchain.system import (
    AGGREGATOR,
    PUBLISHER,
    AgentOptions,
    ClientPlan,
    FogPlan,
    Roster,
    RunSettings,
    Supervisor,
    SystemRun,
    required_funds,
)
from fedchain.taskspec import TaskSpec, ValidationSpec
from fog.bidding import CostModel
from tests.faultproxy import Fault, FaultProxy
from tests.system.conftest import FUNDER

TERMS = TaskTerms(
    rounds=2,
    expected_duration=60,
    psi=10**15,
    phi=10**12,
    min_loss_reputation=0.1,
    min_time_reputation=0.1,
    min_quality=0.5,
    max_round_time=45,
    reputation_cap=2.0,
    client_deposit=10**16,
    fog_deposit=2 * 10**16,
    cycles_per_sample=5 * 10**8,
    round_duration=45,
    bidding_duration=15,
    reveal_duration=15,
    time_tolerance=5,
    max_clients=2,
    challenge_window=20,
)
SPEC = TaskSpec(
    dataset="mnist", model="lenet5", lr=0.1, batch_size=16, local_epochs=1, validation=ValidationSpec(size=200)
)
ROSTER = Roster(
    clients=(ClientPlan("client-0", 0, 24), ClientPlan("client-1", 1, 24)),
    fogs=(
        FogPlan("fog-a", CostModel(frequency=1_600_000_000, alpha=2.5e-15, margin=0.1)),
        FogPlan("fog-b", CostModel(frequency=1_600_000_000, alpha=2.5e-15, margin=0.2)),
    ),
)
BUDGET = 10**17
#: The most one stage may take on a busy 2-core machine (process start-up dominates; retries add seconds).
STAGE_TIMEOUT_S = 300.0
#: Share of requests that meet a fault.
FAULT_RATE = 0.2


@pytest.mark.slow
def test_a_task_completes_through_a_flaky_rpc_and_its_audit_passes(
    anvil: AnvilNode, data_root: Path, tmp_path: Path
) -> None:
    # prepare: a proxy in front of the chain that faults one request in five; every participant uses it
    with (
        FaultProxy(
            anvil.rpc_url, rate=FAULT_RATE, seed=11, faults=tuple(Fault), delay_s=2.0, lifetime_s=900.0
        ) as proxy,
        Supervisor() as supervisor,
    ):
        run = SystemRun(
            anvil.web3(),
            anvil.dev_account(FUNDER),
            proxy.url,
            RunSettings(tmp_path / "run", AgentOptions(data_root)),
            supervisor,
        )

        # execute: the whole task, every process (and the publisher here) through the proxy
        run.deploy()
        run.fund(required_funds(ROSTER, TERMS, BUDGET, publisher=PUBLISHER, aggregator=AGGREGATOR))
        run.create_task(PublishConfig(terms=TERMS, spec=SPEC, budget=BUDGET))
        run.start_fogs(ROSTER.fogs, timeout_s=STAGE_TIMEOUT_S)
        run.start_aggregator()
        run.start_clients(ROSTER.clients)
        run.await_handoffs(len(ROSTER.clients), timeout_s=STAGE_TIMEOUT_S)
        run.start_task()
        run.await_settled([fog.name for fog in ROSTER.fogs], timeout_s=STAGE_TIMEOUT_S + 2 * TERMS.round_duration)
        report = run.audit(verify_scores=False)
        injected = dict(proxy.injected)

    # assert: faults of every kind really happened, and the task ended settled with every check passing
    assert set(injected) == set(Fault), injected
    assert report.passed, report.failed_checks
    assert [r.round for r in report.history.rounds] == [1, 2]
    assert report.history.task.status == "Settled"
