"""The audit of a task driven on a real Anvil: it passes, and each kind of tampering fails the check it names."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fedchain.audit import AuditReport, CheckName, CheckStatus, audit_task, mechanism_of
from fedchain.audit.history import CommitRecord
from fedchain.chain.abi import ChainEvent
from fedchain.chain.bindings import Measurement, RoundPosted
from fedchain.cli import main
from tests.audit.conftest import PARAMS, SINK, DrivenTask


def failed(report: AuditReport) -> set[str]:
    return {name.value for name in report.failed_checks}


def test_audit_of_the_driven_task_passes_every_check(driven_task: DrivenTask) -> None:
    readings = driven_task.readings

    report = audit_task(driven_task.task_id, readings.events, views=readings.views, store=driven_task.store())

    assert {c.name.value: [f.message for f in c.findings] for c in report.checks if c.failed} == {}
    statuses = {c.name: c.status for c in report.checks}
    assert statuses.pop(CheckName.SCORES) is CheckStatus.SKIPPED
    assert set(statuses.values()) == {CheckStatus.PASS}


def test_the_rebuilt_history_holds_the_slash_the_removal_and_the_forfeits(driven_task: DrivenTask) -> None:
    readings = driven_task.readings

    history = audit_task(driven_task.task_id, readings.events, views=readings.views).history

    assert [(s.client_index, s.round, s.new_winner, s.from_round) for s in history.slashes] == [(2, 2, 1, 3)]
    assert [(c.status, c.removed_round) for c in history.clients][3] == ("removed", 1)
    assert [r.scored for r in history.rounds][1] == (True, True, False, False)
    reasons = {c.reason for c in history.credits}
    assert reasons == {
        "FOG_PAYMENT",
        "BID_FORFEIT",
        "DEPOSIT_FORFEIT",
        "CLIENT_REWARD",
        "DEPOSIT_RETURN",
        "BUDGET_REFUND",
        "ESCROW_REFUND",
        "BID_REFUND",
        "BOND_REFUND",
    }
    assert history.task.status == "Settled"
    # Every round was posted, then finalised; client 3's deposit was forfeited when round 1 became final, to the
    # deployment's sink: the publisher got nothing but its refund, the aggregator nothing but its bond back.
    assert [(p.round, p.final) for p in history.posted] == [(1, True), (2, True), (3, True)]
    assert [(r.round, r.removed, r.forfeited) for r in history.rounds] == [
        (1, (3,), PARAMS["client_deposit"]),
        (2, (), 0),
        (3, (), 0),
    ]
    assert history.task.sink == driven_task.node.dev_account(SINK).address
    assert history.to_sink == {"DEPOSIT_FORFEIT": PARAMS["client_deposit"]}
    assert history.credited_to(history.task.publisher).keys() == {"BUDGET_REFUND"}
    assert history.credited_to(history.task.aggregator) == {"BOND_REFUND": PARAMS["aggregator_bond"]}


def test_a_client_with_a_prior_that_sends_garbage_is_removed_and_the_audit_passes(prior_task: DrivenTask) -> None:
    readings = prior_task.readings

    report = audit_task(prior_task.task_id, readings.events, views=readings.views, store=prior_task.store())

    assert {c.name.value: [f.message for f in c.findings] for c in report.checks if c.failed} == {}
    assert report.check(CheckName.CROSS_TASK).status is CheckStatus.PASS
    client = report.history.clients[0]
    # Quality 0.1 < q_min: r_a = 0.1 * 0.1 without the prior (above 1), below r_a_min 0.1.
    assert (client.status, client.removed_round, client.loss_reputation) == ("removed", 1, 10**16)
    assert [(c.status, c.deposit_returned) for c in report.history.clients] == [("removed", 0)] + [
        ("active", 10**16)
    ] * 3


def commit_of(driven_task: DrivenTask, client: int, round_number: int) -> CommitRecord:
    commits = audit_task(driven_task.task_id, driven_task.readings.events).history.commits
    return next(c for c in commits if (c.client_index, c.round) == (client, round_number))


def test_a_missing_blob_of_an_accepted_update_fails_the_store_check(driven_task: DrivenTask, tmp_path: Path) -> None:
    store = driven_task.store_copy(tmp_path / "store")
    commit = commit_of(driven_task, client=0, round_number=2)
    store.fs.rm(store.path_of(commit.update_hash))

    report = audit_task(driven_task.task_id, driven_task.readings.events, views=driven_task.readings.views, store=store)

    assert failed(report) == {CheckName.STORE_UPDATES.value}
    [finding] = report.check(CheckName.STORE_UPDATES).findings
    assert "missing" in finding.message and "client 0 in round 2" in finding.message


def test_a_missing_blob_of_a_rejected_update_is_a_note_not_a_failure(driven_task: DrivenTask, tmp_path: Path) -> None:
    store = driven_task.store_copy(tmp_path / "store")
    commit = commit_of(driven_task, client=3, round_number=1)  # posted as rejected
    store.fs.rm(store.path_of(commit.update_hash))

    report = audit_task(driven_task.task_id, driven_task.readings.events, views=driven_task.readings.views, store=store)

    assert report.passed
    [note] = report.check(CheckName.STORE_UPDATES).notes
    assert "client 3 in round 1 (not accepted)" in note and "missing" in note


def test_an_altered_model_blob_fails_the_model_store_check(driven_task: DrivenTask, tmp_path: Path) -> None:
    store = driven_task.store_copy(tmp_path / "store")
    posted = audit_task(driven_task.task_id, driven_task.readings.events).history.rounds[1]
    path = store.path_of(posted.model_hash)
    data = bytearray(store.fs.cat_file(path))
    data[-1] ^= 0xFF
    store.fs.pipe_file(path, bytes(data))

    report = audit_task(driven_task.task_id, driven_task.readings.events, views=driven_task.readings.views, store=store)

    assert failed(report) == {CheckName.STORE_MODELS.value}
    assert "altered" in report.check(CheckName.STORE_MODELS).findings[0].message


def test_a_wrong_mechanism_parameter_fails_the_payment_recomputation(driven_task: DrivenTask) -> None:
    readings = driven_task.readings
    params = readings.views.task.params
    wrong = dataclasses.replace(mechanism_of(params), psi=params.psi + 1)

    report = audit_task(driven_task.task_id, readings.events, views=readings.views, mechanism=wrong)

    assert CheckName.PAYMENTS in report.failed_checks
    assert CheckName.REPUTATION not in report.failed_checks


def test_views_missing_a_client_fail_the_history_check_and_still_compare_the_others(driven_task: DrivenTask) -> None:
    readings = driven_task.readings
    task_views = dataclasses.replace(readings.views.task, clients=readings.views.task.clients[:-1])
    views = dataclasses.replace(readings.views, task=task_views)

    report = audit_task(driven_task.task_id, readings.events, views=views)

    assert CheckName.HISTORY in report.failed_checks
    assert "clients" in " ".join(f.message for f in report.check(CheckName.HISTORY).findings)
    assert CheckName.REPUTATION not in report.failed_checks


def test_a_corrupted_posted_quality_fails_the_reputation_recomputation(driven_task: DrivenTask) -> None:
    readings = driven_task.readings
    posted = next(
        e for e in readings.events if isinstance(e, RoundPosted) and (e.task_id, e.round) == (driven_task.task_id, 1)
    )
    measurements = (
        posted.measurements[0],
        Measurement(9 * 10**17, *posted.measurements[1][1:]),
        *posted.measurements[2:],
    )
    events = tuple(dataclasses.replace(e, measurements=measurements) if e is posted else e for e in readings.events)

    report = audit_task(driven_task.task_id, events, views=readings.views)

    assert CheckName.REPUTATION in report.failed_checks
    messages = " ".join(f.message for f in report.check(CheckName.REPUTATION).findings)
    assert "client 1" in messages


def test_the_command_prints_json_writes_html_and_exits_0(
    scored_task: DrivenTask, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    html = tmp_path / "audit.html"

    status = main(
        [
            "audit",
            "--task",
            str(scored_task.task_id),
            "--deployment",
            str(scored_task.deployment_file),
            "--store",
            str(scored_task.store_url),
            "--json",
            "--html",
            str(html),
            "--verify-scores",
        ]
    )

    assert status == 0
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] is True and report["task_id"] == scored_task.task_id
    assert {c["name"]: c["status"] for c in report["checks"]}["scores.reproduced"] == "pass"
    page = html.read_text()
    assert page.count("data:image/png;base64,") == 2 and "PASSED" in page


def test_the_command_exits_1_and_names_the_failed_check(
    driven_task: DrivenTask, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = driven_task.store_copy(tmp_path / "store")
    spec_id = driven_task.readings.views.task.params.dataset_id
    store.fs.rm(store.path_of(spec_id))

    status = main(
        [
            "audit",
            "--task",
            str(driven_task.task_id),
            "--deployment",
            str(driven_task.deployment_file),
            "--store",
            str(tmp_path / "store"),
        ]
    )

    assert status == 1
    output = capsys.readouterr()
    assert f"the audit of task {driven_task.task_id} failed: store.models" in output.err


def test_the_command_refuses_a_task_that_does_not_exist(
    driven_task: DrivenTask, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(
        [
            "audit",
            "--task",
            "99",
            "--deployment",
            str(driven_task.deployment_file),
            "--store",
            str(driven_task.store_url),
        ]
    )

    assert status == 1
    assert "task 99 does not exist" in capsys.readouterr().err


#: Event fields that carry wei or 1e18 fixed-point values.
MONEY_FIELDS = frozenset(
    {
        "amount",
        "held",
        "budget",
        "deposit",
        "price",
        "escrow",
        "payment",
        "forfeited",
        "paid",
        "spent",
        "budget_left",
        "earned",
        "bonus",
        "deposit_returned",
        "escrow_refund",
        "deposits_refunded",
        "deposits_forfeited",
        "refund",
        "bonuses",
        "loss_reputation",
        "time_reputation",
        "bond",
        "reward",
        "burned",
        "compensation",
    }
)


def one_unit_changes(events: tuple[ChainEvent, ...], task_id: int) -> Iterator[tuple[str, tuple[ChainEvent, ...]]]:
    """Every copy of ``events`` with one money or reputation field, or one posted measurement, changed by one unit."""
    for i, event in enumerate(events):
        if getattr(event, "task_id", task_id) != task_id:
            continue
        for field in dataclasses.fields(event):
            if field.name in MONEY_FIELDS:
                changed = dataclasses.replace(event, **{field.name: getattr(event, field.name) + 1})
                yield f"{type(event).__name__}.{field.name}", (*events[:i], changed, *events[i + 1 :])
        if isinstance(event, RoundPosted):
            for client, m in enumerate(event.measurements):
                for name in ("quality", "round_time"):
                    if m.accepted:
                        bumped = list(event.measurements)
                        bumped[client] = m._replace(**{name: getattr(m, name) + 1})
                        changed = dataclasses.replace(event, measurements=tuple(bumped))
                        yield f"round {event.round} client {client} {name}", (*events[:i], changed, *events[i + 1 :])


def test_any_one_unit_change_to_money_reputation_or_a_measurement_fails_the_audit(driven_task: DrivenTask) -> None:
    readings = driven_task.readings
    changes = list(one_unit_changes(readings.events, driven_task.task_id))

    undetected = [
        what for what, events in changes if audit_task(driven_task.task_id, events, views=readings.views).passed
    ]

    assert len(changes) > 100
    # The finalisations' and the bond's money are among the changes (a post itself moves none).
    assert {
        "RoundFinalized.paid",
        "RoundFinalized.forfeited",
        "BudgetSpent.spent",
        "BudgetSpent.budget_left",
        "BondPosted.amount",
        "BondReleased.amount",
    } <= {what for what, _ in changes}
    assert undetected == []
