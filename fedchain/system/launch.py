"""The run folder and the command lines of the participants' processes.

A run folder holds everything one run writes::

    RUN/deployment.json        the deployment every process reads (--deployment)
    RUN/store/                 the blob store (--store): spec, models, updates, job data; or a URL of its own
                               (s3://bucket/prefix)
    RUN/state/NAME.json        each agent's state file (--state)
    RUN/logs/NAME.log          each process's output

Each participant is the project's own command (``python -m fedchain.cli fog
run``, ``client run``, ``aggregator run``, ``verifier run``) with its key in
``FEDCHAIN_PRIVATE_KEY``, never on the command line.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fedchain.chain.keys import PRIVATE_KEY_ENV
from fedchain.system.roster import ClientPlan, FogPlan
from fedchain.system.supervisor import ProcessSpec

#: Torch threads per participant: several processes share the CPU, so each keeps to one.
THREADS_PER_PROCESS = 1
#: Niceness added to the watchers (clients, arbiters): their re-scoring of a posted round can wait within the
#: challenge window, while the fog nodes and the aggregator race the round's deadline on the same cores.
WATCHER_NICENESS = 10


@dataclass(frozen=True)
class RunFolder:
    """Where one run keeps its deployment, blob store, states and logs; ``store``: the blob store's URL when it is
    not the folder's own ``store/`` (an S3 bucket, say)."""

    root: Path
    store: str | None = None

    @property
    def deployment_file(self) -> Path:
        return self.root / "deployment.json"

    @property
    def store_url(self) -> str:
        return self.store if self.store is not None else str(self.root / "store")

    def state(self, name: str) -> Path:
        """The state file of agent ``name``."""
        return self.root / "state" / f"{name}.json"

    def log(self, name: str) -> Path:
        """The log file of process ``name``."""
        return self.root / "logs" / f"{name}.log"


@dataclass(frozen=True)
class AgentOptions:
    """What every participant's command shares besides its task.

    Attributes:
        data_root: the dataset folder passed to every process that reads data (None: their environment's).
        poll_interval_s: seconds between an agent's polls of the chain.
        seed: seed of the clients' split and label noise.
        token_rates: the fog nodes' rates of the ERC-20 tokens they bid in (``fog run --token-rate``).
    """

    data_root: Path | None = None
    poll_interval_s: float = 0.2
    seed: int = 0
    token_rates: Mapping[str, int] = field(default_factory=dict)


def _python(*args: str) -> tuple[str, ...]:
    """``fedchain -v ...``: every agent logs its work (round, job, transaction) at INFO."""
    return (sys.executable, "-m", "fedchain.cli", "-v", *args)


def _session_args(run: RunFolder, name: str) -> tuple[str, ...]:
    return ("--deployment", str(run.deployment_file), "--store", run.store_url, "--state", str(run.state(name)))


def _env(key: bytes) -> dict[str, str]:
    threads = str(THREADS_PER_PROCESS)
    return {
        PRIVATE_KEY_ENV: "0x" + bytes(key).hex(),
        "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
        "PYTHONUNBUFFERED": "1",
    }


def fog_process(plan: FogPlan, run: RunFolder, key: bytes, task_id: int, options: AgentOptions) -> ProcessSpec:
    """``fedchain fog run`` for ``plan``, watching only ``task_id``, training with its engine on one thread."""
    cost = plan.cost
    args = [
        "fog",
        "run",
        "--name",
        plan.name,
        "--task",
        str(task_id),
        "--frequency",
        str(cost.frequency),
        "--alpha",
        repr(cost.alpha),
        "--margin",
        repr(cost.margin),
        "--engine",
        plan.engine,
        "--threads",
        str(THREADS_PER_PROCESS),
        "--poll-interval",
        str(options.poll_interval_s),
        *_session_args(run, plan.name),
    ]
    if plan.lazy is not None:
        args += ["--lazy", plan.lazy]
    if plan.never_reveal:
        args.append("--never-reveal")
    if plan.crash_after_round is not None:
        args += ["--crash-after-round", str(plan.crash_after_round)]
    for token, rate in options.token_rates.items():
        args += ["--token-rate", f"{token}={rate}"]
    if options.data_root is not None:
        args += ["--data-root", str(options.data_root)]
    return ProcessSpec(
        plan.name,
        _python(*args),
        _env(key),
        run.log(plan.name),
        crashes_on_purpose=plan.crash_after_round is not None,
    )


def client_process(
    plan: ClientPlan, partitions: int, run: RunFolder, key: bytes, task_id: int, options: AgentOptions
) -> ProcessSpec:
    """``fedchain client run`` of ``task_id`` for ``plan``: part ``plan.partition_index`` of ``partitions`` of an IID split."""
    args = [
        "client",
        "run",
        "--task",
        str(task_id),
        "--name",
        plan.name,
        "--partition-index",
        str(plan.partition_index),
        "--partitions",
        str(partitions),
        "--partition-seed",
        str(options.seed),
        "--max-samples",
        str(plan.samples),
        "--noisy-labels",
        repr(plan.noisy_labels),
        "--seed",
        str(options.seed + plan.partition_index),
        "--poll-interval",
        str(options.poll_interval_s),
        "--watch",
        plan.watch,
        *_session_args(run, plan.name),
    ]
    if plan.flip_labels:
        args.append("--flip-labels")
    if options.data_root is not None:
        args += ["--data-root", str(options.data_root)]
    return ProcessSpec(
        plan.name, _python(*args), _env(key), run.log(plan.name), exits_when_done=True, niceness=WATCHER_NICENESS
    )


def aggregator_process(
    run: RunFolder,
    key: bytes,
    task_id: int,
    options: AgentOptions,
    *,
    strategy: str | None = None,
    name: str = "aggregator",
    zero_client: tuple[str, int] | None = None,
    crash_after_round: int | None = None,
) -> ProcessSpec:
    """``fedchain aggregator run`` for ``task_id`` (``strategy`` None: the task spec's); ``zero_client``
    (client address, round) makes it a dishonest aggregator that posts quality 0 for that client in that round;
    ``crash_after_round`` makes it die by SIGKILL right after posting that round (it goes silent)."""
    args = [
        "aggregator",
        "run",
        "--task",
        str(task_id),
        "--poll-interval",
        str(options.poll_interval_s),
        *_session_args(run, name),
    ]
    if zero_client is not None:
        args += ["--zero-client", f"{zero_client[0]}@{zero_client[1]}"]
    if crash_after_round is not None:
        args += ["--crash-after-round", str(crash_after_round)]
    if strategy is not None:
        args += ["--strategy", strategy]
    if options.data_root is not None:
        args += ["--data-root", str(options.data_root)]
    return ProcessSpec(
        name,
        _python(*args),
        _env(key),
        run.log(name),
        exits_when_done=True,
        crashes_on_purpose=crash_after_round is not None,
    )


def verifier_process(name: str, run: RunFolder, key: bytes, options: AgentOptions) -> ProcessSpec:
    """``fedchain verifier run``: a member of the deployment's arbiter committee (it runs until stopped)."""
    args = [
        "verifier",
        "run",
        "--name",
        name,
        "--poll-interval",
        str(options.poll_interval_s),
        *_session_args(run, name),
    ]
    if options.data_root is not None:
        args += ["--data-root", str(options.data_root)]
    return ProcessSpec(name, _python(*args), _env(key), run.log(name), niceness=WATCHER_NICENESS)
