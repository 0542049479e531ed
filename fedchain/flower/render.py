"""The tables ``fedchain flower example`` prints: who earned what, and the Flower rounds with and without FedChain."""

from __future__ import annotations

import statistics

from rich.table import Table

from fedchain.flower.example import ExampleResult


def example_tables(result: ExampleResult) -> list[Table]:
    """Each client's outcome; the round times of plain FedAvg and FedAvg with FedChain; the audit's verdict."""
    clients = Table(title=f"task {result.task_id}: each client", title_justify="left", show_edge=False)
    headers = ("partition", "client", "account", "standing", "rounds ETH", "bonus ETH", "deposit back ETH")
    for header in (*headers, "withdrawn ETH"):
        clients.add_column(header, justify="right" if "ETH" in header or header == "client" else "left")
    for c in result.clients:
        standing = f"removed in round {c.removed_round}" if c.removed_round is not None else "in good standing"
        amounts = (c.earned, c.bonus, c.deposit_returned, c.withdrawn)
        clients.add_row(str(c.partition), str(c.index), c.account, standing, *(f"{a / 1e18:.5f}" for a in amounts))
    tables = [clients]
    if result.figures:
        rounds = Table(title="Flower rounds, wall time (s)", title_justify="left", show_edge=False)
        for header in ("run", "rounds", "median", "each", "after the loop", "gas per post"):
            rounds.add_column(header)
        for _name, figures in result.figures.items():
            seconds = figures.get("round_seconds", [])
            gas = list(figures.get("post_gas", {}).values())
            rounds.add_row(
                "FedAvg + FedChain" if figures.get("fedchain") else "plain FedAvg",
                str(len(seconds)),
                f"{statistics.median(seconds):.2f}" if seconds else "-",
                " ".join(f"{s:.2f}" for s in seconds),
                f"{figures.get('drain_seconds', 0.0):.2f}",
                " ".join(str(g) for g in gas) or "-",
            )
        tables.append(rounds)
    audit = Table(title="audit (--verify-scores)", title_justify="left", show_edge=False)
    audit.add_column("check")
    audit.add_column("result")
    for check in result.audit.checks:
        audit.add_row(check.name.value, check.status.value)
    tables.append(audit)
    return tables
