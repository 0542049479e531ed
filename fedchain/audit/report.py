"""The audit of one task: run every check and gather the verdicts into one report.

:func:`audit_task` is the auditor's whole logic over data already read: events
(and, when available, the contracts' views at the same block) in, an
:class:`AuditReport` out. It does no chain access; the blob store is read only
when one is given. :meth:`AuditReport.to_dict` is the machine-readable form
(``fedchain audit --json``), with stable keys: wei and 1e18 fixed-point values
are decimal strings (they exceed what a JSON number holds exactly), counts,
indices, rounds, seconds and blocks are numbers, hashes are 0x-prefixed hex.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fedchain.audit.checks import CheckName, CheckResult, Tally
from fedchain.audit.crosstask import check_cross_task
from fedchain.audit.history import TaskHistory
from fedchain.audit.money import check_treasury
from fedchain.audit.replay import replay_task
from fedchain.audit.rewards import check_rewards, reward_events
from fedchain.audit.store import check_store
from fedchain.audit.views import ChainViews, check_task_views
from fedchain.chain.abi import ChainEvent
from fedchain.fl.reputation import MechanismParams
from fedchain.store import BlobStore
from fedchain.units import Asset

#: Version tag of the JSON report.
FORMAT = "fedchain-audit/1"


@dataclass(frozen=True)
class RoundScore:
    """One round's posted qualities next to the auditor's reproduction (``--verify-scores``)."""

    round: int
    posted: tuple[int, ...]
    #: None for a client whose quality was not reproduced (not scored in the round).
    reproduced: tuple[int | None, ...]
    #: Largest |posted - reproduced| over the clients, in 1e18 fixed point.
    largest_gap: int
    within_tolerance: bool
    #: Why each client's update was rejected when the auditor decoded it (a ``RejectReason`` code), else None.
    rejections: tuple[str | None, ...] = ()


@dataclass(frozen=True)
class ScoreVerification:
    """What ``--verify-scores`` found (:func:`fedchain.audit.scores.verify_scores`)."""

    #: The comparisons and findings of the ``scores.reproduced`` check.
    tally: Tally
    rounds: tuple[RoundScore, ...]
    #: The largest accepted |posted - reproduced|, 1e18 fixed point.
    tolerance: int


@dataclass(frozen=True)
class AuditReport:
    """Everything an audit found about one task."""

    task_id: int
    #: The last block the audit read (None for an audit of a hand-made event list).
    block_number: int | None
    history: TaskHistory
    checks: tuple[CheckResult, ...]
    mechanism: MechanismParams | None
    scores: tuple[RoundScore, ...] = ()
    #: The score tolerance used, 1e18 fixed point (None without --verify-scores).
    score_tolerance: int | None = None
    #: The task's money: ether, or its token (read from the chain; every amount is in its smallest unit).
    asset: Asset = field(default_factory=Asset)

    @property
    def passed(self) -> bool:
        """True when no check failed (skipped checks do not fail an audit)."""
        return not any(check.failed for check in self.checks)

    @property
    def failed_checks(self) -> tuple[CheckName, ...]:
        return tuple(check.name for check in self.checks if check.failed)

    def check(self, name: CheckName | str) -> CheckResult:
        """The result of check ``name``."""
        wanted = CheckName(name)
        return next(check for check in self.checks if check.name is wanted)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON values with stable keys (module docstring)."""
        return {
            "format": FORMAT,
            "task_id": self.task_id,
            "block_number": self.block_number,
            "passed": self.passed,
            "checks": [check.to_dict() for check in self.checks],
            "task": _task_dict(self.history),
            "clients": [_client_dict(c) for c in self.history.clients],
            "fog_nodes": fog_summary(self.history),
            "auctions": [_jsonable(dataclasses.asdict(a)) for a in self.history.auctions],
            "commits": [_jsonable(dataclasses.asdict(c)) for c in self.history.commits],
            "slashes": [_jsonable(dataclasses.asdict(s)) for s in self.history.slashes],
            "challenges": [_challenge_dict(c) for c in self.history.challenges],
            "sink": {
                "account": self.history.task.sink,
                "credited": {reason: str(amount) for reason, amount in sorted(self.history.to_sink.items())},
            },
            "rounds": [_round_dict(r) for r in self.history.rounds],
            "budget": budget_summary(self.history),
            "accounts": account_summary(self.history),
            "score_tolerance": _jsonable(self.score_tolerance),
            "scores": [_jsonable(dataclasses.asdict(s)) for s in self.scores],
            # Added with token tasks; every amount above is in the smallest unit of this asset.
            "asset": {"address": self.asset.address, "symbol": self.asset.symbol, "decimals": self.asset.decimals},
        }


