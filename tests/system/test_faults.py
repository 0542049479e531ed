"""Faults in a running system: real processes on a real chain, one task, four faults, the money intact.

One task runs once per chain for the whole module (starting processes costs
tens of seconds): on an automining chain, and on one that mines every 2 s
like an L2, where agents share blocks and race each other; each test states
what one fault must have done. The cast:

* client-0 (32 samples): its job goes to ``fog-fast``, the only node fast enough
  for the capped time reputation; ``fog-slow`` is its revealed standby, cheaper.
* client-1 and client-2 (16 samples each): both nodes reach the cap, so the
  cheaper ``fog-slow`` wins their jobs.
* ``fog-mute`` commits a sealed bid for every job and never reveals it.

The faults, in the order they happen:

(a) ``fog-fast`` dies by SIGKILL right after it commits round 1 (its planned fault:
    ``--crash-after-round 1``, so the death never races the round): it misses round 2,
    is slashed at the deadline, and the job goes to ``fog-slow`` from round 3.
(b) in round 2, after ``fog-slow``'s commits and while the aggregator waits for
    the deadline, the aggregator is SIGKILLed and started again: it posts round 2
    (and every round) exactly once.
(c) before that restart, client-2's round-2 update is overwritten in the store:
    the aggregator rejects it (hash mismatch), the chain scores it 0, and the
    client is removed with its deposit forfeited.
(d) ``fog-mute`` never reveals: its deposits go to the clients, the auctions still award.

The clients do not watch their entries here (``watch="off"``): the faults are
the subject, not the disputes (tests/system/test_accountability.py). A round's
money moves when it is final, after a short challenge window.

What the audit must say: every money check passes (escrow, payments, withdrawals
to the wei) and nothing about the chain's accounting is flagged. The store
check passes too and carries a note naming the altered blob: the update was
posted as rejected, so its bytes being wrong is what the chain already says
(:mod:`fedchain.audit.store`); only an update scored as accepted must be intact.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fedchain.audit import AuditReport, CheckName, CheckStatus
from fedchain.chain import bindings as b
from fedchain.chain.bindings import TaskStatus
from fedchain.chain.node import AnvilNode, AnvilSettings
from fedchain.fl.reputation import WAD
from fedchain.publisher import PublishConfig, TaskTerms
from fedchain.store import open_store
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
from tests.system.conftest import FUNDER

#: 3 rounds of 35 s; T = 20 s per round and a cap of 2, so a job of D samples needs f >= c * D / 10 s for the cap.
TERMS = TaskTerms(
    rounds=3,
    expected_duration=60,
    psi=10**15,
    phi=10**12,
    min_loss_reputation=0.1,
    min_time_reputation=0.1,
    min_quality=0.5,
    max_round_time=35,
    reputation_cap=2.0,
    client_deposit=10**16,
    fog_deposit=2 * 10**16,
    cycles_per_sample=5 * 10**8,
    round_duration=35,
    bidding_duration=10,
    reveal_duration=10,
    time_tolerance=5,
    max_clients=3,
    challenge_window=20,
)
SPEC = TaskSpec(
    dataset="mnist", model="lenet5", lr=0.1, batch_size=16, local_epochs=1, validation=ValidationSpec(size=200)
)
#: c * D / f: fog-fast 10 s for 32 samples (the cap), fog-slow 20 s (r_t = 1) but 10 s for 16 samples (the cap).
ROSTER = Roster(
    clients=(
        ClientPlan("client-0", 0, 32, watch="off"),
        ClientPlan("client-1", 1, 16, watch="off"),
        ClientPlan("client-2", 2, 16, watch="off"),
    ),
    fogs=(
        FogPlan("fog-fast", CostModel(frequency=1_600_000_000, alpha=2.5e-15, margin=0.1), crash_after_round=1),
        FogPlan("fog-slow", CostModel(frequency=800_000_000, alpha=2.5e-15, margin=0.1)),
        FogPlan("fog-mute", CostModel(frequency=1_600_000_000, alpha=2.5e-15, margin=0.1), never_reveal=True),
    ),
)
BUDGET = 10**17
#: The most one stage may take on a busy 2-core machine (process start-up dominates).
STAGE_TIMEOUT_S = 240.0


@dataclass(frozen=True)
class FaultyTask:
    """The finished task and what the test saw while it ran."""

    run: SystemRun
    task_id: int
    #: Client name -> its index (join order) in the task.
    jobs: dict[str, int]
    #: Participant name -> address.
    addresses: dict[str, str]
    #: Rounds posted when the aggregator was killed, and what its log said by then.
    posted_at_kill: tuple[int, ...]
    aggregator_log_at_kill: str
    report: AuditReport

    def events(self, cls: type, **fields: object) -> list:
        return self.run.events.of(cls, self.task_id, **fields)


def corrupt(store_url: str, digest: bytes) -> None:
    """Overwrite a stored blob's last bytes: it no longer hashes to its name."""
    store = open_store(store_url)
    path = store.path_of(digest)
    store.fs.pipe_file(path, store.fs.cat_file(path)[:-4] + b"\x00\x00\x00\x01")


