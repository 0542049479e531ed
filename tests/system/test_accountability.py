"""Attacks on accountability, as real processes on a chain that mines every 2 s: nobody honest loses money.

One task runs once for the whole module (starting processes costs tens of
seconds), with every attack at once, and the deployment's arbiter committee
(three ``verifier run`` processes, quorum two):

* the publisher runs a fog node, ``fog-pub``, that bids low for the smallest
  job (client-1's) and commits zero updates: client-1's agent re-executes its
  job, challenges, and the committee upholds;
* the aggregator posts quality 0 for client-0 in round 1: client-0's agent
  re-scores its entry, challenges, and the committee upholds;
* a stranger challenges client-3's correct round-1 entry, claiming a quality of
  3 (`fedchain challenge entry`): the committee rejects it;
* client-2 holds garbage (every label y flipped to 9-y) and blames its honest
  fog node ``fog-a`` (which trains the CNN on the vectorised engine, not the reference
  one) for round 1 (`fedchain challenge fog --segment 0`): the committee
  re-executes that segment of fog-a's transcript from the data client-2 handed
  off, finds it trained as told, and rejects it.

A second, small task on its own deployment has an aggregator that goes silent
after round 1: a day later anyone abandons the task; the clients are paid as for
neutral rounds and the silent aggregator's bond goes to the sink.
Each test states what one attack must have done; none lets an honest
participant end below where it started (gas aside).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fedchain.audit import AuditReport, CheckName, CheckStatus
from fedchain.chain import bindings as b
from fedchain.chain.keys import PRIVATE_KEY_ENV
from fedchain.chain.node import AnvilNode, AnvilSettings
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
from tests.system.conftest import FUNDER

#: Two rounds; T = 30 s and a cap of 2, so a job of D samples reaches the cap at f >= c * D / 15 s. Second price, so
#: the runner-up of a job is affordable when its winner is slashed.
TERMS = TaskTerms(
    rounds=2,
    expected_duration=60,
    max_round_time=60,
    reputation_cap=2.0,
    cycles_per_sample=5 * 10**8,
    round_duration=60,
    bidding_duration=20,
    reveal_duration=20,
    max_clients=4,
    second_price=True,
    challenge_window=40,
)
SPEC = TaskSpec(
    dataset="mnist", model="cnn", lr=0.1, batch_size=16, local_epochs=1, validation=ValidationSpec(size=300)
)
#: fog-pub reaches the cap for 24 samples only and is the cheapest there: it wins client-1's job. fog-a reaches it
#: for 48, fog-b too, and fog-a is cheaper: it wins client-0's and client-3's and is client-1's runner-up. Neither
#: wins client-2's (48 samples of garbage) too.
ROSTER = Roster(
    clients=(
        ClientPlan("client-0", 0, 48),
        ClientPlan("client-1", 1, 24),
        ClientPlan("client-2", 2, 48, flip_labels=True, watch="off"),
        ClientPlan("client-3", 3, 48),
    ),
    fogs=(
        FogPlan("fog-pub", CostModel(frequency=800_000_000, alpha=2.5e-15, margin=0.1), lazy="zero"),
        FogPlan("fog-a", CostModel(frequency=1_600_000_000, alpha=2.5e-15, margin=0.1), engine="vmap"),
        FogPlan("fog-b", CostModel(frequency=1_600_000_000, alpha=2.5e-15, margin=0.4)),
    ),
)
BUDGET = 10**17
STRANGER = "stranger"
#: The most one stage may take on a busy 2-core machine (process start-up dominates).
STAGE_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Attacked:
    """The finished task and the money of every participant in it."""

    run: SystemRun
    task_id: int
    report: AuditReport
    #: Participant name -> address, and client name -> index in the task.
    addresses: dict[str, str]
    jobs: dict[str, int]
    #: Wei each address put into the task (Deposited) and was credited by it (Credited).
    deposited: Counter[str]
    credited: Counter[str]

    def net(self, name: str) -> int:
        """What participant ``name`` ended with, less what it put in (gas aside)."""
        address = self.addresses[name]
        return self.credited[address] - self.deposited[address]

    def challenges(self, by: str) -> list:
        return [c for c in self.report.history.challenges if c.challenger == self.addresses[by]]

    def credited_to(self, name: str) -> dict[str, int]:
        return self.report.history.credited_to(self.addresses[name])


class Waiting:
    """A ``fedchain`` command started with ``--wait``, its stderr read as it comes (it says when it starts waiting)."""

    def __init__(self, *args: str, key: str, run: SystemRun) -> None:
        env = {**os.environ, PRIVATE_KEY_ENV: "0x" + bytes(run.account(key).key).hex()}
        self.args = args
        self.process = subprocess.Popen(
            [sys.executable, "-m", "fedchain.cli", *args], env=env, stderr=subprocess.PIPE, text=True
        )
        self.lines: list[str] = []
        self.waiting = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)
            if line.startswith("waiting for round"):
                self.waiting.set()

    def await_waiting(self) -> None:
        """Return once the command waits for its round's post (it has started and read the chain)."""
        if not self.waiting.wait(STAGE_TIMEOUT_S):
            self.process.kill()
            raise AssertionError(f"`fedchain {' '.join(self.args[:2])}` never started waiting: {''.join(self.lines)}")

    def await_success(self) -> None:
        """Return once the command has exited with status 0."""
        status = self.process.wait(STAGE_TIMEOUT_S)
        self.reader.join(STAGE_TIMEOUT_S)
        assert status == 0, "".join(self.lines)[-3000:]


