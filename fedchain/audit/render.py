"""Showing an audit: rich tables for the terminal, one self-contained HTML file with plots.

The HTML report embeds its matplotlib plots (reputation and payments per round)
as base64 PNG, so the file can be mailed or archived on its own. Plots are
drawn on :class:`matplotlib.figure.Figure` directly (no pyplot, no global
backend switch), so rendering works in any process.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from fedchain import units
from fedchain.audit.checks import CheckResult, CheckStatus
from fedchain.audit.history import BidRecord
from fedchain.audit.report import AuditReport, account_summary, fog_summary
from fedchain.console import stdout_console
from fedchain.units import WAD

#: Findings listed per check in the terminal table (the JSON and HTML reports list all).
FINDINGS_SHOWN = 3
STATUS_STYLE = {CheckStatus.PASS: "green", CheckStatus.FAIL: "bold red", CheckStatus.SKIPPED: "yellow"}


def fixed(value: int | None, places: int = 4) -> str:
    """A 1e18 fixed-point value as a decimal (``1.2500``); ``-`` for None."""
    return "-" if value is None else units.fixed(value, places)


def money(report: AuditReport, amount: int | str | None) -> str:
    """An amount of the task's asset in whole units, six decimals at most (``0.012500`` ETH); ``-`` for None."""
    if amount is None:
        return "-"
    return report.asset.number(int(amount), min(6, report.asset.decimals))


def short(address: str) -> str:
    """``0x1234…abcd``."""
    return f"{address[:6]}…{address[-4:]}" if len(address) > 12 else address


def verdict(report: AuditReport) -> str:
    failed = ", ".join(name.value for name in report.failed_checks)
    where = f" at block {report.block_number}" if report.block_number is not None else ""
    return f"audit of task {report.task_id}{where}: " + ("PASSED" if report.passed else f"FAILED ({failed})")


# --------------------------------------------------------------------------- terminal


def tables(report: AuditReport) -> Group:
    """The report as rich renderables, in this order: clients, fog nodes, accountability (:func:`disputes_table`),
    checks (:func:`checks_table`), verdict."""
    history = report.history
    clients = Table(title=f"Clients (reputation 1e18 = 1.0; money in {report.asset.symbol})", title_justify="left")
    for column in (
        "#",
        "account",
        "status",
        "rounds",
        "r_a",
        "r_t",
        "r_at",
        "earned",
        "bonus",
        "deposit back",
        "removed",
    ):
        clients.add_column(column, justify="right" if column not in ("account", "status") else "left")
    for c in history.clients:
        clients.add_row(
            str(c.index),
            short(c.account),
            c.status,
            str(c.rounds),
            fixed(c.loss_reputation),
            fixed(c.time_reputation),
            fixed(c.total_reputation),
            money(report, c.earned),
            money(report, c.bonus),
            money(report, c.deposit_returned),
            "-" if c.removed_round is None else str(c.removed_round),
        )
    fogs = Table(title=f"Fog nodes (money in {report.asset.symbol})", title_justify="left")
    for column in ("account", "bids", "jobs", "rounds", "paid", "slashes", "forfeited"):
        fogs.add_column(column, justify="left" if column == "account" else "right")
    for row in fog_summary(history):
        fogs.add_row(
            short(row["account"]),
            str(row["bids"]),
            ",".join(map(str, row["jobs"])) or "-",
            str(row["rounds_committed"]),
            money(report, row["payments"]),
            str(row["slashes"]),
            money(report, row["forfeited"]),
        )
    shortfall = budget_lines(report)
    budget = [Text("\n".join(shortfall), style="yellow")] if shortfall else []
    return Group(clients, fogs, disputes_table(report), *budget, checks_table(report), verdict_line(report))


def budget_lines(report: AuditReport) -> list[str]:
    """One line per final round, and one for the final bonuses, that the budget could not pay in full."""
    history = report.history
    lines = [
        f"round {r.round}: the budget paid {money(report, r.paid)} of the {money(report, r.demanded)} {report.asset.symbol} the terms asked "
        f"({100 * r.paid / r.demanded:.0f}%): every payment scaled down pro rata"
        for r in history.rounds
        if r.scaled_down
    ]
    task = history.task
    if task.bonuses_scaled_down:
        assert task.bonuses is not None and task.bonuses_demanded is not None
        lines.append(
            f"final bonuses: {money(report, task.bonuses)} of the {money(report, task.bonuses_demanded)} {report.asset.symbol} asked"
        )
    if lines:
        lines.insert(0, "Budget: it ran short (not a failed check: the contract scales pay down as designed)")
    return lines