@pytest.fixture(scope="module", params=[None, 2], ids=["automine", "block-time-2s"])
def chain(request: pytest.FixtureRequest) -> Iterator[AnvilNode]:
    """The session's automining Anvil, or one of this module's that mines every 2 s like an L2."""
    if request.param is None:
        yield request.getfixturevalue("anvil")
        return
    with AnvilNode(AnvilSettings(block_time=request.param)) as node:
        yield node


@pytest.fixture(scope="module")
def faulty_task(chain: AnvilNode, data_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultyTask]:
    anvil = chain
    run_dir = tmp_path_factory.mktemp("faults")
    with Supervisor() as supervisor:
        run = SystemRun(
            anvil.web3(),
            anvil.dev_account(FUNDER),
            anvil.rpc_url,
            RunSettings(run_dir, AgentOptions(data_root)),
            supervisor,
        )
        run.deploy()
        run.fund(required_funds(ROSTER, TERMS, BUDGET, publisher=PUBLISHER, aggregator=AGGREGATOR))
        task_id = run.create_task(PublishConfig(terms=TERMS, spec=SPEC, budget=BUDGET))
        run.start_fogs(ROSTER.fogs, timeout_s=STAGE_TIMEOUT_S)
        run.start_aggregator()
        run.start_clients(ROSTER.clients)
        run.await_handoffs(3, timeout_s=STAGE_TIMEOUT_S)
        names = [p.name for p in ROSTER.clients] + [p.name for p in ROSTER.fogs]
        addresses = {name: run.account(name).address for name in names}
        ledger = run.session(PUBLISHER).contracts.round_ledger
        jobs = {plan.name: int(ledger.client_index(task_id, addresses[plan.name])) for plan in ROSTER.clients}
        run.start_task()

        # (a) fog-fast dies as soon as its round-1 commit is mined
        run.wait_until(
            run.events.find(b.UpdateCommitted, task_id, round=1, fog=addresses["fog-fast"]),
            "fog-fast's round-1 commit",
            STAGE_TIMEOUT_S,
        )
        assert supervisor.wait("fog-fast", STAGE_TIMEOUT_S) == -signal.SIGKILL

        # (b, c) round 2: fog-slow commits; the aggregator has seen both commits and waits for fog-fast's deadline
        slow_jobs = (jobs["client-1"], jobs["client-2"])
        commits = [
            run.wait_until(
                run.events.find(b.UpdateCommitted, task_id, round=2, client_index=job),
                f"fog-slow's round-2 commit of job {job}",
                STAGE_TIMEOUT_S,
            )
            for job in slow_jobs
        ]
        aggregator_log = run.folder.log(AGGREGATOR)
        run.wait_until(
            lambda: all(f"round=2 job={job} " in aggregator_log.read_text() for job in slow_jobs),
            "the aggregator to see the round-2 commits",
            STAGE_TIMEOUT_S,
        )
        corrupt(run.folder.store_url, next(c.update_hash for c in commits if c.client_index == jobs["client-2"]))
        supervisor.kill(AGGREGATOR)
        supervisor.wait(AGGREGATOR, STAGE_TIMEOUT_S)
        run.events.refresh()
        posted_at_kill = tuple(e.round for e in run.events.of(b.RoundPosted, task_id))
        log_at_kill = aggregator_log.read_text()
        supervisor.restart(AGGREGATOR)

        run.await_settled(["fog-slow", "fog-mute"], timeout_s=STAGE_TIMEOUT_S + 3 * TERMS.round_duration)
        report = run.audit(verify_scores=True)
        run.events.refresh()
        yield FaultyTask(run, task_id, jobs, addresses, posted_at_kill, log_at_kill, report)


