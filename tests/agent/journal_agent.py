"""A minimal real agent for the restart tests: it journals every block and event log it handles.

Run as ``python journal_agent.py --rpc-url URL --state FILE --journal FILE``. Each
handled block appends one JSON line ``{"block": n, "topics": [...]}`` to the
journal, so a test can check that every block was handled exactly once across
restarts. ``--step-delay`` slows every step down, so that a signal lands while
the agent is busy.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from web3 import Web3

from fedchain.agent import Agent, AgentSettings, AgentState, BlockRange


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rpc-url", required=True)
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--journal", type=Path, required=True)
    parser.add_argument("--step-delay", type=float, default=0.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)

    w3 = Web3(Web3.HTTPProvider(args.rpc_url))

    def handle(blocks: BlockRange, state: AgentState) -> None:
        logs = w3.eth.get_logs({"fromBlock": blocks.first, "toBlock": blocks.last})
        with args.journal.open("a") as journal:
            for number in blocks:
                topics = [entry["topics"][0].to_0x_hex() for entry in logs if entry["blockNumber"] == number]
                journal.write(json.dumps({"block": number, "topics": topics}) + "\n")
        state.data["events"] = state.data.get("events", 0) + len(logs)
        time.sleep(args.step_delay)

    settings = AgentSettings(name="journal", state_path=args.state, poll_interval_s=0.05, max_blocks_per_step=1)
    Agent(settings, head=lambda: w3.eth.block_number, handle=handle).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