def disputes_table(report: AuditReport) -> Table:
    """The aggregator's bond, every challenge and its verdict, and what went to the sink (money in the task's asset)."""
    history = report.history
    task = history.task
    table = Table(
        title=f"Accountability: bond, challenges and verdicts, sink (money in {report.asset.symbol})",
        title_justify="left",
    )
    for column in ("what", "round", "client", "by", "against", "outcome", "entry became"):
        table.add_column(column, justify="right" if column in ("round", "client") else "left")
    if task.bond_forfeited is not None:
        returned = f"to the sink {money(report, task.bond_forfeited)} (abandoned)"
    else:
        returned = "returned " + ("-" if task.bond_returned is None else money(report, task.bond_returned))
    topped = f", topped up {money(report, task.bond_topped_up)}" if task.bond_topped_up else ""
    table.add_row(
        f"aggregator bond {money(report, task.bond)}{topped}", "", "", short(task.bonder or "-"), "", returned, ""
    )
    for c in history.challenges:
        against = f"update of {short(c.accused)}" if c.kind == "fog" else f"aggregator's {c.kind}"
        table.add_row(
            f"challenge {c.challenge_id}",
            str(c.round),
            "-" if c.kind == "accuracy" else str(c.client_index),
            short(c.challenger),
            against,
            c.status,
            c.fate,
        )
    sink = history.to_sink
    where = "burned" if task.sink is None or int(task.sink, 16) == 0 else short(task.sink)
    table.add_row(
        f"sink ({where})",
        "",
        "",
        "",
        "",
        money(report, sum(sink.values())),
        ", ".join(f"{reason} {money(report, amount)}" for reason, amount in sorted(sink.items())) or "-",
    )
    return table


def checks_table(report: AuditReport) -> Table:
    """Every check with its result, number of comparisons and first findings."""
    checks = Table(title="Checks", title_justify="left")
    for column in ("check", "result", "compared", "findings"):
        checks.add_column(column, justify="right" if column == "compared" else "left")
    for check in report.checks:
        checks.add_row(
            check.name.value,
            Text(check.status.value, style=STATUS_STYLE[check.status]),
            str(check.compared),
            _findings(check),
        )
    return checks


def verdict_line(report: AuditReport) -> Text:
    """The verdict, green or red."""
    return Text(verdict(report), style="bold green" if report.passed else "bold red")


def _findings(check: CheckResult) -> str:
    if check.status is CheckStatus.SKIPPED:
        return check.skipped_because or ""
    lines = [f.message for f in check.findings[:FINDINGS_SHOWN]]
    if len(check.findings) > FINDINGS_SHOWN:
        lines.append(f"... and {len(check.findings) - FINDINGS_SHOWN} more")
    if check.notes:
        lines.append(f"({len(check.notes)} note(s): see --json or --html)")
    return "\n".join(lines)


#: Width of the tables when the output is not a terminal (a pipe or a log would otherwise get 80 columns).
PIPE_WIDTH = 132


def print_report(report: AuditReport, console: Console | None = None) -> None:
    """Print the terminal tables."""
    if console is None:
        console = stdout_console(PIPE_WIDTH)
    console.print(tables(report))


# --------------------------------------------------------------------------- plots


def reputation_plot(report: AuditReport) -> Figure:
    """r_a (solid) and r_t (dashed) of every client after each round; round 0 is the initial reputation."""
    history = report.history
    figure = Figure(figsize=(7, 3.6), layout="constrained")
    axes = figure.add_subplot()
    initial = report.mechanism.initial_reputation if report.mechanism is not None else WAD
    rounds = [0] + [r.round for r in history.rounds]
    for client in history.clients:
        last = client.removed_round or rounds[-1]  # a removed client's line ends at its removal
        shown = [r for r in history.rounds if r.round <= last]
        xs = [0] + [r.round for r in shown]
        loss = [initial] + [r.loss_reputation[client.index] for r in shown]
        time = [initial] + [r.time_reputation[client.index] for r in shown]
        (line,) = axes.plot(xs, [v / WAD for v in loss], marker="o", label=f"client {client.index} r_a")
        axes.plot(
            xs, [v / WAD for v in time], linestyle="--", color=line.get_color(), label=f"client {client.index} r_t"
        )
    axes.set_xlabel("round")
    axes.set_ylabel("reputation")
    axes.set_title(f"Task {report.task_id}: loss (r_a) and time (r_t) reputation per round")
    axes.set_xticks(rounds)
    axes.legend(fontsize="small", ncols=2)
    return figure


