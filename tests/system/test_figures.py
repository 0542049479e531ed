"""The figures ``fedchain bench demo`` prints, counted from a task whose story is known (tests/audit/conftest.py)."""

from __future__ import annotations

import pytest

from fedchain.audit import audit_task
from fedchain.errors import ConfigError
from fedchain.system.bench import parse_block_times
from fedchain.system.figures import JobFigures, job_figures
from tests.audit.conftest import DrivenTask, audit_chain, audit_node, driven_task  # noqa: F401  (pytest fixtures)


def test_job_figures_count_the_slashed_round_and_skip_the_client_removed_before_it(driven_task: DrivenTask) -> None:
    # prepare: four clients, three rounds; client 3 removed in round 1, client 2's fog node missed round 2
    history = audit_task(driven_task.task_id, driven_task.readings.events).history

    # execute
    figures = job_figures(history)

    # assert: every auction awarded; due 4 + 3 + 3 client-rounds, of which one went without a commit
    assert figures == JobFigures(unbid=0, missed=1, due=10)


@pytest.mark.parametrize("text", ["", "2,x", "-1,2", ","])
def test_block_times_that_are_not_seconds_are_refused_with_an_example(text: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_block_times(text)
    assert "0,2,12" in str(refused.value.hint)


def test_block_times_are_read_in_order() -> None:
    assert parse_block_times("0, 2,12") == (0.0, 2.0, 12.0)