def fedchain(*args: str, key: bytes) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, PRIVATE_KEY_ENV: "0x" + bytes(key).hex()}
    return subprocess.run(
        [sys.executable, "-m", "fedchain.cli", *args], env=env, capture_output=True, text=True, timeout=STAGE_TIMEOUT_S
    )


@pytest.fixture(scope="module")
def l2_chain() -> Iterator[AnvilNode]:
    with AnvilNode(AnvilSettings(block_time=2)) as node:
        yield node


@pytest.fixture(scope="module")
def attacked(l2_chain: AnvilNode, data_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Attacked]:
    run_dir = tmp_path_factory.mktemp("attacks")
    with Supervisor() as supervisor:
        run = SystemRun(
            l2_chain.web3(),
            l2_chain.dev_account(FUNDER),
            l2_chain.rpc_url,
            RunSettings(run_dir, AgentOptions(data_root)),
            supervisor,
        )
        run.deploy()
        funds = required_funds(
            ROSTER, TERMS, BUDGET, publisher=PUBLISHER, aggregator=AGGREGATOR, verifiers=run.settings.verifiers
        )
        run.fund({**funds, STRANGER: 10**17})
        task_id = run.create_task(PublishConfig(terms=TERMS, spec=SPEC, budget=BUDGET))
        names = [c.name for c in ROSTER.clients] + [f.name for f in ROSTER.fogs] + [PUBLISHER, AGGREGATOR, STRANGER]
        addresses = {name: run.account(name).address for name in names}
        run.start_verifiers()
        run.start_fogs(ROSTER.fogs, timeout_s=STAGE_TIMEOUT_S)
        run.start_aggregator(zero_client=(addresses["client-0"], 1))
        run.start_clients(ROSTER.clients)
        run.await_handoffs(len(ROSTER.clients), timeout_s=STAGE_TIMEOUT_S)
        ledger = run.session(PUBLISHER).contracts.round_ledger
        jobs = {plan.name: int(ledger.client_index(task_id, addresses[plan.name])) for plan in ROSTER.clients}

        # Within round 1's window, with the command people use: a stranger's frivolous challenge of client-3's entry,
        # and the garbage client blaming its fog node. Each takes seconds to start (a minute on a busy machine), so
        # both start before the task does and wait for round 1's post (--wait): they go out at the start of its
        # window, however long they took to start.
        common = (
            "--task",
            str(task_id),
            "--round",
            "1",
            "--wait",
            "--deployment",
            str(run.folder.deployment_file),
            "--store",
            run.folder.store_url,
            "--rpc-url",
            l2_chain.rpc_url,
        )
        frivolous = Waiting(
            "challenge", "entry", *common, "--client", str(jobs["client-3"]), "--quality", "3.0", key=STRANGER, run=run
        )
        # client-2 insists (`--segment 0`): without it the command re-executes the segments first and, finding
        # every one trained as told, opens nothing
        blame = Waiting("challenge", "fog", *common, "--segment", "0", key="client-2", run=run)
        for command in (frivolous, blame):
            command.await_waiting()
        run.start_task(timeout_s=STAGE_TIMEOUT_S)
        run.wait_until(run.events.find(b.RoundPosted, task_id, round=1), "round 1's post", STAGE_TIMEOUT_S)
        for command in (frivolous, blame):
            command.await_success()

        run.await_settled([fog.name for fog in ROSTER.fogs], timeout_s=STAGE_TIMEOUT_S + 4 * TERMS.round_duration)
        report = run.audit(verify_scores=True)
        run.events.refresh()
        deposited: Counter[str] = Counter()
        credited: Counter[str] = Counter()
        for deposit in run.events.of(b.Deposited, task_id):
            deposited[deposit.from_] += deposit.amount
        for credit in run.events.of(b.Credited, task_id):
            credited[credit.to] += credit.amount
        yield Attacked(run, task_id, report, addresses, jobs, deposited, credited)