def payments_plot(report: AuditReport) -> Figure:
    """Every client's eq. 15 payment per round (the task's asset), bars side by side."""
    history = report.history
    figure = Figure(figsize=(7, 3.6), layout="constrained")
    axes = figure.add_subplot()
    n = max(len(history.clients), 1)
    width = 0.8 / n
    for client in history.clients:
        xs = [r.round - 0.4 + width * (client.index + 0.5) for r in history.rounds]
        axes.bar(
            xs,
            [r.payments[client.index] / 10**report.asset.decimals for r in history.rounds],
            width=width,
            label=f"client {client.index}",
        )
    axes.set_xlabel("round")
    axes.set_ylabel(f"payment ({report.asset.symbol})")
    axes.set_title(f"Task {report.task_id}: per-round payments (eq. 15, after pro-rata scaling)")
    axes.set_xticks([r.round for r in history.rounds])
    if history.clients:
        axes.legend(fontsize="small")
    return figure


def png_base64(figure: Figure) -> str:
    """The figure as a base64 PNG."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


# --------------------------------------------------------------------------- HTML


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f2f2f2; } td.l { text-align: left; font-family: monospace; }
.pass { color: #087f23; font-weight: bold; } .fail { color: #c62828; font-weight: bold; } .skipped { color: #a66d00; }
.verdict { font-size: 1.3em; } img { max-width: 100%; }
"""


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], left: Sequence[int] = ()) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            raw = cell if isinstance(cell, _Raw) else html.escape(str(cell))
            cells.append(f'<td class="l">{raw}</td>' if i in left else f"<td>{raw}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


class _Raw(str):
    """Markup already escaped."""


def _bid(report: AuditReport, bid: BidRecord) -> str:
    terms = f"{bid.frequency}, {money(report, bid.price)}" if bid.revealed else "not revealed"
    return f"{bid.index}: {bid.bidder}, {terms}"


def html_report(report: AuditReport) -> str:
    """One self-contained HTML page: verdict, checks with every finding, tables and the two plots."""
    history = report.history
    checks = _table(
        ("check", "result", "compared", "what it asserts", "findings"),
        [
            (
                c.name.value,
                _Raw(f'<span class="{c.status.value}">{c.status.value}</span>'),
                c.compared,
                c.description,
                _Raw(
                    "<br>".join(
                        [html.escape(f.message) for f in c.findings] + [f"note: {html.escape(n)}" for n in c.notes]
                    )
                    or html.escape(c.skipped_because or "")
                ),
            )
            for c in report.checks
        ],
        left=(0, 3, 4),
    )
    clients = _table(
        (
            "#",
            "account",
            "status",
            "rounds",
            "r_a",
            "r_t",
            "r_at",
            f"earned ({report.asset.symbol})",
            f"bonus ({report.asset.symbol})",
            f"deposit back ({report.asset.symbol})",
            "removed",
        ),
        [
            (
                c.index,
                c.account,
                c.status,
                c.rounds,
                fixed(c.loss_reputation),
                fixed(c.time_reputation),
                fixed(c.total_reputation),
                money(report, c.earned),
                money(report, c.bonus),
                money(report, c.deposit_returned),
                "-" if c.removed_round is None else c.removed_round,
            )
            for c in history.clients
        ],
        left=(1, 2),
    )
    fogs = _table(
        (
            "account",
            "bids",
            "jobs",
            "rounds committed",
            f"paid ({report.asset.symbol})",
            "slashes",
            f"forfeited ({report.asset.symbol})",
        ),
        [
            (
                r["account"],
                r["bids"],
                ",".join(map(str, r["jobs"])) or "-",
                r["rounds_committed"],
                money(report, r["payments"]),
                r["slashes"],
                money(report, r["forfeited"]),
            )
            for r in fog_summary(history)
        ],
        left=(0,),
    )
    slashes = _table(
        (
            "client",
            "fog",
            "why",
            "round",
            f"forfeited ({report.asset.symbol})",
            "new winner (bid)",
            f"new price ({report.asset.symbol})",
            "from round",
        ),
        [
            (
                s.client_index,
                s.fog,
                "missed the round" if s.kind == "missed" else "fraud (upheld challenge)",
                s.round,
                money(report, s.forfeited),
                "-" if s.new_winner is None else s.new_winner,
                money(report, s.new_price),
                s.from_round or "-",
            )
            for s in history.slashes
        ],
        left=(1, 2),
    )
    challenges = _table(
        (
            "#",
            "round",
            "client",
            "kind",
            "challenger",
            "accused",
            "proposed",
            f"bond ({report.asset.symbol})",
            "outcome",
            "entry became",
        ),
        [
            (
                c.challenge_id,
                c.round,
                "-" if c.kind == "accuracy" else c.client_index,
                c.kind,
                c.challenger,
                c.accused,
                fixed(c.proposed.quality) if c.kind == "entry" else fixed(c.value) if c.kind != "fog" else "-",
                money(report, c.bond),
                c.status,
                c.fate,
            )
            for c in history.challenges
        ],
        left=(3, 4, 5, 8, 9),
    )
    sink = history.to_sink
    bond = _table(
        (
            f"aggregator bond ({report.asset.symbol})",
            "posted by",
            f"returned at settlement ({report.asset.symbol})",
            "sink",
            f"sent to the sink ({report.asset.symbol})",
        ),
        [
            (
                money(report, history.task.bond),
                history.task.bonder or "-",
                "-" if history.task.bond_returned is None else money(report, history.task.bond_returned),
                history.task.sink or "-",
                _Raw(
                    "<br>".join(html.escape(f"{why}: {money(report, wei)}") for why, wei in sorted(sink.items())) or "-"
                ),
            )
        ],
        left=(1, 3, 4),
    )
    auctions = _table(
        (
            "job (client)",
            "data size",
            f"bids: bidder, frequency (Hz), price ({report.asset.symbol})",
            "winner (bid)",
            f"price ({report.asset.symbol})",
            f"escrow ({report.asset.symbol})",
        ),
        [
            (
                a.client_index,
                a.data_size,
                _Raw("<br>".join(html.escape(_bid(report, b)) for b in a.bids)),
                "-" if a.winner is None else a.winner,
                money(report, a.price),
                money(report, a.escrow),
            )
            for a in history.auctions
        ],
        left=(2,),
    )
    accounts = _table(
        (
            "account",
            "roles",
            f"credited by reason ({report.asset.symbol})",
            f"withdrawn ({report.asset.symbol}, all tasks)",
        ),
        [
            (
                row["account"],
                ", ".join(row["roles"]),
                _Raw(
                    "<br>".join(html.escape(f"{why}: {money(report, wei)}") for why, wei in row["credited"].items())
                    or "-"
                ),
                money(report, row["withdrawn"]),
            )
            for row in account_summary(history)
        ],
        left=(0, 1, 2),
    )
    rounds = _table(
        (
            "round",
            "model hash",
            "accuracy",
            f"paid ({report.asset.symbol})",
            f"asked ({report.asset.symbol})",
            "removed",
            f"forfeited ({report.asset.symbol})",
            "challenged entries",
        ),
        [
            (
                r.round,
                "0x" + r.model_hash.hex(),
                fixed(r.accuracy),
                money(report, r.paid),
                money(report, r.demanded),
                ",".join(map(str, r.removed)) or "-",
                money(report, r.forfeited),
                ", ".join(f"{i}: {fate}" for i, fate in enumerate(r.fates) if fate != "posted") or "-",
            )
            for r in history.rounds
        ],
        left=(1, 7),
    )
    plots = "".join(
        f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{png_base64(figure)}">'
        for alt, figure in (
            ("reputation per round", reputation_plot(report)),
            ("payments per round", payments_plot(report)),
        )
    )
    state = "pass" if report.passed else "fail"
    task = history.task
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>FedChain audit of task {report.task_id}</title>
<style>{_CSS}</style></head><body>
<h1>FedChain audit of task {report.task_id}</h1>
<p class="verdict {state}">{html.escape(verdict(report))}</p>
<p>Publisher {html.escape(task.publisher)}, aggregator {html.escape(task.aggregator)}; status {html.escape(task.status)};
budget {money(report, task.budget)} {report.asset.symbol}; {task.last_round} round(s) posted.</p>
<h2>Checks</h2>{checks}
<h2>Clients</h2>{clients}
<h2>Fog nodes</h2>{fogs}
<h2>Auctions</h2>{auctions}
<h2>Slashes</h2>{slashes}
<h2>Accountability</h2><p>A round's money moves only when it is final (its challenge window passed, its challenges
judged). Forfeits and slashes go to the sink, never to the publisher or the aggregator.</p>{bond}{challenges}
<h2>Rounds</h2>{rounds}
<h2>Money by account</h2>{accounts}
<h2>Reputation and payments per round</h2>{plots}
</body></html>
"""
