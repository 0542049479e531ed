"""The README's testnet flow, run as written: deploy, create, every participant a separate process, start, watch, audit.

The block is read from README.md (the one after its ``readme-flow`` marker), so the README and this test cannot
drift: when the README changes, this test runs what it now says. The chain is an Anvil that mines every 2 s, as an
L2 does, and the participants are cast by ``fedchain chain roles``, as the README's rehearsal has them.

The flow's shell writes a line before each command it runs (``HH:MM:SS readme-flow> COMMAND``, the command as the
README writes it), so a flow that fails or runs out of time says which step it was at.
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
#: The most the whole flow may take: about 5 minutes on a quiet 2-core machine, several times that on one that is
#: slower or busy with other work (its participants start a dozen Python processes and train on the same cores).
FLOW_TIMEOUT_S = 2400
#: The flow stops sooner when its output stays silent this long: every step, and every agent as it acts, writes
#: to it, so a flow that still moves on is never stopped for being slow, and a stuck one is.
SILENCE_TIMEOUT_S = 600
#: Seconds between two looks at the flow while it runs.
POLL_S = 1.0
#: What the flow's shell writes before each command it runs (the command as written, its variables unexpanded).
STEP_MARK = "readme-flow>"
TRACE_STEPS = f'trap \'printf "%(%H:%M:%S)T {STEP_MARK} %s\\n" -1 "$BASH_COMMAND" >&2\' DEBUG'
#: How an agent says it started (fedchain.agent.runtime): ``started agent=NAME``.
AGENT_STARTED = re.compile(r"\bstarted agent=(\S+)")
#: An agent's log line begins with its date (the commands' own output does not).
AGENT_LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d ")


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


def test_a_flow_that_falls_silent_is_stopped_and_says_which_step_it_was_at(tmp_path: Path) -> None:
    # prepare: a flow whose last step says what it waits for, then hangs; an agent in the background said it started
    flow = (
        "TASK=$(echo 7)\n"
        "echo '2026-01-01 00:00:00,000 INFO    fog.node: started agent=fog-1' &\n"
        'start_task() { echo "task $1 waits for: client 0: its auction takes bids"; sleep 60; }\n'
        "start_task $TASK\n"
    )
    log_path = tmp_path / "flow.log"

    # execute: the flow as the test runs the README's, stopped after 2 s of silence
    with log_path.open("w") as log:
        shell = subprocess.Popen(
            ["bash", "-c", f"set -eo pipefail\n{TRACE_STEPS}\n{flow}"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            status, stopped = wait_for_flow(shell, log_path, timeout_s=60, silence_s=2)
        finally:
            _stop_group(shell)
    position = flow_position(log_path.read_text(), flow)

    # assert: stopped for its silence; at the hanging step as written, with what it said last and who had started
    assert status is None and stopped == "was stopped after 2 s without a line of output"
    assert "it was at step `start_task $TASK`" in position
    assert "the last line a command wrote since: task 7 waits for: client 0: its auction takes bids" in position
    assert "of the 1 agents started in the background, these said they started: fog-1" in position


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

        # execute: the block as a bash script that marks each step; every `&` line is a participant of its own
        with log_path.open("w") as log:
            shell = subprocess.Popen(
                ["bash", "-c", f"set -eo pipefail\n{roles}\n{TRACE_STEPS}\n{flow}"],
                cwd=tmp_path,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                status, stopped = wait_for_flow(shell, log_path)
            finally:
                _stop_group(shell)
        output = log_path.read_text()

        # assert: the audit (the flow's last command) passed; every client and fog node was paid, the bond came back
        assert status == 0, (
            f"the README flow {stopped or f'ended with {status}'}; {flow_position(output, flow)}\n"
            f"its output:\n{output[-12000:]}"
        )
        w3, deployment = open_deployment(tmp_path / ".fedchain" / "l2.json")
        task_id = int(re.findall(r"^task (\d+) started", output, flags=re.MULTILINE)[-1])
        report = audit_on_chain(w3, deployment, task_id, open_store(str(tmp_path / ".fedchain" / "store")))
    assert report.passed, report.failed_checks
    history = report.history
    assert len(history.clients) == 3
    unpaid = [
        (c.index, c.status, c.removed_round, c.rounds, c.earned, c.deposit_returned)
        for c in history.clients
        if not (c.status == "active" and c.earned > 0 and (c.deposit_returned or 0) > 0)
    ]
    # on failure: each client not paid (index, status, removed in round, rounds scored, earned, deposit back), the
    # rounds' entries, challenges and slashes, and what the agents said
    assert not unpaid, f"{unpaid}\n{history.rounds}\n{history.challenges}\n{history.slashes}\n{output[-8000:]}"
    assert all(a.winner is not None for a in history.auctions)  # every job was won: no client sat the task out
    fogs = fog_summary(history)
    assert len(fogs) == 2 and all(row["bids"] > 0 for row in fogs)  # both fog nodes from the example config bid
    # and whoever won a job was paid for it (on failure: who was slashed, and what the agents said)
    assert all(int(row["payments"]) > 0 for row in fogs if row["jobs"]), f"{fogs}\n{history.slashes}\n{output[-8000:]}"
    assert history.task.status == "Settled" and history.task.bond_returned == history.task.bond
    assert f"task {task_id}: settled" in output  # what `fedchain task watch` printed at the end


def flow_position(output: str, flow: str) -> str:
    """Where the flow was, from its output: the step it ran last and since when, the last line its commands wrote
    after that step began (agents' log lines aside), and the agents that had said they started."""
    lines = output.splitlines()
    marks = [i for i, line in enumerate(lines) if STEP_MARK in line]
    if not marks:
        return "it reached no step of the README's block (the roles or the shell failed first)"
    at, command = (part.strip() for part in lines[marks[-1]].split(STEP_MARK, 1))
    said = [line.strip() for line in lines[marks[-1] + 1 :] if line.strip() and not AGENT_LOG_LINE.match(line)]
    started = sorted(set(AGENT_STARTED.findall(output)))
    background = sum(1 for line in flow.splitlines() if line.rstrip().endswith("&"))
    return (
        f"it was at step `{command}` (since {at}); the last line a command wrote since: {said[-1] if said else '(none)'}; "
        f"of the {background} agents started in the background, these said they started: {', '.join(started) or 'none'} "
        "(the aggregator and the arbiters say nothing until they act)"
    )


def wait_for_flow(
    shell: subprocess.Popen[bytes],
    log_path: Path,
    *,
    timeout_s: float = FLOW_TIMEOUT_S,
    silence_s: float = SILENCE_TIMEOUT_S,
) -> tuple[int | None, str]:
    """Wait for the flow's shell, which writes to ``log_path``; its exit status, or None and why it was stopped (it
    ran ``timeout_s``, or its output stayed silent ``silence_s``). The caller stops it."""
    started = heard = time.monotonic()
    size = 0
    while True:
        try:
            return shell.wait(timeout=POLL_S), ""
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if log_path.stat().st_size != size:
            size, heard = log_path.stat().st_size, now
        if now - heard > silence_s:
            return None, f"was stopped after {silence_s:.0f} s without a line of output"
        if now - started > timeout_s:
            return None, f"was stopped after running {timeout_s:.0f} s"


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
