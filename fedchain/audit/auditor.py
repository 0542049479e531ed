"""One call for a whole audit on a live chain: read, optionally reproduce the scores, check.

What ``fedchain audit`` runs, for programs that want the report itself (the
demo, end-to-end tests): :func:`audit_on_chain`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from web3 import Web3

from fedchain.audit.chain import read_chain, read_task_asset
from fedchain.audit.checks import DEFAULT_SCORE_TOLERANCE
from fedchain.audit.report import AuditReport, audit_task
from fedchain.chain.deployment import Deployment
from fedchain.store import BlobStore

if TYPE_CHECKING:
    from fedchain.aggregator.scoring import QualityChoice


def audit_on_chain(
    w3: Web3,
    deployment: Deployment,
    task_id: int,
    store: BlobStore,
    *,
    verify_scores: bool = False,
    score_tolerance: float = DEFAULT_SCORE_TOLERANCE,
    data_root: str | Path | None = None,
    strategy: str | None = None,
    quality: QualityChoice = "auto",
    to_block: int | None = None,
) -> AuditReport:
    """Audit task ``task_id`` of ``deployment`` as of ``to_block`` (default: the latest block).

    With ``verify_scores`` the aggregator's scoring is re-run from the stored
    updates on the validation set under ``data_root`` (default: ``FEDCHAIN_DATA_ROOT``),
    with the task spec's strategy unless ``strategy`` (and ``quality``) say what the aggregator ran.
    """
    readings = read_chain(w3, deployment, task_id, to_block=to_block)
    scores = None
    if verify_scores:
        from fedchain.audit.scores import verify_scores as reproduce

        scores = reproduce(
            task_id,
            readings.events,
            store,
            tolerance=score_tolerance,
            data_root=data_root,
            strategy=strategy,
            quality=quality,
        )
    report = audit_task(task_id, readings.events, views=readings.views, store=store, scores=scores)
    return dataclasses.replace(report, asset=read_task_asset(w3, readings.events, task_id))
