"""What an invariant campaign did: the actions the handler tried and the contracts accepted, the flows it reached.

``forge test --match-contract InvariantsTest`` appends one line per run to ``build/foundry/campaign.tsv``
(``InvariantsTest.afterInvariant``); this sums them up. ``python foundry/campaign.py`` prints the table;
the test of the suite (``tests/contracts/test_foundry.py``) reads :func:`summary` to check that the bounded
campaign reached every flow it must (removals, slashes, abandonments, ...).
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

CAMPAIGN = Path(__file__).resolve().parents[1] / "build" / "foundry" / "campaign.tsv"


@dataclass(frozen=True)
class Campaign:
    runs: int
    #: Calls the handler made of each action, and how many the contracts accepted.
    calls: Counter[str]
    accepted: Counter[str]
    #: How often each event of a flow was emitted, by its signature.
    events: Counter[str]


def summary(path: Path = CAMPAIGN) -> Campaign:
    calls: Counter[str] = Counter()
    accepted: Counter[str] = Counter()
    events: Counter[str] = Counter()
    runs = 0
    for line in path.read_text().splitlines():
        fields = line.split("\t")
        if not fields or fields[0] != "run":
            continue
        runs += 1
        for field in fields[1:]:
            name, value = field.rsplit("=", 1)
            if name.startswith("event:"):
                events[name.removeprefix("event:")] += int(value)
            else:
                ok, tried = value.split("/")
                accepted[name] += int(ok)
                calls[name] += int(tried)
    return Campaign(runs, calls, accepted, events)


def main() -> int:
    campaign = summary(Path(sys.argv[1]) if len(sys.argv) > 1 else CAMPAIGN)
    print(
        f"{campaign.runs} runs; contract calls {sum(campaign.calls.values())}, accepted {sum(campaign.accepted.values())}"
    )
    print(f"{'action':20s} {'accepted':>9s} {'tried':>7s}")
    for name in sorted(campaign.calls):
        print(f"{name:20s} {campaign.accepted[name]:9d} {campaign.calls[name]:7d}")
    print(f"\n{'event':70s} {'emitted':>8s}")
    for name, count in sorted(campaign.events.items()):
        print(f"{name:70s} {count:8d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