def audit_task(
    task_id: int,
    events: Iterable[ChainEvent],
    *,
    views: ChainViews | None = None,
    store: BlobStore | None = None,
    mechanism: MechanismParams | None = None,
    scores: ScoreVerification | None = None,
) -> AuditReport:
    """Audit task ``task_id`` from a deployment's ``events`` (every task's: the Treasury checks need them all).

    ``views`` (the contracts' views at the events' last block) add the
    comparisons with the chain's state; ``store`` adds the blob checks;
    ``mechanism`` overrides the task's parameters; ``scores`` is what
    :func:`fedchain.audit.scores.verify_scores` found.
    """
    events = sorted(events)
    replay = replay_task(task_id, events, mechanism=mechanism)
    tally = replay.tally
    if views is not None:
        tally = tally.merge(check_task_views(replay, views.task))
    else:
        tally.skip(CheckName.ESCROW_TASK, "no views")
    tally = tally.merge(check_treasury(events, views.treasury if views is not None else None))
    tally = tally.merge(check_cross_task(replay.history, events))
    if store is not None:
        tally = tally.merge(check_store(replay.history, store))
        tally = tally.merge(check_rewards(replay.history, reward_events(task_id, events), store))
    else:
        tally.skip(CheckName.STORE_UPDATES, "no blob store given")
        tally.skip(CheckName.STORE_MODELS, "no blob store given")
        tally.skip(CheckName.STORE_REWARDS, "no blob store given")
    if scores is not None:
        tally = tally.merge(scores.tally)
    else:
        tally.skip(CheckName.SCORES, "not asked for (--verify-scores)")
    return AuditReport(
        task_id=task_id,
        block_number=views.block_number if views is not None else None,
        history=replay.history,
        checks=tally.results(),
        mechanism=replay.mechanism,
        scores=scores.rounds if scores is not None else (),
        score_tolerance=scores.tolerance if scores is not None else None,
    )


# --------------------------------------------------------------------------- summaries


def fog_summary(history: TaskHistory) -> list[dict[str, Any]]:
    """Per fog node: bids, jobs won, rounds committed, payments, slashes and forfeited deposits."""
    rows = []
    for fog in history.fog_nodes:
        commits = [c for c in history.commits if c.fog == fog]
        slashes = [s for s in history.slashes if s.fog == fog]
        won = sorted(
            {c.client_index for c in commits}
            | {s.client_index for s in slashes}
            | {a.client_index for a in history.auctions if a.winner is not None and a.bids[a.winner].bidder == fog}
        )
        rows.append(
            {
                "account": fog,
                "bids": sum(1 for a in history.auctions for bid in a.bids if bid.bidder == fog),
                "jobs": won,
                "rounds_committed": len(commits),
                "payments": str(sum(c.payment for c in commits)),
                "slashes": len(slashes),
                "forfeited": str(sum(s.forfeited for s in slashes)),
            }
        )
    return rows


def account_summary(history: TaskHistory) -> list[dict[str, Any]]:
    """Per account the task credited: its roles, wei credited by reason, and wei it withdrew (all tasks)."""
    roles: dict[str, list[str]] = {}
    roles.setdefault(history.task.publisher, []).append("publisher")
    roles.setdefault(history.task.aggregator, []).append("aggregator")
    if history.task.sink is not None:
        roles.setdefault(history.task.sink, []).append("sink")
    for client in history.clients:
        roles.setdefault(client.account, []).append(f"client {client.index}")
    for fog in history.fog_nodes:
        roles.setdefault(fog, []).append("fog")
    for challenge in history.challenges:
        if "challenger" not in roles.setdefault(challenge.challenger, []):
            roles[challenge.challenger].append("challenger")
    withdrawn = dict(history.withdrawn)
    return [
        {
            "account": account,
            "roles": names,
            "credited": {reason: str(amount) for reason, amount in sorted(history.credited_to(account).items())},
            "withdrawn": str(withdrawn.get(account, 0)),
        }
        for account, names in roles.items()
        if account
    ]