@pytest.mark.slow
def test_a_fog_node_killed_mid_task_is_slashed_its_job_re_awarded_to_the_standby_and_the_task_completes(
    faulty_task: FaultyTask,
) -> None:
    t = faulty_task
    job = t.jobs["client-0"]
    (slash,) = t.events(b.FogSlashed)
    (reassigned,) = t.events(b.JobReassigned)
    bids = {bid.bidder: i for i, bid in enumerate(t.run.session(PUBLISHER).contracts.fog_auction.bids(t.task_id, job))}

    assert (slash.client_index, slash.fog, slash.round) == (job, t.addresses["fog-fast"], 2)
    assert slash.forfeited == TERMS.fog_deposit
    assert (reassigned.client_index, reassigned.winner, reassigned.from_round) == (
        job,
        bids[t.addresses["fog-slow"]],
        3,
    )
    assert [(c.round, c.fog) for c in t.events(b.UpdateCommitted, client_index=job)] == [
        (1, t.addresses["fog-fast"]),
        (3, t.addresses["fog-slow"]),
    ]
    assert [e.round for e in t.events(b.RoundPosted)] == [1, 2, 3]
    assert t.events(b.TaskSettled)
    assert t.report.history.credited_to(t.addresses["client-0"]).get("BID_FORFEIT", 0) >= TERMS.fog_deposit


@pytest.mark.slow
def test_an_aggregator_killed_after_the_commits_and_restarted_posts_every_round_exactly_once(
    faulty_task: FaultyTask,
) -> None:
    t = faulty_task
    # killed after it saw round 2's commits and before its post ...
    assert t.posted_at_kill == (1,)
    assert "update committed" in t.aggregator_log_at_kill and "round=2" in t.aggregator_log_at_kill
    # ... the restarted process posted round 2 and the rest, once each, and settled the task
    assert [e.round for e in t.events(b.RoundPosted)] == [1, 2, 3]
    assert t.run.supervisor.child(AGGREGATOR).returncode == 0
    assert TaskStatus[t.report.history.task.status.upper()] == TaskStatus.SETTLED


@pytest.mark.slow
def test_a_corrupted_update_is_rejected_and_its_client_penalised(faulty_task: FaultyTask) -> None:
    t = faulty_task
    job = t.jobs["client-2"]
    (round_2,) = t.events(b.RoundPosted, round=2)
    (removed,) = t.events(b.ClientRemoved)
    client = next(c for c in t.report.history.clients if c.index == job)

    assert round_2.measurements[job].accepted is False and round_2.measurements[job].quality == 0
    assert round_2.measurements[t.jobs["client-1"]].accepted is True
    assert (removed.client_index, removed.round) == (job, 2)
    assert client.status == "removed" and client.deposit_returned == 0
    # its deposit goes to the deployment's sink, never to the publisher (who appoints the aggregator)
    history = t.report.history
    assert history.task.sink is not None
    assert history.credited_to(history.task.sink).get("DEPOSIT_FORFEIT") == TERMS.client_deposit
    assert "DEPOSIT_FORFEIT" not in history.credited_to(history.task.publisher)
    assert "reason=hash_mismatch" in t.run.folder.log(AGGREGATOR).read_text()


@pytest.mark.slow
def test_a_bidder_that_never_reveals_forfeits_its_deposits_and_the_auctions_still_award(
    faulty_task: FaultyTask,
) -> None:
    t = faulty_task
    mute = t.addresses["fog-mute"]
    auctions = t.report.history.auctions

    assert all(any(bid.bidder == mute and not bid.revealed for bid in a.bids) for a in auctions)
    assert all(a.closed and a.winner is not None for a in auctions)
    assert mute not in {a.bids[a.winner].bidder for a in auctions}
    for name in ("client-0", "client-1", "client-2"):  # each client got the mute bidder's deposit at its close
        assert t.report.history.credited_to(t.addresses[name]).get("BID_FORFEIT", 0) >= TERMS.fog_deposit
    assert t.report.history.credited_to(mute) == {}


@pytest.mark.slow
def test_the_audit_of_the_faulty_task_passes_with_the_money_intact_and_notes_the_altered_blob(
    faulty_task: FaultyTask,
) -> None:
    t = faulty_task
    report = t.report
    store_notes = report.check(CheckName.STORE_UPDATES).notes

    assert report.passed, report.failed_checks
    assert {c.name: c.status for c in report.checks} == dict.fromkeys(CheckName, CheckStatus.PASS)
    altered = f"client {t.jobs['client-2']} in round 2 (not accepted)"
    assert any(altered in note and "altered" in note for note in store_notes)
    assert report.history.task.bonuses is not None and report.history.task.refund is not None
    assert sum(r.accuracy for r in report.history.rounds) > 0 and all(r.accuracy <= WAD for r in report.history.rounds)
