"""The auditor: replay a task's events, recompute every reputation and payment, check the money and the store.

The logic is pure over data already read (events and views in, report out), so
it runs the same on a live chain and on a hand-made event list::

    from fedchain.audit import audit_on_chain, audit_task, read_chain
    report = audit_on_chain(w3, deployment, task_id, store)        # read the chain, then audit_task
    report.passed, report.failed_checks, report.to_dict()

    readings = read_chain(w3, deployment, task_id)                 # the only chain access
    report = audit_task(task_id, readings.events, views=readings.views, store=store)

``fedchain audit --task ID`` is the command line over it (:mod:`fedchain.audit.cli`).
"""

from fedchain.audit.auditor import DEFAULT_SCORE_TOLERANCE, audit_on_chain
from fedchain.audit.chain import ChainReadings, read_chain, read_views
from fedchain.audit.checks import CheckName, CheckResult, CheckStatus, Finding, Tally
from fedchain.audit.history import TaskHistory
from fedchain.audit.replay import PoolParts, Replay, mechanism_of, replay_task
from fedchain.audit.report import FORMAT, AuditReport, RoundScore, audit_task
from fedchain.audit.views import ChainViews, TaskViews, TreasuryViews

__all__ = [
    "DEFAULT_SCORE_TOLERANCE",
    "FORMAT",
    "AuditReport",
    "ChainReadings",
    "ChainViews",
    "CheckName",
    "CheckResult",
    "CheckStatus",
    "Finding",
    "PoolParts",
    "Replay",
    "RoundScore",
    "Tally",
    "TaskHistory",
    "TaskViews",
    "TreasuryViews",
    "audit_on_chain",
    "audit_task",
    "mechanism_of",
    "read_chain",
    "read_views",
    "replay_task",
]