@pytest.mark.slow
def test_the_publishers_free_riding_fog_node_gains_the_publisher_nothing(attacked: Attacked) -> None:
    a = attacked
    (slash,) = a.run.events.of(b.FogFraudSlashed, a.task_id)
    mine = a.challenges("client-1")

    # client-1's own agent caught it (each round fog-pub committed before the verdict moved the job); the committee
    # upheld every one; fog-pub lost its deposit once, and the job moved to its runner-up, fog-a
    assert mine and {(c.kind, c.status, c.fate, c.accused) for c in mine} == {
        ("fog", "upheld", "void", a.addresses["fog-pub"])
    }
    assert [c.round for c in mine] == list(range(1, len(mine) + 1))
    assert (slash.fog, slash.client_index) == (a.addresses["fog-pub"], a.jobs["client-1"])
    assert any(s.kind == "fraud" and s.fog == a.addresses["fog-pub"] for s in a.report.history.slashes)
    (moved,) = [e for e in a.run.events.of(b.JobReassigned, a.task_id) if e.client_index == a.jobs["client-1"]]
    bids = a.run.session(PUBLISHER).contracts.fog_auction.bids(a.task_id, a.jobs["client-1"])
    assert bids[moved.winner].bidder == a.addresses["fog-a"]
    # the publisher's side received no forfeit of any kind (only its refunds, the deposits of fog-pub's losing
    # bids, and pay for the rounds fog-pub did), and its fog node ended below where it started
    for name in (PUBLISHER, "fog-pub"):
        assert set(a.credited_to(name)) <= {"BUDGET_REFUND", "FOG_PAYMENT", "BID_REFUND"}, a.credited_to(name)
    assert a.net("fog-pub") < 0
    # client-1 is not removed (its round was void, not quality 0), keeps its deposit, is paid back from fog-pub's
    # deposit what fog-pub was paid for the void round, and ends no lower than it started
    client = next(c for c in a.report.history.clients if c.index == a.jobs["client-1"])
    assert client.status == "active" and client.deposit_returned == TERMS.client_deposit
    assert a.credited_to("client-1").get("FOG_COMPENSATION", 0) > 0
    assert a.net("client-1") >= 0


