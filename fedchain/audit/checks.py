"""The audit's checks: their names, their findings, and the tally that collects them.

Every comparison the auditor makes belongs to one named check (``payments.recomputed``,
``escrow.task``, ...). A check passes when it compared something and found no
mismatch; it is *skipped* when there was nothing to compare (no blob store given,
scores not asked for). The names are stable: the JSON report and the tests use them.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fedchain.chain.abi import ChainEvent

#: Default largest |posted - reproduced| quality (and accuracy) of ``--verify-scores`` (1e-3 = 0.1 %).
DEFAULT_SCORE_TOLERANCE = 1e-3


class CheckName(str, enum.Enum):
    """The audit's checks, in the order the report lists them."""

    HISTORY = "history.consistent"
    AUCTIONS = "auctions.recomputed"
    REPUTATION = "reputation.recomputed"
    CROSS_TASK = "reputation.cross_task"
    PAYMENTS = "payments.recomputed"
    ESCROW_TASK = "escrow.task"
    ESCROW_TREASURY = "escrow.treasury"
    WITHDRAWALS = "withdrawals.bounded"
    STORE_UPDATES = "store.updates"
    STORE_MODELS = "store.models"
    STORE_REWARDS = "store.rewards"
    SCORES = "scores.reproduced"
    DISPUTES = "disputes.replayed"
    SINK = "forfeits.sink"


#: What each check asserts, one line each (shown in every report).
DESCRIPTIONS: Mapping[CheckName, str] = {
    CheckName.HISTORY: "the task's events form a valid history (order, indices, rounds, commits, round times)",
    CheckName.AUCTIONS: "every winner, price, escrow and reassignment follows eq. 18 from the revealed bids",
    CheckName.REPUTATION: "every reputation and removal recomputed from the posted measurements matches the chain",
    CheckName.CROSS_TASK: "the posted cross-task priors (eq. 6) match those recomputed from earlier tasks' events",
    CheckName.PAYMENTS: "every payment, bonus, refund and forfeit recomputed to the wei matches the chain's credits",
    CheckName.ESCROW_TASK: "deposited == credited + held for the task, and the pool's parts add up to it",
    CheckName.ESCROW_TREASURY: "the Treasury's balance == claimable + held, and its totals match all events",
    CheckName.WITHDRAWALS: "no account ever withdrew more than it was credited; claimable == credited - withdrawn",
    CheckName.STORE_UPDATES: "every committed update (and job data) hash names a blob whose bytes hash to it",
    CheckName.STORE_MODELS: "every model hash (modelId, datasetId, each round's model) names a blob whose bytes hash to it",
    CheckName.STORE_REWARDS: (
        "every round of a task that rewards in kind committed a reward root, rebuilt from its stored reward list, "
        "and every listed reward is in the store intact and is its client's"
    ),
    CheckName.DISPUTES: (
        "the aggregator's bond, every challenge, verdict and expiry, the fate it gave its entry and the money it "
        "moved follow the rules"
    ),
    CheckName.SINK: "every forfeit and slash went to the deployment's sink (a rejected challenge's half to the accused), "
    "none to the publisher",
    CheckName.SCORES: (
        "the posted qualities (and, for rewards in kind, every reward) are reproduced from the stored updates "
        "within the tolerance, and every fog verdict's named transcript segment re-judges the same"
    ),
}


class CheckStatus(str, enum.Enum):
    """A check's verdict."""

    PASS = "pass"
    FAIL = "fail"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Finding:
    """One mismatch: what differs, and the event it was found at (when there is one)."""

    check: CheckName
    message: str
    block_number: int | None = None
    log_index: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON keys."""
        return {"message": self.message, "block_number": self.block_number, "log_index": self.log_index}


@dataclass(frozen=True)
class CheckResult:
    """A check's verdict: how many comparisons it made and what did not match."""

    name: CheckName
    compared: int
    findings: tuple[Finding, ...] = ()
    #: Why the check did not run (only when ``compared`` is 0).
    skipped_because: str | None = None
    #: Things worth knowing that are not failures (e.g. a rejected update whose blob is gone).
    notes: tuple[str, ...] = ()

    @property
    def status(self) -> CheckStatus:
        if self.findings:
            return CheckStatus.FAIL
        if self.compared == 0:
            return CheckStatus.SKIPPED
        return CheckStatus.PASS

    @property
    def failed(self) -> bool:
        return self.status is CheckStatus.FAIL

    @property
    def description(self) -> str:
        return DESCRIPTIONS[self.name]

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON keys."""
        return {
            "name": self.name.value,
            "description": self.description,
            "status": self.status.value,
            "compared": self.compared,
            "skipped_because": self.skipped_because,
            "findings": [f.to_dict() for f in self.findings],
            "notes": list(self.notes),
        }


@dataclass
class Tally:
    """Collects comparisons and findings per check while the auditor walks the history (pure, no I/O)."""

    compared: Counter[CheckName] = field(default_factory=Counter)
    findings: dict[CheckName, list[Finding]] = field(default_factory=dict)
    skipped: dict[CheckName, str] = field(default_factory=dict)
    notes: dict[CheckName, list[str]] = field(default_factory=dict)

    def expect(self, check: CheckName, what: str, expected: Any, actual: Any, at: ChainEvent | None = None) -> bool:
        """Compare a recomputed ``expected`` value with the chain's ``actual`` one; a difference is a finding."""
        self.compared[check] += 1
        if expected == actual:
            return True
        self.fail(check, f"{what}: recomputed {_show(expected)}, chain has {_show(actual)}", at)
        return False

    def require(self, check: CheckName, condition: bool, message: str, at: ChainEvent | None = None) -> bool:
        """Count one comparison; ``message`` is the finding when ``condition`` is false."""
        self.compared[check] += 1
        if not condition:
            self.fail(check, message, at)
        return condition

    def fail(self, check: CheckName, message: str, at: ChainEvent | None = None) -> None:
        """Record a finding (counted as a comparison too, so a failed check never reads as skipped)."""
        if not self.compared[check]:
            self.compared[check] = 1
        position = (at.block_number, at.log_index) if at is not None else (None, None)
        self.findings.setdefault(check, []).append(Finding(check, message, *position))

    def note(self, check: CheckName, message: str) -> None:
        """Record something worth reporting that is not a failure (counted as a comparison)."""
        self.compared[check] += 1
        self.notes.setdefault(check, []).append(message)

    def skip(self, check: CheckName, reason: str) -> None:
        """Note why ``check`` has nothing to compare."""
        self.skipped[check] = reason

    def merge(self, other: Tally) -> Tally:
        """Both tallies' comparisons and findings."""
        merged = Tally(self.compared + other.compared, {}, {**self.skipped, **other.skipped})
        for source in (self, other):
            for check, found in source.findings.items():
                merged.findings.setdefault(check, []).extend(found)
            for check, notes in source.notes.items():
                merged.notes.setdefault(check, []).extend(notes)
        return merged

    def results(self, checks: tuple[CheckName, ...] = tuple(CheckName)) -> tuple[CheckResult, ...]:
        """One result per check in ``checks``, in that order."""
        return tuple(
            CheckResult(
                name=check,
                compared=self.compared[check],
                findings=tuple(self.findings.get(check, ())),
                skipped_because=None if self.compared[check] else self.skipped.get(check, "nothing to compare"),
                notes=tuple(self.notes.get(check, ())),
            )
            for check in checks
        )


def _show(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    return repr(value) if isinstance(value, str) else str(value)
