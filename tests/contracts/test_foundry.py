"""The contracts' own Foundry suite (``foundry/``), run as ``make test`` runs everything: by pytest.

``forge test`` compiles the contracts with the project's settings and runs the findings' tests
(``foundry/test/Findings.t.sol``), the gas scenario and the money invariants over handler-driven actors
(``foundry/test/invariant``): at least 50,000 calls in the bounded campaign of ``foundry.toml``; ``make
invariants`` runs a longer one. A handler that reverts is a bug of the handler (it catches every refused call),
so the run must report none.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from foundry.campaign import CAMPAIGN, summary

REPO = Path(__file__).resolve().parents[2]
#: The native forge of the npm package: its ``.bin/forge`` launcher does not pass forge's exit status on.
FORGES = sorted(REPO.glob("node_modules/@foundry-rs/forge-*/bin/forge"))
#: The campaign of foundry.toml: runs x depth calls.
MIN_INVARIANT_CALLS = 50_000
#: Compiling with the WebAssembly solc takes minutes on a busy 2-core machine; the campaign about one more.
FORGE_TIMEOUT_S = 1800
#: The flows the bounded campaign must reach, by the events that mark each (any of them): a campaign that never
#: removes a client or slashes a bond would check the invariants of the easy paths only. The campaign's seed is
#: fixed (foundry.toml), so a run reaches what the run before it reached.
FLOWS = (
    ("ClientRemoved(uint256,uint256,uint16,uint64,uint64)",),
    (
        "FogSlashed(uint256,uint256,address,uint16,uint256)",
        "FogFraudSlashed(uint256,uint256,address,uint16,uint256,uint256)",
    ),
    ("BidRejected(uint256,uint256,address,uint256,int256)",),
    ("BondSlashed(uint256,uint256,uint256,uint256)",),
    ("BondToppedUp(uint256,address,uint256)",),
    ("BondForfeited(uint256,uint256)",),
    ("TaskAbandoned(uint256,uint16,uint64,uint64)",),
    ("ClientSettled(uint256,uint256,uint256,uint256,uint256)",),
)


@pytest.mark.slow
def test_the_foundry_suite_passes_with_every_invariant_over_at_least_50000_calls() -> None:
    # prepare: forge from npm (make setup), one thread (the suite's other workers share the cores)
    assert FORGES, "forge is missing: run `make setup` (npm install brings @foundry-rs/forge)"
    env = {**os.environ, "FOUNDRY_DISABLE_NIGHTLY_WARNING": "1", "NO_COLOR": "1"}
    CAMPAIGN.unlink(missing_ok=True)

    # execute
    done = subprocess.run(
        [str(FORGES[0]), "test", "--threads", "1", "--no-match-contract", "GasScenario"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=FORGE_TIMEOUT_S,
    )
    output = done.stdout + done.stderr

    # assert: every test passed; the invariant campaign made its calls and its handler never reverted
    assert done.returncode == 0, output[-8000:]
    campaign = re.search(r"\[PASS\] invariant_money\(\) \(runs: (\d+), calls: (\d+), reverts: (\d+)\)", output)
    assert campaign is not None, output[-4000:]
    runs, calls, reverts = (int(group) for group in campaign.groups())
    assert calls >= MIN_INVARIANT_CALLS and runs > 0, campaign.group(0)
    assert reverts == 0, f"the handler itself reverted: {campaign.group(0)}"
    findings = re.findall(r"\[PASS\] test_(\d)_", output)
    assert sorted(set(findings)) == [str(n) for n in range(1, 10)], "a test per finding of issue 52"
    # and the campaign reached every flow whose money it must check
    reached = summary().events
    assert [flow for flow in FLOWS if not any(reached[event] for event in flow)] == [], reached
