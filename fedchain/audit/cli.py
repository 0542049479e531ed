"""``fedchain audit``: the command line over :mod:`fedchain.audit`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import click

from fedchain.chain.commands import deployment_option
from fedchain.console import machine_json
from fedchain.errors import AuditFailed
from fedchain.files import writable_folder, write_atomic
from fedchain.store import DEFAULT_STORE_URL

if TYPE_CHECKING:
    from fedchain.aggregator.scoring import QualityChoice

log = logging.getLogger(__name__)


@click.command()
@click.option("--task", "task_id", type=click.IntRange(min=1), required=True, help="The task id to audit.")
@deployment_option
@click.option("--rpc-url", help="JSON-RPC URL of the chain. Default: the one in the deployment file.")
@click.option(
    "--store",
    "store_url",
    default=DEFAULT_STORE_URL,
    show_default=True,
    envvar="FEDCHAIN_STORE",
    help="Blob store: a folder or an fsspec URL (or $FEDCHAIN_STORE).",
)
@click.option(
    "--html",
    "html_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write a self-contained HTML report here.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (machine readable) instead of tables.")
@click.option(
    "--verify-scores",
    is_flag=True,
    help="Re-run the aggregator's scoring from the stored updates (needs the data root), and re-execute the "
    "transcript segment every fog verdict names.",
)
@click.option(
    "--score-tolerance",
    type=click.FloatRange(min=0.0),
    default=None,
    help="Largest accepted |posted - reproduced| quality with --verify-scores. [default: 1e-3]",
)
@click.option("--strategy", help="With --verify-scores: the strategy the aggregator ran. [default: the task spec's]")
@click.option(
    "--quality",
    type=click.Choice(["auto", "loss", "contribution"]),
    default="auto",
    show_default=True,
    help="With --verify-scores: the aggregator's --quality (auto: contribution for cgsv, fedfaim and fedave, else loss).",
)
@click.option(
    "--data-root",
    type=click.Path(file_okay=False, path_type=Path),
    help="Dataset folder (default: FEDCHAIN_DATA_ROOT).",
)
@click.option("--to-block", type=click.IntRange(min=0), help="Audit the chain as of this block (default: the latest).")
def audit(
    task_id: int,
    deployment_file: Path,
    rpc_url: str | None,
    store_url: str,
    html_file: Path | None,
    as_json: bool,
    verify_scores: bool,
    score_tolerance: float | None,
    strategy: str | None,
    quality: QualityChoice,
    data_root: Path | None,
    to_block: int | None,
) -> None:
    """Replay every event of a task, recompute its reputation and payments, and check the money and the store.

    \b
    Checks: the history is consistent; auctions, reputation and payments
    recomputed to the wei match the chain; escrow is conserved for the task
    and the Treasury; no withdrawal exceeds its credits; every committed
    update and model is in the store intact; with --verify-scores, the posted
    qualities are reproduced from the stored updates. The exit status is 1
    when any check fails.
    """
    from fedchain.audit.auditor import audit_on_chain
    from fedchain.audit.checks import DEFAULT_SCORE_TOLERANCE
    from fedchain.audit.render import html_report, print_report
    from fedchain.chain.deployment import open_deployment
    from fedchain.store import open_store

    if html_file is not None:
        writable_folder(html_file.parent, option="--html")  # before the replay, which may take minutes
    w3, deployment = open_deployment(deployment_file, rpc_url=rpc_url)
    report = audit_on_chain(
        w3,
        deployment,
        task_id,
        open_store(store_url),
        verify_scores=verify_scores,
        data_root=data_root,
        strategy=strategy,
        quality=quality,
        score_tolerance=DEFAULT_SCORE_TOLERANCE if score_tolerance is None else score_tolerance,
        to_block=to_block,
    )
    if html_file is not None:
        write_atomic(html_file, html_report(report).encode("utf-8"))
        log.info("HTML report written to %s", html_file)
    if as_json:
        click.echo(machine_json(report.to_dict()))
    else:
        print_report(report)
    if not report.passed:
        failed = ", ".join(name.value for name in report.failed_checks)
        raise AuditFailed(f"the audit of task {task_id} failed: {failed}")
