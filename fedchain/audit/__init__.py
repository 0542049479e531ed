"""The auditor: replay a task's events, recompute every reputation and payment, check the money and the store.

The logic is pure over data already read (events and views in, report out), so
it runs the same on a live chain and on a hand-made event list::

    from fedchain.audit import audit_on_chain, audit_task, read_chain
    report = audit_on_chain(w3, deployment, task_id, store)        # read the chain, then audit_task
    report.passed, report.failed_checks, report.to_dict()

    readings = read_chain(w3, deployment, task_id)                 # the only chain access
    report = audit_task(task_id, readings.events, views=readings.views, store=store)

``fedchain audit --task ID`` is the command line over it (:mod:`fedchain.audit.cli`). The names
below are loaded on first use, so that ``fedchain audit --help`` does not load torch.
"""

from __future__ import annotations

from fedchain._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "DEFAULT_SCORE_TOLERANCE": "checks",
    "audit_on_chain": "auditor",
    "ChainReadings": "chain",
    "read_chain": "chain",
    "read_views": "chain",
    "CheckName": "checks",
    "CheckResult": "checks",
    "CheckStatus": "checks",
    "Finding": "checks",
    "Tally": "checks",
    "TaskHistory": "history",
    "PoolParts": "replay",
    "Replay": "replay",
    "mechanism_of": "replay",
    "replay_task": "replay",
    "FORMAT": "report",
    "AuditReport": "report",
    "RoundScore": "report",
    "ScoreVerification": "report",
    "audit_task": "report",
    "ChainViews": "views",
    "TaskViews": "views",
    "TreasuryViews": "views",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