def budget_summary(history: TaskHistory) -> dict[str, Any]:
    """Where the budget fell short: every final round paid less than eq. 15 asked (scaled down pro rata), and the
    final bonuses if they were (wei as decimal strings)."""
    task = history.task
    return {
        "scaled_rounds": [
            {"round": r.round, "demanded": str(r.demanded), "paid": str(r.paid)}
            for r in history.rounds
            if r.scaled_down
        ],
        "bonuses_demanded": None if task.bonuses_demanded is None else str(task.bonuses_demanded),
        "bonuses_scaled_down": task.bonuses_scaled_down,
    }


def _task_dict(history: TaskHistory) -> dict[str, Any]:
    task = history.task
    params = task.params._asdict() if task.params is not None else None
    return _jsonable(
        {
            "publisher": task.publisher,
            "aggregator": task.aggregator,
            "status": task.status,
            "budget": task.budget,
            "started_at": task.started_at,
            "finished_at": task.finished_at,
            "abandoned_at": task.abandoned_at,
            "last_round": task.last_round,
            "target_reached": task.target_reached,
            "bonuses": task.bonuses,
            "refund": task.refund,
            "bonder": task.bonder,
            "bond": task.bond,
            "bond_returned": task.bond_returned,
            "bond_topped_up": task.bond_topped_up,
            "bond_forfeited": task.bond_forfeited,
            "early_finish_voided": task.early_finish_voided,
            "posted_rounds": task.posted_rounds,
            "final_rounds": task.final_rounds,
            "sink": task.sink,
            "params": params,
        },
        money=(
            "budget",
            "bonuses",
            "refund",
            "target_accuracy",
            "psi",
            "phi",
            "min_loss_reputation",
            "min_time_reputation",
            "min_quality",
            "reputation_cap",
            "client_deposit",
            "fog_deposit",
            "bond",
            "bond_returned",
            "bond_topped_up",
            "bond_forfeited",
            "challenge_bond",
            "aggregator_bond",
        ),
    )


def _challenge_dict(challenge: Any) -> dict[str, Any]:
    data = dataclasses.asdict(challenge)
    data["proposed"] = challenge.proposed._asdict()
    return _jsonable(data, money=("bond", "quality", "value"))


def _client_dict(client: Any) -> dict[str, Any]:
    data = dataclasses.asdict(client)
    return _jsonable(
        data,
        money=(
            "deposit",
            "sum_quality",
            "sum_time_ratio",
            "loss_reputation",
            "time_reputation",
            "total_reputation",
            "earned",
            "bonus",
            "deposit_returned",
        ),
    )


def _round_dict(posted: Any) -> dict[str, Any]:
    return {
        "round": posted.round,
        "model_hash": "0x" + posted.model_hash.hex(),
        "accuracy": str(posted.accuracy),
        "paid": str(posted.paid),
        "demanded": str(posted.demanded),
        "measurements": [
            {"quality": str(m.quality), "round_time": m.round_time, "accepted": m.accepted, "committed": m.committed}
            for m in posted.measurements
        ],
        "fates": list(posted.fates),
        "forfeited": str(posted.forfeited),
        "scored": list(posted.scored),
        "loss_reputation": [str(v) for v in posted.loss_reputation],
        "time_reputation": [str(v) for v in posted.time_reputation],
        "payments": [str(v) for v in posted.payments],
        "removed": list(posted.removed),
    }


#: Keys whose integer values are wei or 1e18 fixed point (written as decimal strings).
_MONEY_KEYS = frozenset(
    {"price", "escrow", "payment", "forfeited", "new_price", "amount", "posted", "reproduced", "largest_gap"}
)


def _jsonable(value: Any, *, money: Iterable[str] = (), key: str | None = None) -> Any:
    """JSON values: bytes as 0x hex; big integers under money keys as decimal strings."""
    money_keys = _MONEY_KEYS | set(money)
    if isinstance(value, dict):
        return {k: _jsonable(v, money=money_keys, key=k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, money=money_keys, key=key) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int) and (key in money_keys or key is None):
        return str(value)
    return value


__all__ = ["FORMAT", "AuditReport", "RoundScore", "ScoreVerification", "account_summary", "audit_task", "fog_summary"]