@pytest.mark.slow
def test_an_aggregator_that_zeroes_an_honest_client_takes_nothing_from_it_and_loses_its_bond(
    attacked: Attacked,
) -> None:
    a = attacked
    index = a.jobs["client-0"]
    (round_1,) = a.run.events.of(b.RoundPosted, a.task_id, round=1)
    mine = [c for c in a.challenges("client-0") if c.kind == "entry"]

    assert round_1.measurements[index].quality == 0  # what the aggregator posted
    assert [(c.status, c.fate) for c in mine] == [("upheld", "corrected")]
    assert mine[0].proposed.quality > TERMS.min_quality * 10**18
    # scored as the committee found it: not removed, paid for both rounds, its deposit back
    client = next(c for c in a.report.history.clients if c.index == index)
    assert (client.status, client.rounds, client.deposit_returned) == ("active", 2, TERMS.client_deposit)
    assert a.report.history.rounds[0].payments[index] > 0
    assert a.net("client-0") > 0
    # the aggregator's bond: one entry slash, half to the challenger that was upheld, the rest to the sink; the
    # aggregator topped the bond up if it posted again after the verdict, and got back what was left of it
    (bond_slash,) = a.run.events.of(b.BondSlashed, a.task_id)
    slash = TERMS.bond(BUDGET) // TERMS.max_clients
    assert (bond_slash.reward, bond_slash.burned) == (slash // 2, slash - slash // 2)
    task = a.report.history.task
    assert task.bond_returned == TERMS.bond(BUDGET) - slash + task.bond_topped_up
    # and the audit's re-scoring agrees with the corrected entry
    assert a.report.check(CheckName.SCORES).status is CheckStatus.PASS


@pytest.mark.slow
def test_a_frivolous_challenge_costs_the_challenger_its_bond(attacked: Attacked) -> None:
    a = attacked
    (frivolous,) = a.challenges(STRANGER)

    assert (frivolous.client_index, frivolous.status, frivolous.fate) == (a.jobs["client-3"], "rejected", "posted")
    assert a.net(STRANGER) == -TERMS.effective_challenge_bond
    assert a.credited_to(STRANGER) == {}
    # half of it to the accused aggregator, the rest to the sink
    assert a.credited_to(AGGREGATOR).get("CHALLENGE_FORFEIT") == TERMS.effective_challenge_bond // 2


@pytest.mark.slow
def test_a_client_with_garbage_data_cannot_blame_its_fog_node(attacked: Attacked) -> None:
    a = attacked
    blamed = [c for c in a.challenges("client-2") if c.kind == "fog"]

    assert blamed and {c.status for c in blamed} == {"rejected"}
    assert {c.accused for c in blamed} == {a.addresses["fog-a"]}
    assert not [e for e in a.run.events.of(b.FogFraudSlashed, a.task_id) if e.fog == a.addresses["fog-a"]]
    # fog-a keeps its deposits and earns half of each rejected bond; the garbage client loses its bonds
    assert a.credited_to("fog-a").get("CHALLENGE_FORFEIT") == len(blamed) * (TERMS.effective_challenge_bond // 2)
    assert a.net("fog-a") > 0
    assert "CHALLENGE_REFUND" not in a.credited_to("client-2")


@pytest.mark.slow
def test_no_honest_participant_ends_below_where_it_started_and_the_audit_passes(attacked: Attacked) -> None:
    a = attacked
    honest = ("client-0", "client-1", "client-3", "fog-a", "fog-b")

    assert {name: a.net(name) >= 0 for name in honest} == dict.fromkeys(honest, True), {n: a.net(n) for n in honest}
    assert a.report.passed, a.report.failed_checks
    assert {c.name: c.status for c in a.report.checks} == dict.fromkeys(CheckName, CheckStatus.PASS)
    # every forfeit went to the deployment's sink, none to the publisher or the aggregator as a penalty it triggered
    to_sink = a.report.history.to_sink
    assert {"BOND_SLASH", "FOG_SLASH", "CHALLENGE_FORFEIT"} <= set(to_sink), to_sink
    assert a.run.session(PUBLISHER).contracts.treasury.held(a.task_id) == 0


# ------------------------------------------------------------------------------- the aggregator goes silent

SILENT_TERMS = dataclasses.replace(TERMS, max_clients=1, second_price=False)
SILENT_ROSTER = Roster(
    clients=(ClientPlan("client-0", 0, 24),),
    fogs=(FogPlan("fog-a", CostModel(frequency=1_600_000_000, alpha=2.5e-15, margin=0.1)),),
)


@pytest.mark.slow
def test_an_aggregator_that_goes_silent_strands_nobodys_money(
    l2_chain: AnvilNode, data_root: Path, tmp_path: Path
) -> None:
    # prepare: one client, one fog node; the aggregator posts round 1 and dies by SIGKILL at once (its planned fault,
    # so the death never races its post of round 2)
    with Supervisor() as supervisor:
        run = SystemRun(
            l2_chain.web3(),
            l2_chain.dev_account(FUNDER - 1),
            l2_chain.rpc_url,
            RunSettings(tmp_path / "silent", AgentOptions(data_root)),
            supervisor,
        )
        run.deploy()
        run.fund(required_funds(SILENT_ROSTER, SILENT_TERMS, BUDGET, publisher=PUBLISHER, aggregator=AGGREGATOR))
        task_id = run.create_task(PublishConfig(terms=SILENT_TERMS, spec=SPEC, budget=BUDGET))
        run.start_fogs(SILENT_ROSTER.fogs, timeout_s=STAGE_TIMEOUT_S)
        run.start_aggregator(crash_after_round=1)
        run.start_clients(SILENT_ROSTER.clients)
        run.await_handoffs(1, timeout_s=STAGE_TIMEOUT_S)
        run.start_task(timeout_s=STAGE_TIMEOUT_S)
        run.wait_until(run.events.find(b.RoundPosted, task_id, round=1), "round 1's post", STAGE_TIMEOUT_S)
        assert supervisor.wait(AGGREGATOR, STAGE_TIMEOUT_S) == -signal.SIGKILL

        # execute: a day and a round later, the publisher abandons the task and settles it with the commands
        w3 = run.w3
        w3.provider.make_request("evm_increaseTime", [SILENT_TERMS.round_duration + 86_400 + 60])
        run.wait_until(
            lambda: (
                int(w3.eth.get_block("latest")["timestamp"])
                > int(run.session(PUBLISHER).contracts.task_registry.round_deadline(task_id)) + 86_400
            ),
            "the chain's clock past the grace",
            STAGE_TIMEOUT_S,
        )
        chain = (
            "--deployment",
            str(run.folder.deployment_file),
            "--store",
            run.folder.store_url,
            "--rpc-url",
            l2_chain.rpc_url,
        )
        key = run.account(PUBLISHER).key
        abandoned = fedchain("task", "abandon", "--task", str(task_id), *chain, key=key)
        settled = fedchain("task", "settle", "--task", str(task_id), *chain, key=key)
        run.wait_until(
            lambda: run.fog_withdrew("fog-a") and not supervisor.child("client-0").running,
            "the client and the fog node to settle and withdraw",
            STAGE_TIMEOUT_S,
        )
        aggregator_key = run.account(AGGREGATOR).key
        withdrew = fedchain("withdraw", *chain, key=aggregator_key)
        publisher_withdrew = fedchain("withdraw", *chain, key=key)

        # assert: abandoned and settled by the commands; the pending round 1 became final and was paid; the budget
        # left went back to the publisher, and the silent aggregator's bond to the sink
        assert abandoned.returncode == 0 and "abandoned at round 2" in abandoned.stdout, abandoned.stderr[-3000:]
        assert settled.returncode == 0, settled.stderr[-3000:]
        assert withdrew.returncode == 0 and publisher_withdrew.returncode == 0
        contracts = run.session(PUBLISHER).contracts
        assert contracts.round_ledger.rounds(task_id) == (1, 1)
        assert contracts.treasury.held(task_id) == 0
        run.events.refresh()
        credited: Counter[str] = Counter()
        for event in run.events.of(b.Credited, task_id):
            credited[event.to] += event.amount
        for name in ("client-0", "fog-a", PUBLISHER, AGGREGATOR):
            assert contracts.treasury.claimable(run.account(name).address) == 0, name  # all withdrawn
        assert credited[run.account(AGGREGATOR).address] == 0
        sink = contracts.treasury.sink()
        assert credited[sink] == SILENT_TERMS.bond(BUDGET)
        report = run.audit(verify_scores=False)
        assert report.passed, report.failed_checks
        assert report.history.task.status == "Abandoned" and report.history.clients[0].earned > 0
        assert json.loads(json.dumps(report.to_dict()))["task"]["status"] == "Abandoned"
