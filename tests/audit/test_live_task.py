"""The audit of a task driven on a real Anvil: it passes, and each kind of tampering fails the check it should."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fedchain.audit import CheckName, CheckStatus, audit_task, mechanism_of
from fedchain.chain.bindings import TaskCreated

from tests.audit.conftest import DrivenTask


def test_audit_of_the_driven_task_passes_every_check(driven_task: DrivenTask) -> None:
    readings = driven_task.readings

    report = audit_task(driven_task.task_id, readings.events, views=readings.views, store=driven_task.store())

    failures = {c.name.value: [f.message for f in c.findings] for c in report.checks if c.failed}
    assert failures == {}
    statuses = {c.name: c.status for c in report.checks}
    assert statuses.pop(CheckName.SCORES) is CheckStatus.SKIPPED
    assert set(statuses.values()) == {CheckStatus.PASS}
