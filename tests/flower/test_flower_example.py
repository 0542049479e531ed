"""The Flower example, end to end: a SuperLink and 3 SuperNodes as processes, a local Anvil mining every second,
FedChain's store, 3 rounds with one free-riding client (it sends the model back untrained) and one honest client
whose round-2 reply is lost after it committed its update.

One run serves every test here (about two and a half minutes on two cores).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fedchain.agent.session import ChainSession
from fedchain.audit.auditor import audit_on_chain
from fedchain.audit.checks import CheckName, CheckStatus
from fedchain.flower.example import ExampleResult, ExampleSettings, run_example
from fedchain.flower.protocol import replies_board, stored_replies
from fedchain.store import open_store

pytestmark = pytest.mark.slow

APP = Path(__file__).resolve().parents[2] / "examples" / "flower"
FREE_RIDER = 2
LOST_REPLY = 1


@dataclass
class Run:
    result: ExampleResult
    #: (round, client) of every reply the aggregator scored and kept.
    replies: set[tuple[int, int]]
    #: The audit of the same task with one honest reply taken out of a copy of the store.
    tampered: object


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    folder = tmp_path_factory.mktemp("flower")
    seen: dict[str, object] = {}

    def inspect(session: ChainSession, task_id: int) -> None:
        seen["replies"] = set(stored_replies(session.store, task_id))
        copy = folder / "store-tampered"
        shutil.copytree(Path(session.store.root), copy)
        board = copy / "boards" / replies_board(task_id)
        (board / "2-0").unlink()  # client 0's reply of round 2: the entry stays posted as committed
        seen["tampered"] = audit_on_chain(
            session.w3, session.deployment, task_id, open_store(str(copy)), verify_scores=True
        )

    settings = ExampleSettings(
        app_dir=APP, run_dir=folder / "run", free_rider=FREE_RIDER, lost_reply=LOST_REPLY, baseline=False
    )
    result = run_example(settings, inspect=inspect)
    yield Run(result, seen["replies"], seen["tampered"])  # type: ignore[arg-type]


def test_the_free_rider_is_screened_out_and_paid_nothing(run: Run) -> None:
    rider = run.result.clients[FREE_RIDER]
    assert rider.removed_round == 1
    assert (rider.earned, rider.bonus, rider.deposit_returned, rider.withdrawn) == (0, 0, 0, 0)
    # Once its removal was final, its node got no more work: no reply of it in the last round.
    assert (1, rider.index) in run.replies
    assert (3, rider.index) not in run.replies


def test_the_clients_who_trained_are_paid_and_get_their_deposits_back(run: Run) -> None:
    for client in run.result.clients:
        if client.partition == FREE_RIDER:
            continue
        assert client.removed_round is None
        assert client.earned > 0
        assert client.deposit_returned == run.result.deposit
        assert client.withdrawn == client.earned + client.bonus + client.deposit_returned
        assert {(r, client.index) for r in (1, 2, 3)} <= run.replies


def test_a_committed_update_whose_reply_was_lost_is_scored_from_the_store(run: Run) -> None:
    # The aggregator cannot score a committed update as missing by saying that the reply never came.
    history = run.result.audit.history
    lost = next(c for c in run.result.clients if c.partition == LOST_REPLY)
    (round_2,) = [p for p in history.posted if p.round == 2]
    entry = round_2.measurements[lost.index]
    assert entry.committed and entry.accepted and entry.quality > 0
    assert lost.removed_round is None and lost.earned > 0


def test_the_audit_re_runs_every_score_and_passes(run: Run) -> None:
    report = run.result.audit
    assert report.passed, {c.name.value: [f.message for f in c.findings] for c in report.checks if c.failed}
    assert report.check(CheckName.SCORES).status is CheckStatus.PASS
    assert report.check(CheckName.STORE_UPDATES).status is CheckStatus.PASS  # every signed update is in the store
    assert len(report.history.posted) == 3
    commits = {(c.round, c.client_index): c for c in report.history.commits}
    for posted in report.history.posted:  # every committed entry is its client's own commit on chain, dated there
        for client, m in zip(report.history.clients, posted.measurements, strict=True):
            if m.committed:
                commit = commits[(posted.round, client.index)]
                assert commit.fog == client.account and commit.payment == 0 and 0 <= m.round_time <= 300


def test_the_audit_fails_an_accepted_entry_without_its_signed_reply(run: Run) -> None:
    # Without the client's signed reply nobody can tie the committed update to a data size and a start model:
    # the update is unusable, and the aggregator's acceptance of it is flagged.
    report = run.tampered
    check = report.check(CheckName.SCORES)  # type: ignore[attr-defined]
    assert check.status is CheckStatus.FAIL
    assert any("round 2 client 0: accepted, reproduced as rejected" in f.message for f in check.findings)
