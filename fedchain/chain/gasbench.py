"""``fedchain bench gas``: the gas of posting one round, and what FogAuction's batch calls save.

The benchmark starts its own Anvil, deploys the contracts with the recipe,
and for each size builds a task whose clients have all joined, whose jobs
are all awarded (one sealed bid each) and whose fog nodes have all committed
round 1; then the aggregator posts round 1 and the receipt's ``gasUsed`` is
the figure. The round commits rewards in kind (a reward root and a reward
list, as a fedave or fedfaim task posts), the dearer case: a task without
them posts zeros and skips the root's storage slot. Gas per client-round = gas / clients (the transaction's fixed
cost included, so small rounds look dearer).

Batches: for n jobs, two identical one-round tasks of n clients, every job
won by the same fog node. One is driven with a single call per job, the
other with one batch call per step (``commitBids``, ``revealBids``,
``commitUpdates``, ``settleJobs``); the figures are the summed ``gasUsed``
of each step's transactions, 21,000 gas per transaction included.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import click
from eth_abi import encode as abi_encode
from eth_utils import keccak
from web3 import Web3

from fedchain.chain.bindings import TaskParams, TaskState
from fedchain.chain.compile import compile_contracts
from fedchain.chain.node import AnvilNode, AnvilSettings
from fedchain.chain.recipe import deploy_fedchain
from fedchain.console import machine_json
from fedchain.errors import ConfigError

log = logging.getLogger(__name__)

#: Client counts measured by default.
DEFAULT_SIZES: tuple[int, ...] = (10, 50, 100)
#: Jobs per batch measured by default (16 = MAX_BIDS; that bound is per job, so it does not cap a batch).
DEFAULT_BATCH_JOBS: tuple[int, ...] = (1, 5, 10, 16)
#: The issue's target at 100 clients.
TARGET_GAS_PER_CLIENT_ROUND = 25_000
WAD = 10**18

BENCH_ROUNDS = 3
CLIENT_DEPOSIT = 10**15
FOG_DEPOSIT = 10**15
PRICE = 10**12
BIDDING_S = 60
REVEAL_S = 60
#: The (reward root, reward list) the benchmark's round commits: any non-zero pair costs the same.
REWARDS = (keccak(text="rewards-root-1"), keccak(text="reward-list-1"))


#: The steps a batch call replaces, in the order a task goes through them.
COMMIT_BIDS, REVEAL_BIDS, COMMIT_UPDATES, SETTLE_JOBS = "commit bids", "reveal bids", "commit updates", "settle jobs"
BATCHED_STEPS = (COMMIT_BIDS, REVEAL_BIDS, COMMIT_UPDATES, SETTLE_JOBS)
POST_ROUND = "post round"


@dataclass(frozen=True)
class BatchRow:
    """One step for ``jobs`` jobs: the gas of one call per job against one batch call."""

    step: str
    jobs: int
    singles_gas: int
    batch_gas: int
    #: 100 * (singles - batch) / singles.
    saving_percent: float

    @classmethod
    def of(cls, step: str, jobs: int, singles_gas: int, batch_gas: int) -> BatchRow:
        saving = round(100 * (singles_gas - batch_gas) / singles_gas, 1)
        return cls(step, jobs, singles_gas, batch_gas, saving)


@dataclass(frozen=True)
class GasRow:
    """One measurement: posting one round for ``clients`` clients."""

    clients: int
    gas: int
    gas_per_client_round: int


def task_params(max_clients: int, rounds: int = BENCH_ROUNDS) -> TaskParams:
    """The benchmark task: 3 rounds unless told, a budget that never runs short, first price."""
    return TaskParams(
        model_id=keccak(text="lenet5"),
        dataset_id=keccak(text="mnist"),
        rounds=rounds,
        target_accuracy=0,
        expected_duration=3600,
        psi=10**12,
        phi=10**9,
        min_loss_reputation=WAD // 10,
        min_time_reputation=WAD // 10,
        min_quality=WAD // 2,
        max_round_time=1800,
        reputation_cap=10 * WAD,
        client_deposit=CLIENT_DEPOSIT,
        fog_deposit=FOG_DEPOSIT,
        cycles_per_sample=1000,
        round_duration=3600,
        bidding_duration=BIDDING_S,
        reveal_duration=REVEAL_S,
        time_tolerance=5,
        max_clients=max_clients,
        second_price=False,
    )


class _Bench:
    """Drives the deployed contracts from the node's unlocked accounts, waiting only once per batch."""

    def __init__(self, w3: Web3, addresses: Mapping[str, str]) -> None:
        artifacts = compile_contracts()
        self.w3 = w3
        self.accounts = [Web3.to_checksum_address(a) for a in w3.eth.accounts]
        self.c = {name: w3.eth.contract(address=address, abi=list(artifacts[name].abi)) for name, address in addresses.items()}

    def batch(self, calls: Sequence[tuple[Any, str, int]]) -> list[Mapping[str, Any]]:
        """Send (function call, sender, value) transactions back to back, then wait for all receipts."""
        hashes = [call.transact({"from": sender, "value": value}) for call, sender, value in calls]
        receipts = [self.w3.eth.wait_for_transaction_receipt(h, timeout=120, poll_latency=0.01) for h in hashes]
        failed = [i for i, r in enumerate(receipts) if r["status"] != 1]
        if failed:
            raise RuntimeError(f"benchmark set-up transactions {failed} reverted")
        return receipts

    def advance(self, seconds: int) -> None:
        self.w3.provider.make_request("evm_increaseTime", [seconds])
        self.w3.provider.make_request("evm_mine", [])

    def gas(self, calls: Sequence[tuple[Any, str, int]]) -> int:
        """The summed ``gasUsed`` of :meth:`batch`'s transactions."""
        return sum(int(receipt["gasUsed"]) for receipt in self.batch(calls))

    def drive(self, clients: int, *, rounds: int, batched: bool) -> tuple[int, dict[str, int]]:
        """A task of ``clients`` clients from creation to round 1's post, every job won by one fog node.

        Returns the task and the gas of the fog node's steps and of the post, by step. With ``batched``
        the fog node makes each step in one batch call, otherwise in one call per job.
        """
        publisher, aggregator, fog = self.accounts[:3]
        members = self.accounts[3 : 3 + clients]
        jobs = list(range(clients))
        registry, ledger, auction = self.c["TaskRegistry"], self.c["RoundLedger"], self.c["FogAuction"]
        task = registry.functions.taskCount().call() + 1
        budget = 10**18
        self.batch([(registry.functions.createTask(task_params(clients, rounds), aggregator), publisher, budget)])
        salts = [keccak(text=f"salt-{i}") for i in jobs]
        data_size = 600
        commitments = [keccak(abi_encode(["uint256", "bytes32"], [data_size, s])) for s in salts]
        self.batch([(ledger.functions.join(task, commitments[i]), m, CLIENT_DEPOSIT) for i, m in enumerate(members)])
        self.batch([(auction.functions.openAuction(task, data_size, salts[i]), m, 0) for i, m in enumerate(members)])
        frequency, bid_salt = 10**6, keccak(text="bid")
        sealed = keccak(abi_encode(["uint64", "uint96", "bytes32", "address"], [frequency, PRICE, bid_salt, fog]))
        hashes = [keccak(text=f"u{i}") for i in jobs]
        gas: dict[str, int] = {}
        if batched:
            gas[COMMIT_BIDS] = self.gas([(auction.functions.commitBids(task, jobs, [sealed] * clients), fog, FOG_DEPOSIT * clients)])
        else:
            gas[COMMIT_BIDS] = self.gas([(auction.functions.commitBid(task, i, sealed), fog, FOG_DEPOSIT) for i in jobs])
        self.advance(BIDDING_S + 1)
        if batched:
            reveal = auction.functions.revealBids(task, jobs, [frequency] * clients, [PRICE] * clients, [bid_salt] * clients)
            gas[REVEAL_BIDS] = self.gas([(reveal, fog, 0)])
        else:
            gas[REVEAL_BIDS] = self.gas([(auction.functions.revealBid(task, i, frequency, PRICE, bid_salt), fog, 0) for i in jobs])
        self.advance(REVEAL_S + 1)
        self.batch([(auction.functions.closeAuction(task, i), m, PRICE * rounds) for i, m in enumerate(members)])
        self.batch([(registry.functions.startTask(task), publisher, 0)])
        if batched:
            gas[COMMIT_UPDATES] = self.gas([(auction.functions.commitUpdates(task, 1, jobs, hashes), fog, 0)])
        else:
            gas[COMMIT_UPDATES] = self.gas([(auction.functions.commitUpdate(task, i, 1, hashes[i]), fog, 0) for i in jobs])
        start = TaskState(*registry.functions.state(task).call()).round_started_at
        commits = auction.functions.commitTimes(task, 1, clients).call()
        measurements = [(WAD * (80 + i % 40) // 100, t - start, True) for i, t in enumerate(commits)]
        gas[POST_ROUND] = self.gas([(ledger.functions.postRound(task, 1, keccak(text="model-1"), WAD // 2, *REWARDS, measurements), aggregator, 0)])
        return task, gas

    def post_round_gas(self, clients: int) -> int:
        """Set up a task with ``clients`` staffed clients, commit round 1 and return the gas of posting it."""
        return self.drive(clients, rounds=BENCH_ROUNDS, batched=False)[1][POST_ROUND]

    def batch_rows(self, jobs: int) -> list[BatchRow]:
        """Two identical one-round tasks of ``jobs`` jobs, one driven by single calls, one by batches; a row per step."""
        steps: list[dict[str, int]] = []
        for batched in (False, True):
            task, gas = self.drive(jobs, rounds=1, batched=batched)  # the post finishes a one-round task
            settle = self.c["FogAuction"].functions
            stranger = self.accounts[-1]
            if batched:
                gas[SETTLE_JOBS] = self.gas([(settle.settleJobs(task, list(range(jobs))), stranger, 0)])
            else:
                gas[SETTLE_JOBS] = self.gas([(settle.settleJob(task, i), stranger, 0) for i in range(jobs)])
            steps.append(gas)
        singles, batches = steps
        return [BatchRow.of(step, jobs, singles[step], batches[step]) for step in BATCHED_STEPS]


def measure(sizes: Sequence[int] = DEFAULT_SIZES, batch_jobs: Sequence[int] = ()) -> tuple[list[GasRow], list[BatchRow]]:
    """Start Anvil and deploy; the gas of one round's post for each client count in ``sizes``, and the
    batch calls against single calls for each job count in ``batch_jobs``."""
    if not sizes or min(sizes) < 1 or (batch_jobs and min(batch_jobs) < 1):
        raise ConfigError(f"client and job counts must be positive, got {list(sizes)} and {list(batch_jobs)}")
    settings = AnvilSettings(accounts=max([*sizes, *batch_jobs]) + 4, gas_limit=60_000_000)
    with AnvilNode(settings) as node:
        w3 = node.web3()
        addresses = deploy_fedchain(w3, w3.eth.accounts[0])
        bench = _Bench(w3, addresses)
        rows = []
        for clients in sizes:
            gas = bench.post_round_gas(clients)
            rows.append(GasRow(clients, gas, gas // clients))
            log.info("posting a round for %d clients: %d gas", clients, gas)
        batches = [row for jobs in batch_jobs for row in bench.batch_rows(jobs)]
        return rows, batches


@click.command(name="gas")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.option(
    "--clients", "sizes", multiple=True, type=click.IntRange(1, 500), default=DEFAULT_SIZES, show_default=True,
    help="Client counts to measure (repeat the option).",
)
@click.option(
    "--batch-jobs", "batch_jobs", multiple=True, type=click.IntRange(0, 200), default=DEFAULT_BATCH_JOBS, show_default=True,
    help="Job counts of the batch calls to measure against single calls (repeat the option; 0 measures none).",
)
def gas(as_json: bool, sizes: tuple[int, ...], batch_jobs: tuple[int, ...]) -> None:
    """Gas of posting one round for 10, 50 and 100 clients, and what FogAuction's batch calls save."""
    rows, batches = measure(sizes, [n for n in batch_jobs if n > 0])
    if as_json:
        click.echo(machine_json({
            "target_gas_per_client_round": TARGET_GAS_PER_CLIENT_ROUND,
            "rows": [asdict(r) for r in rows],
            "batches": [asdict(b) for b in batches],
        }))
        return
    click.echo(f"{'clients':>8} {'gas of the post':>16} {'gas per client-round':>21}")
    for row in rows:
        click.echo(f"{row.clients:>8} {row.gas:>16,} {row.gas_per_client_round:>21,}")
    click.echo(f"target: at most {TARGET_GAS_PER_CLIENT_ROUND:,} gas per client-round at 100 clients")
    if batches:
        click.echo()
        click.echo(f"{'step':<15} {'jobs':>5} {'n single calls':>15} {'one batch':>12} {'saving':>7}")
        for b in batches:
            click.echo(f"{b.step:<15} {b.jobs:>5} {b.singles_gas:>15,} {b.batch_gas:>12,} {b.saving_percent:>6.1f}%")
