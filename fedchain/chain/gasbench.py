"""``fedchain bench gas``: the gas of posting and finalising one round, of the disputes, and what FogAuction's
batch calls save.

The benchmark starts its own Anvil, deploys the contracts with the recipe
(a committee of three, quorum two), and for each size builds a task whose
clients have all joined, whose jobs are all awarded (one sealed bid each) and
whose fog nodes have all committed round 1; then the aggregator posts round 1
(the receipt's ``gasUsed`` is the post's figure), the challenge window passes
and anyone finalises it (the finalisation's figure: reputations, payments,
removals). The round commits rewards in kind (a reward root and a reward
list, as a fedave or fedfaim task posts), the dearer case: a task without
them posts zeros and skips the root's storage slot. Gas per client-round =
gas / clients (the transaction's fixed cost included, so small rounds look
dearer).

Disputes, on the smallest size: opening an entry challenge, a verdict that
upholds it (two signatures checked, the bond slashed), the same for a fog
challenge (the fog node slashed and its job handed to a standby bid), an
expiry, and the finalisation of a round whose entries were challenged.

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
from eth_account.signers.local import LocalAccount
from eth_utils import keccak
from web3 import Web3

from fedchain.chain.bindings import TaskParams, TaskState
from fedchain.chain.compile import compile_contracts
from fedchain.chain.node import AnvilNode, AnvilSettings
from fedchain.chain.recipe import ArbiterSettings, deploy_fedchain
from fedchain.console import machine_json
from fedchain.errors import ConfigError

log = logging.getLogger(__name__)

#: Client counts measured by default.
DEFAULT_SIZES: tuple[int, ...] = (10, 50, 100)
#: Jobs per batch measured by default (16 = MAX_RANKED; that bound is per job, so it does not cap a batch).
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
FINALIZE_ROUND = "finalize round"
#: The benchmark's challenge window and the committee's verdict window, seconds.
CHALLENGE_WINDOW_S = 60
VERDICT_WINDOW_S = 600
CHALLENGE_BOND = CLIENT_DEPOSIT // 2  # the least a task may ask: half a client deposit


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
    """One measurement: posting one round for ``clients`` clients, then finalising it."""

    clients: int
    #: The post's gas (and per client): the target is on this one, the aggregator's transaction.
    gas: int
    gas_per_client_round: int
    #: The finalisation's gas (anyone sends it, after the challenge window).
    finalize_gas: int
    finalize_gas_per_client_round: int


@dataclass(frozen=True)
class DisputeGas:
    """The gas of each dispute step, measured on a task of ``clients`` clients."""

    clients: int
    open_challenge: int
    verdict_entry_upheld: int
    verdict_fog_upheld: int
    expire: int
    #: Finalising the round whose entries were challenged (a correction and a void applied).
    finalize_challenged_round: int


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
        challenge_window=CHALLENGE_WINDOW_S,
        challenge_bond=CHALLENGE_BOND,
        aggregator_bond=BENCH_BOND,
        self_trained=False,
    )


#: The bond every benchmark task asks for: above the floor for up to 500 clients with the bench's terms.
BENCH_BOND = 500 * CLIENT_DEPOSIT + 10**18


class _Bench:
    """Drives the deployed contracts from the node's unlocked accounts, waiting only once per batch."""

    def __init__(self, w3: Web3, addresses: Mapping[str, str], arbiters: Sequence[LocalAccount] = ()) -> None:
        artifacts = compile_contracts()
        self.w3 = w3
        self.arbiters = list(arbiters)
        self.accounts = [Web3.to_checksum_address(a) for a in w3.eth.accounts]
        self.c = {
            name: w3.eth.contract(address=address, abi=list(artifacts[name].abi)) for name, address in addresses.items()
        }

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

    def drive(self, clients: int, *, rounds: int, batched: bool, standby: bool = False) -> tuple[int, dict[str, int]]:
        """A task of ``clients`` clients from creation to round 1's post, every job won by one fog node.

        Returns the task and the gas of the fog node's steps and of the post, by step. With ``batched``
        the fog node makes each step in one batch call, otherwise in one call per job. With ``standby`` a
        second fog node bids dearer for job 0 and stays on standby.
        """
        publisher, aggregator, fog = self.accounts[:3]
        members = self.accounts[3 : 3 + clients]
        jobs = list(range(clients))
        registry, ledger, auction = self.c["TaskRegistry"], self.c["RoundLedger"], self.c["FogAuction"]
        task = registry.functions.taskCount().call() + 1
        budget = 10**18
        self.batch([(registry.functions.createTask(task_params(clients, rounds), aggregator), publisher, budget)])
        self.batch([(self.c["Disputes"].functions.postBond(task), aggregator, BENCH_BOND)])
        salts = [keccak(text=f"salt-{i}") for i in jobs]
        data_size = 600
        commitments = [keccak(abi_encode(["uint256", "bytes32"], [data_size, s])) for s in salts]
        self.batch([(ledger.functions.join(task, commitments[i]), m, CLIENT_DEPOSIT) for i, m in enumerate(members)])
        self.batch([(auction.functions.openAuction(task, data_size, salts[i]), m, 0) for i, m in enumerate(members)])
        frequency, bid_salt = 10**6, keccak(text="bid")
        sealed = keccak(abi_encode(["uint64", "uint96", "bytes32", "address"], [frequency, PRICE, bid_salt, fog]))
        hashes = [keccak(text=f"u{i}") for i in jobs]
        roots = [keccak(text=f"t{i}") for i in jobs]  # each update's transcript root
        gas: dict[str, int] = {}
        if batched:
            gas[COMMIT_BIDS] = self.gas(
                [(auction.functions.commitBids(task, jobs, [sealed] * clients), fog, FOG_DEPOSIT * clients)]
            )
        else:
            gas[COMMIT_BIDS] = self.gas(
                [(auction.functions.commitBid(task, i, sealed), fog, FOG_DEPOSIT) for i in jobs]
            )
        rival = self.accounts[-2]
        rival_sealed = keccak(
            abi_encode(["uint64", "uint96", "bytes32", "address"], [frequency, PRICE, bid_salt, rival])
        )
        if standby:
            self.batch([(auction.functions.commitBid(task, 0, rival_sealed), rival, FOG_DEPOSIT)])
        self.advance(BIDDING_S + 1)
        if batched:
            reveal = auction.functions.revealBids(
                task, jobs, [frequency] * clients, [PRICE] * clients, [bid_salt] * clients
            )
            gas[REVEAL_BIDS] = self.gas([(reveal, fog, 0)])
        else:
            gas[REVEAL_BIDS] = self.gas(
                [(auction.functions.revealBid(task, i, frequency, PRICE, bid_salt), fog, 0) for i in jobs]
            )
        if standby:  # the same bid, later: ties go to the earliest, so the rival waits on standby
            self.batch([(auction.functions.revealBid(task, 0, frequency, PRICE, bid_salt), rival, 0)])
        self.advance(REVEAL_S + 1)
        self.batch([(auction.functions.closeAuction(task, i), m, PRICE * rounds) for i, m in enumerate(members)])
        self.batch([(registry.functions.startTask(task), publisher, 0)])
        if batched:
            gas[COMMIT_UPDATES] = self.gas([(auction.functions.commitUpdates(task, 1, jobs, hashes, roots), fog, 0)])
        else:
            gas[COMMIT_UPDATES] = self.gas(
                [(auction.functions.commitUpdate(task, i, 1, hashes[i], roots[i]), fog, 0) for i in jobs]
            )
        start = TaskState(*registry.functions.state(task).call()).round_started_at
        commits = auction.functions.commitTimes(task, 1, clients).call()
        self.measurements = [(WAD * (80 + i % 40) // 100, t - start, True, True) for i, t in enumerate(commits)]
        post = ledger.functions.postRound(task, 1, keccak(text="model-1"), WAD // 2, *REWARDS, self.measurements)
        gas[POST_ROUND] = self.gas([(post, aggregator, 0)])
        return task, gas

    def finalize(self, task: int) -> int:
        """Let round 1's challenge window pass and finalise it; its gas."""
        self.advance(CHALLENGE_WINDOW_S + 1)
        return self.gas(
            [(self.c["RoundLedger"].functions.finalizeRound(task, 1, self.measurements), self.accounts[-1], 0)]
        )

    def round_gas(self, clients: int) -> GasRow:
        """Set up a task with ``clients`` staffed clients, commit round 1; the gas of posting and of finalising it."""
        task, gas = self.drive(clients, rounds=BENCH_ROUNDS, batched=False)
        post, final = gas[POST_ROUND], self.finalize(task)
        return GasRow(clients, post, post // clients, final, final // clients)

    def signatures(self, challenge: int, upheld: bool) -> list[bytes]:
        """Every arbiter's EIP-712 signature of the verdict, ordered by signer (the contract wants them so)."""
        disputes, committee = self.c["Disputes"], self.c["ArbiterCommittee"]
        record = disputes.functions.challenge(challenge).call()
        task, round_, index = record[0], record[3], record[8]
        digest = committee.functions.verdictDigest(challenge, task, round_, index, upheld).call()
        signed = sorted((a.address.lower(), bytes(a.unsafe_sign_hash(digest).signature)) for a in self.arbiters)
        return [signature for _, signature in signed]

    def dispute_gas(self, clients: int) -> DisputeGas:
        """On a task of ``clients`` (at least 3) clients: open three challenges of round 1, resolve two, expire one,
        then finalise the round."""
        task, _ = self.drive(clients, rounds=BENCH_ROUNDS, batched=False, standby=True)
        disputes = self.c["Disputes"].functions
        members = self.accounts[3 : 3 + clients]
        fog, stranger = self.accounts[2], self.accounts[-1]
        proposed = (WAD, self.measurements[1][1], True, True)
        opened = self.gas([(disputes.openEntryChallenge(task, 1, 1, proposed), stranger, CHALLENGE_BOND)])
        self.batch(
            [
                (disputes.openFogChallenge(task, 1, 0, fog, 0), members[0], CHALLENGE_BOND),
                (disputes.openEntryChallenge(task, 1, 2, proposed), stranger, CHALLENGE_BOND),
            ]
        )
        first = disputes.challengeCount().call() - 2
        entry = self.gas([(disputes.resolve(first, True, self.signatures(first, True)), stranger, 0)])
        fog_verdict = self.gas([(disputes.resolve(first + 1, True, self.signatures(first + 1, True)), stranger, 0)])
        self.advance(VERDICT_WINDOW_S + 1)
        expired = self.gas([(disputes.expire(first + 2), stranger, 0)])
        final = self.gas([(self.c["RoundLedger"].functions.finalizeRound(task, 1, self.measurements), stranger, 0)])
        return DisputeGas(clients, opened, entry, fog_verdict, expired, final)

    def batch_rows(self, jobs: int) -> list[BatchRow]:
        """Two identical one-round tasks of ``jobs`` jobs, one driven by single calls, one by batches; a row per step."""
        steps: list[dict[str, int]] = []
        for batched in (False, True):
            task, gas = self.drive(jobs, rounds=1, batched=batched)  # the post finishes a one-round task
            self.finalize(task)  # jobs are settled once every posted round is final
            settle = self.c["FogAuction"].functions
            stranger = self.accounts[-1]
            if batched:
                gas[SETTLE_JOBS] = self.gas([(settle.settleJobs(task, list(range(jobs))), stranger, 0)])
            else:
                gas[SETTLE_JOBS] = self.gas([(settle.settleJob(task, i), stranger, 0) for i in range(jobs)])
            steps.append(gas)
        singles, batches = steps
        return [BatchRow.of(step, jobs, singles[step], batches[step]) for step in BATCHED_STEPS]


#: Clients of the task on which the disputes are measured (three challenges of three entries).
DISPUTE_CLIENTS = 3


def measure(
    sizes: Sequence[int] = DEFAULT_SIZES, batch_jobs: Sequence[int] = ()
) -> tuple[list[GasRow], list[BatchRow], DisputeGas]:
    """Start Anvil and deploy; the gas of one round's post and finalisation for each client count in ``sizes``,
    the batch calls against single calls for each job count in ``batch_jobs``, and the dispute steps."""
    if not sizes or min(sizes) < 1 or (batch_jobs and min(batch_jobs) < 1):
        raise ConfigError(f"client and job counts must be positive, got {list(sizes)} and {list(batch_jobs)}")
    settings = AnvilSettings(accounts=max([*sizes, *batch_jobs, DISPUTE_CLIENTS]) + 10, gas_limit=60_000_000)
    with AnvilNode(settings) as node:
        w3 = node.web3()
        arbiters = [node.dev_account(settings.accounts - 1 - i) for i in (1, 2, 3)]
        committee = ArbiterSettings.of([a.address for a in arbiters], quorum=2, verdict_window=VERDICT_WINDOW_S)
        addresses = deploy_fedchain(w3, w3.eth.accounts[0], arbiters=committee)
        bench = _Bench(w3, addresses, arbiters[:2])
        rows = []
        for clients in sizes:
            row = bench.round_gas(clients)
            rows.append(row)
            log.info("a round for %d clients: post %d gas, finalisation %d gas", clients, row.gas, row.finalize_gas)
        disputes = bench.dispute_gas(DISPUTE_CLIENTS)
        batches = [row for jobs in batch_jobs for row in bench.batch_rows(jobs)]
        return rows, batches, disputes


@click.command(name="gas")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.option(
    "--clients",
    "sizes",
    multiple=True,
    type=click.IntRange(1, 500),
    default=DEFAULT_SIZES,
    show_default=True,
    help="Client counts to measure (repeat the option).",
)
@click.option(
    "--batch-jobs",
    "batch_jobs",
    multiple=True,
    type=click.IntRange(0, 200),
    default=DEFAULT_BATCH_JOBS,
    show_default=True,
    help="Job counts of the batch calls to measure against single calls (repeat the option; 0 measures none).",
)
def gas(as_json: bool, sizes: tuple[int, ...], batch_jobs: tuple[int, ...]) -> None:
    """Gas of posting and finalising one round for 10, 50 and 100 clients, of each dispute step, and what
    FogAuction's batch calls save."""
    rows, batches, disputes = measure(sizes, [n for n in batch_jobs if n > 0])
    if as_json:
        click.echo(
            machine_json(
                {
                    "target_gas_per_client_round": TARGET_GAS_PER_CLIENT_ROUND,
                    "rows": [asdict(r) for r in rows],
                    "disputes": asdict(disputes),
                    "batches": [asdict(b) for b in batches],
                }
            )
        )
        return
    click.echo(f"{'clients':>8} {'post':>12} {'per client':>11} {'finalisation':>13} {'per client':>11}")
    for row in rows:
        click.echo(
            f"{row.clients:>8} {row.gas:>12,} {row.gas_per_client_round:>11,} {row.finalize_gas:>13,} "
            f"{row.finalize_gas_per_client_round:>11,}"
        )
    click.echo(f"target: at most {TARGET_GAS_PER_CLIENT_ROUND:,} gas per client-round of the post at 100 clients")
    click.echo()
    click.echo(f"disputes on a task of {disputes.clients} clients (gas):")
    for label, value in (
        ("open a challenge", disputes.open_challenge),
        ("verdict upholding an entry challenge", disputes.verdict_entry_upheld),
        ("verdict upholding a fog challenge", disputes.verdict_fog_upheld),
        ("expire a challenge", disputes.expire),
        ("finalise a challenged round", disputes.finalize_challenged_round),
    ):
        click.echo(f"  {label:<38} {value:>10,}")
    if batches:
        click.echo()
        click.echo(f"{'step':<15} {'jobs':>5} {'n single calls':>15} {'one batch':>12} {'saving':>7}")
        for b in batches:
            click.echo(f"{b.step:<15} {b.jobs:>5} {b.singles_gas:>15,} {b.batch_gas:>12,} {b.saving_percent:>6.1f}%")
