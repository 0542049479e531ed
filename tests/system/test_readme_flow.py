"""The README's testnet flow, run as written: deploy, create, every participant a separate process, start, watch, audit.

The block is read from README.md (the one after its ``readme-flow`` marker), so the README and this test cannot
drift: when the README changes, this test runs what it now says. The chain is an Anvil that mines every 2 s, as an
L2 does, and the participants are cast by ``fedchain chain roles``, as the README's rehearsal has them.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fedchain.audit.auditor import audit_on_chain
from fedchain.audit.report import fog_summary
from fedchain.chain.deployment import open_deployment
from fedchain.chain.node import AnvilNode, AnvilSettings
from fedchain.store import open_store

REPO = Path(__file__).parents[2]
MARKER = "<!-- readme-flow:"
#: The most the whole flow may take on a busy 2-core machine (it takes about 5 minutes).
FLOW_TIMEOUT_S = 900


def readme_flow(readme: str) -> str:
    """The shell block that follows the README's ``readme-flow`` marker."""
    if MARKER not in readme:
        raise AssertionError(f"README.md has no {MARKER!r} marker before its testnet flow")
    after = readme.split(MARKER, 1)[1]
    match = re.search(r"```sh\n(.*?)```", after, flags=re.DOTALL)
    assert match is not None, "no ```sh block after the readme-flow marker"
    return match.group(1)


def test_the_flow_is_found_and_runs_every_participant_as_its_own_process() -> None:
    flow = readme_flow((REPO / "README.md").read_text())

    for command in (
        "fedchain deploy",
        "fedchain task create",
        "fedchain aggregator run",
        "fedchain verifier run",
        "fedchain fog run",
        "fedchain client run",
        "fedchain task start",
        "fedchain task watch",
        "fedchain audit",
    ):
        assert command in flow
    assert flow.count("fedchain client run") == 3 and flow.count("fedchain fog run") == 2
    assert (
        "configs/system/l2.yaml" in flow and "configs/system/fog.yaml" in flow and "configs/system/client.yaml" in flow
    )


@pytest.mark.slow
def test_the_readme_testnet_flow_runs_as_written_on_a_chain_with_2_s_blocks(data_root: Path, tmp_path: Path) -> None:
    # prepare: a chain that mines every 2 s; the README's rehearsal roles; the repository's example configs
    flow = readme_flow((REPO / "README.md").read_text())
    (tmp_path / "configs").symlink_to(REPO / "configs")
    env = {
        **os.environ,
        "FEDCHAIN_DATA_ROOT": str(data_root),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    env.pop("FEDCHAIN_DEPLOYMENT", None)
    env.pop("FEDCHAIN_STORE", None)
    log_path = tmp_path / "flow.log"
    with AnvilNode(AnvilSettings(block_time=2)) as node:
        roles = subprocess.run(
            ["fedchain", "chain", "roles", "--rpc-url", node.rpc_url],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout

        # execute: the block as a bash script; every `&` line is a participant of its own
        with log_path.open("w") as log:
            shell = subprocess.Popen(
                ["bash", "-c", f"set -eo pipefail\n{roles}\n{flow}"],
                cwd=tmp_path,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                status = shell.wait(timeout=FLOW_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                status = None
            finally:
                _stop_group(shell)
        output = log_path.read_text()

        # assert: the audit (the flow's last command) passed; every client and fog node was paid, the bond came back
        assert status == 0, f"the README flow ended with {status}; its output:\n{output[-12000:]}"
        w3, deployment = open_deployment(tmp_path / ".fedchain" / "l2.json")
        task_id = int(re.findall(r"^task (\d+) started", output, flags=re.MULTILINE)[-1])
        report = audit_on_chain(w3, deployment, task_id, open_store(str(tmp_path / ".fedchain" / "store")))
    assert report.passed, report.failed_checks
    history = report.history
    assert len(history.clients) == 3
    assert all(c.status == "active" and c.earned > 0 and (c.deposit_returned or 0) > 0 for c in history.clients)
    assert all(a.winner is not None for a in history.auctions)  # every job was won: no client sat the task out
    fogs = fog_summary(history)
    assert len(fogs) == 2 and all(row["bids"] > 0 for row in fogs)  # both fog nodes from the example config bid
    # and whoever won a job was paid for it (on failure: who was slashed, and what the agents said)
    assert all(int(row["payments"]) > 0 for row in fogs if row["jobs"]), f"{fogs}\n{history.slashes}\n{output[-8000:]}"
    assert history.task.status == "Settled" and history.task.bond_returned == history.task.bond
    assert f"task {task_id}: settled" in output  # what `fedchain task watch` printed at the end


def _stop_group(shell: subprocess.Popen[bytes]) -> None:
    """Stop the flow's shell and every agent it started (they share its process group): SIGTERM, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(shell.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if shell.poll() is not None:
                try:
                    os.killpg(shell.pid, 0)
                except ProcessLookupError:
                    return
            time.sleep(0.5)
