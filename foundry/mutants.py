"""Plant bugs of the money flows one at a time and check that the Foundry suite catches each: ``make mutation``.

Each mutant is one textual change of one contract (it must match exactly once). The contracts are copied into a
scratch project beside the real one (the real tree is never touched), the change is made there, and ``forge
test`` runs the findings, verdict and invariant suites on it with a shorter campaign. A mutant is *caught* when
the suite fails. The table says which test or invariant failed first; the exit status is the number of
mutants that survived.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    name: str
    contract: str
    old: str
    new: str


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "a removed client's deposit to the publisher",
        "RoundLedger.sol",
        "_treasury.creditSink(taskId, forfeited, Reasons.DEPOSIT_FORFEIT);",
        "_treasury.credit(taskId, _registry.state(taskId).publisher, forfeited, Reasons.DEPOSIT_FORFEIT);",
    ),
    Mutant(
        "a cancelled budget refunded twice",
        "TaskRegistry.sol",
        "        s.status = TaskStatus.Cancelled;\n        s.budgetLeft = 0;",
        "        s.status = TaskStatus.Cancelled;",
    ),
    Mutant(
        "a verdict of one signature",
        "ArbiterCommittee.sol",
        "if (n < _quorum) revert CommitteeNoQuorum(n, _quorum);",
        "if (n < 1) revert CommitteeNoQuorum(n, _quorum);",
    ),
    Mutant(
        "a reward paid without taking it from the bond",
        "Disputes.sol",
        "                b.amount -= uint96(taken);",
        "                b.amount -= 0;",
    ),
    Mutant(
        "the whole entry slash to the challenger",
        "Disputes.sol",
        "uint256 reward = taken / 2;",
        "uint256 reward = taken;",
    ),
    Mutant(
        "a rejected challenge's bond all to the accused",
        "Disputes.sol",
        "uint256 accusedShare = c.bond / 2;",
        "uint256 accusedShare = c.bond;",
    ),
    Mutant(
        "a missed round's fog deposit to the publisher",
        "FogAuction.sol",
        "_treasury.credit(taskId, client_, p.fogDeposit, Reasons.BID_FORFEIT);",
        "_treasury.credit(taskId, _registry.state(taskId).publisher, p.fogDeposit, Reasons.BID_FORFEIT);",
    ),
    Mutant(
        "the last challenge opened wins",
        "Disputes.sol",
        "if (earliest == 0 || challengeId < earliest) {",
        "if (earliest == 0 || challengeId > earliest) {",
    ),
)


def forge_binary() -> Path:
    """The native forge of the npm package (its ``.bin/forge`` launcher does not pass forge's exit status on)."""
    found = sorted(REPO.glob("node_modules/@foundry-rs/forge-*/bin/forge"))
    if not found:
        raise SystemExit("forge is missing: run `make setup` (npm install brings @foundry-rs/forge)")
    return found[0]


def scratch_project(into: Path) -> None:
    """A copy of the contracts and the Foundry suite that forge can build, sharing node_modules and the bridge."""
    shutil.copytree(REPO / "contracts", into / "contracts")
    shutil.copytree(REPO / "foundry", into / "foundry", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "foundry.toml", into / "foundry.toml")
    (into / "node_modules").symlink_to(REPO / "node_modules")
    (into / "fedchain" / "chain").mkdir(parents=True)
    (into / "fedchain" / "chain" / "solc_bridge.js").symlink_to(REPO / "fedchain" / "chain" / "solc_bridge.js")


def first_failure(output: str) -> str:
    match = re.search(r"\[FAIL[^\]]*\] (\w+)\(", output)
    return match.group(1) if match else "(build failed)" if "Compiler run failed" in output else "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60, help="invariant runs per mutant (depth from foundry.toml)")
    args = parser.parse_args()
    forge = forge_binary()
    survived = 0
    print(f"{'mutant':50s} {'caught':7s} {'by':55s} {'s':>5s}")
    for mutant in MUTANTS:
        with tempfile.TemporaryDirectory(prefix="fedchain-mutant-") as tmp:
            root = Path(tmp)
            scratch_project(root)
            path = root / "contracts" / mutant.contract
            text = path.read_text()
            if text.count(mutant.old) != 1:
                raise SystemExit(
                    f"mutant {mutant.name!r}: its text occurs {text.count(mutant.old)} times in {mutant.contract}"
                )
            path.write_text(text.replace(mutant.old, mutant.new))
            started = time.monotonic()
            done = subprocess.run(
                [str(forge), "test", "--threads", "1", "--no-match-contract", "GasScenario", "--fail-fast"],
                cwd=root,
                env={**os.environ, "FOUNDRY_INVARIANT_RUNS": str(args.runs), "NO_COLOR": "1"},
                capture_output=True,
                text=True,
            )
            elapsed = time.monotonic() - started
            caught = done.returncode != 0
            survived += not caught
            by = first_failure(done.stdout + done.stderr) if caught else "-"
            print(f"{mutant.name:50s} {'yes' if caught else 'NO':7s} {by:55s} {elapsed:5.0f}", flush=True)
    print(f"{len(MUTANTS) - survived} of {len(MUTANTS)} mutants caught")
    return survived


if __name__ == "__main__":
    sys.exit(main())
