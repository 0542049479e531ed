"""Agent log lines end with key=value fields that grep and JSON handlers can follow."""

from __future__ import annotations

import logging

import pytest

from fedchain.agent import AgentLogger, record_fields


def test_bound_and_per_call_fields_follow_the_message_in_order() -> None:
    log = AgentLogger(logging.getLogger("fedchain.test"), agent="fog-1").bind(round=3)

    line = log.format("update committed", job=7, tx=bytes.fromhex("beef"), note="two words", skipped=None)

    assert line == "update committed agent=fog-1 round=3 job=7 tx=0xbeef note='two words'"


def test_logged_records_carry_the_text_and_the_fields(caplog: pytest.LogCaptureFixture) -> None:
    log = AgentLogger(logging.getLogger("fedchain.test"), agent="agg")

    with caplog.at_level(logging.INFO, logger="fedchain.test"):
        log.info("posted round %d of %d", 2, 5, round=2, tx="0x12", reason="100% done")

    (record,) = caplog.records
    assert record.getMessage() == "posted round 2 of 5 agent=agg round=2 tx=0x12 reason='100% done'"
    assert record_fields(record) == {"agent": "agg", "round": 2, "tx": "0x12", "reason": "100% done"}


def test_exc_info_still_reaches_the_logger(caplog: pytest.LogCaptureFixture) -> None:
    log = AgentLogger(logging.getLogger("fedchain.test"))

    with caplog.at_level(logging.ERROR, logger="fedchain.test"):
        try:
            raise ValueError("boom")
        except ValueError:
            log.error("step failed", exc_info=True, job=1)

    (record,) = caplog.records
    assert record.getMessage() == "step failed job=1"
    assert record.exc_info is not None and record.exc_info[0] is ValueError
