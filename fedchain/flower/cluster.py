"""Flower's deployment engine on loopback: one SuperLink and N SuperNodes as real processes.

:class:`FlowerCluster` starts ``flower-superlink`` and one ``flower-supernode`` per
:class:`NodeSpec` (insecure mode, every API on a free ``127.0.0.1`` port), waits until
every SuperNode is registered and online, runs a Flower app directory on it with
``flwr run`` and waits for the run to finish. Leaving the ``with`` block stops every
process it started, including the ones Flower spawns itself, even when the caller raised.

>>> with FlowerCluster(work_dir, partition_nodes(3)) as cluster:       # doctest: +SKIP
...     result = cluster.run("examples/flower", {"fedchain": False})
...     assert result.succeeded, result.log

What Flower 1.42 does, and what this module relies on:

* Ports. The SuperLink serves its Fleet, Control and Runtime (ServerAppIo) APIs over
  HTTP on one port (``--host``/``--port``); each SuperNode serves its Runtime
  (ClientAppIo) API on one port of its own. The gRPC health servers are optional and
  left off. So a cluster takes 1 + N ports, each picked free on ``127.0.0.1``; a port
  taken by someone else between the pick and the bind is retried with a new one.
* Processes. Each SuperLink and SuperNode starts a ``flower-superexec`` (by name, from
  ``PATH``), which starts a ``flwr-serverapp`` per run or a ``flwr-clientapp`` per message
  (also by name). ``PATH`` is therefore led by this interpreter's ``bin`` folder, so every
  process runs in this environment; the apps import from it (runtime installation of app
  dependencies with ``uv sync`` is turned off). The SuperLink starts its SuperExec in a
  session of its own, out of reach of a process-group kill, so :meth:`FlowerCluster.stop`
  also kills every descendant it found under each process.
* Configuration. ``flwr`` reads SuperLink connections from ``$FLWR_HOME/config.toml``
  (``[superlink.NAME]`` with ``address`` and ``insecure``), not from the app's
  ``pyproject.toml`` (a ``[tool.flwr.federations]`` section there is migrated into the
  user's Flower home and commented out by ``flwr run``). Every process gets a
  ``FLWR_HOME`` inside the work directory, so nothing is written into ``~/.flwr``;
  telemetry and the update check (network calls) are off.
* Completion. ``flwr run`` only submits the run; ``flwr log RUN_ID --stream`` returns when
  the run has finished, and ``flwr ls --run-id RUN_ID`` gives its status
  (``finished:completed``, ``finished:failed`` or ``finished:stopped``) and details.
* Configs. A SuperNode's ``--node-config`` reaches ClientApps as ``context.node_config``;
  ``flwr run --run-config`` overrides keys of the app's ``[tool.flwr.app.config]`` and
  reaches both apps as ``context.run_config``. Values are TOML (strings are quoted).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from fedchain.errors import FedchainError

__all__ = [
    "ConfigValue",
    "FlowerCluster",
    "FlowerClusterError",
    "NodeSpec",
    "RunResult",
    "config_args",
    "format_config_value",
    "free_port",
    "partition_nodes",
    "run_simulation",
]

log = logging.getLogger(__name__)

#: A value of a node config or run config: what TOML and Flower's ``UserConfig`` hold.
ConfigValue = bool | int | float | str

#: The name of the SuperLink connection written into the cluster's ``$FLWR_HOME/config.toml``.
CONNECTION = "cluster"
#: Run statuses (``flwr ls``): the one that means success, and the prefix of every final one.
COMPLETED = "finished:completed"
FINISHED = "finished"
#: Lines of a process log quoted in an error.
TAIL_LINES = 40
#: Tries at a free port before giving up (another process may take a port between pick and bind).
PORT_TRIES = 3
#: Seconds one ``flwr`` command (other than the log stream) may take.
CLI_TIMEOUT_S = 60.0
_POLL_S = 0.2
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_NODE_ID = re.compile(r"SuperNode ID: (\d+)")
_PORT_IN_USE = ("address already in use", "error while attempting to bind")
#: Environment variables that would switch Flower's servers to their legacy gRPC APIs on fixed ports.
_DROPPED_ENV = ("FLWR_INTERNAL_GRPC_CONTROL_API", "FLWR_INTERNAL_GRPC_FLEET_API", "FLWR_HOME")


class FlowerClusterError(FedchainError):
    """A Flower SuperLink, SuperNode or run could not be started, or did not finish in time."""

    hint = (
        "read the process logs named above (in the cluster's work directory); "
        "install Flower with `pip install 'fedchain[flower]'` if its commands are missing"
    )


@dataclass(frozen=True)
class NodeSpec:
    """One SuperNode: its node config (``--node-config``) and extra environment variables.

    ``env`` reaches the SuperNode and, through it, every ClientApp process it starts (a
    client's wallet key, for example). ``config`` reaches ClientApps as ``context.node_config``.
    """

    config: Mapping[str, ConfigValue] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RunResult:
    """How a run ended: its final status, Flower's details and the ServerApp's log."""

    run_id: int
    #: ``finished:completed``, ``finished:failed`` or ``finished:stopped``.
    status: str
    #: Flower's explanation of a failure (``N/A`` when there is none).
    details: str
    #: The run's log (the ServerApp's output, as ``flwr log`` streams it), colour codes removed.
    log: str
    #: Where the log was written, colour codes kept.
    log_path: Path

    @property
    def succeeded(self) -> bool:
        """Whether the run completed (the ServerApp returned without raising)."""
        return self.status == COMPLETED

    @property
    def returncode(self) -> int:
        """0 for a completed run, 1 for any other ending: an exit status for the caller."""
        return 0 if self.succeeded else 1


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def format_config_value(key: str, value: ConfigValue) -> str:
    """``value`` as the TOML literal Flower's ``key=value`` parser reads back to the same value.

    Flower splits ``--node-config``/``--run-config`` on whitespace outside quotes and
    does not read escapes inside them, so a string may hold neither quote nor a line break.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise FlowerClusterError(f"config value {key}={value!r} is not finite", hint="pass a finite number")
        return repr(value)
    if isinstance(value, str):
        if any(c in value for c in "\"'\n\r\\"):
            raise FlowerClusterError(
                f"config value {key}={value!r} holds a quote, a backslash or a line break",
                hint="Flower's key=value parser cannot carry these; pass such data in a file and its path here",
            )
        return f'"{value}"'
    raise FlowerClusterError(
        f"config value {key}={value!r} is a {type(value).__name__}", hint="use a bool, int, float or str"
    )


def config_args(values: Mapping[str, ConfigValue]) -> str:
    """A config mapping as Flower's ``k1=v1 k2=v2`` string (``--node-config``, ``--run-config``)."""
    for key in values:
        if not key or any(c.isspace() or c in "=\"'" for c in key):
            raise FlowerClusterError(f"config key {key!r} is empty or holds a space, '=' or a quote")
    return " ".join(f"{key}={format_config_value(key, value)}" for key, value in values.items())


def partition_nodes(count: int, envs: Sequence[Mapping[str, str]] | None = None) -> list[NodeSpec]:
    """``count`` SuperNodes with node configs ``partition-id=i num-partitions=count``.

    ``envs``, if given, holds one mapping of extra environment variables per node.
    """
    if count < 1:
        raise FlowerClusterError(f"a cluster needs at least one SuperNode, not {count}")
    if envs is not None and len(envs) != count:
        raise FlowerClusterError(f"{len(envs)} environments given for {count} SuperNodes")
    return [
        NodeSpec(
            config={"partition-id": index, "num-partitions": count},
            env=dict(envs[index]) if envs is not None else {},
        )
        for index in range(count)
    ]


def _executable(name: str) -> Path:
    """Flower's command ``name``: beside this interpreter (its virtualenv), else on ``PATH``."""
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which(name)
    if found is None:
        raise FlowerClusterError(
            f"Flower's `{name}` command is not installed (looked beside {sys.executable} and on PATH)"
        )
    return Path(found)


def _tail(path: Path, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file, colour codes removed ('' if it cannot be read)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(_ANSI.sub("", text).splitlines()[-lines:])


@dataclass(frozen=True)
class _ProcInfo:
    """What ``/proc/PID/stat`` says of a process."""

    ppid: int
    pgrp: int
    state: str
    start_time: int

    @property
    def zombie(self) -> bool:
        return self.state in ("Z", "X")


def _proc_info(pid: int) -> _ProcInfo | None:
    """A process's ``/proc`` entry; None when it is gone, unreadable, or there is no ``/proc``."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after the last ')'.
    fields = raw[raw.rfind(")") + 2 :].split()
    try:
        return _ProcInfo(ppid=int(fields[1]), pgrp=int(fields[2]), state=fields[0], start_time=int(fields[19]))
    except (IndexError, ValueError):
        return None


def _proc_table() -> dict[int, _ProcInfo]:
    """Every process in ``/proc`` (empty where there is no ``/proc``)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return {}
    table = {}
    for entry in entries:
        if entry.isdigit() and (info := _proc_info(int(entry))) is not None:
            table[int(entry)] = info
    return table


def _descendants(root: int, table: Mapping[int, _ProcInfo]) -> list[tuple[int, _ProcInfo]]:
    """Every process below ``root`` in ``table``."""
    children: dict[int, list[int]] = {}
    for pid, info in table.items():
        children.setdefault(info.ppid, []).append(pid)
    found: list[tuple[int, _ProcInfo]] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append((child, table[child]))
            stack.append(child)
    return found


def _alive(pid: int, start_time: int) -> bool:
    """Whether the process ``pid`` that started at ``start_time`` still runs (a zombie does not)."""
    info = _proc_info(pid)
    return info is not None and info.start_time == start_time and not info.zombie


def _group_alive(pgrp: int) -> bool:
    """Whether a process group has a member that is not a zombie."""
    if not Path("/proc").is_dir():
        try:
            os.killpg(pgrp, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    return any(info.pgrp == pgrp and not info.zombie for info in _proc_table().values())


@dataclass(frozen=True)
class _Launch:
    """How to start one Flower process: a name for messages, its command for a port, environment and log."""

    name: str
    command: Callable[[int], list[str]]
    env: Mapping[str, str]
    log_path: Path


class _Process:
    """One started Flower process: its command, its log file and its ``Popen``."""

    def __init__(self, name: str, command: list[str], env: Mapping[str, str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        log.debug("starting %s: %s", name, " ".join(command))
        self._log_file: IO[bytes] = log_path.open("ab")
        try:
            self.popen = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                env=dict(env),
                start_new_session=True,  # its own process group, killed as one
            )
        except OSError as err:
            self._log_file.close()
            raise FlowerClusterError(f"cannot start {name} ({command[0]}): {err}") from err

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None

    def tail(self) -> str:
        return _tail(self.log_path)

    def port_taken(self) -> bool:
        """Whether it exited because its port was taken (worth a retry on another port)."""
        text = self.tail().lower()
        return not self.running() and any(marker in text for marker in _PORT_IN_USE)

    def died(self, what: str) -> FlowerClusterError:
        return FlowerClusterError(
            f"{self.name} exited with status {self.popen.returncode} {what}; "
            f"the end of its log ({self.log_path}):\n{self.tail()}"
        )

    def close(self) -> None:
        if self.popen.poll() is None:
            self.popen.wait()
        self._log_file.close()


class FlowerCluster:
    """A SuperLink and SuperNodes on loopback; use as a context manager or call :meth:`start`/:meth:`stop`.

    ``work_dir`` receives one log per process (``superlink.log``, ``supernode-0.log``...),
    one per run (``run-RUN_ID.log``) and the Flower homes (``flwr-home/``). ``env`` is added
    to every process's environment, each node's :attr:`NodeSpec.env` to its own, and ``superlink_env``
    to the SuperLink's (which its ServerApps inherit: the aggregator's key, never seen by a SuperNode).
    """

    def __init__(
        self,
        work_dir: str | os.PathLike[str],
        nodes: Sequence[NodeSpec],
        *,
        env: Mapping[str, str] | None = None,
        superlink_env: Mapping[str, str] | None = None,
        startup_timeout_s: float = 60.0,
        stop_timeout_s: float = 10.0,
        host: str = "127.0.0.1",
    ) -> None:
        if not nodes:
            raise FlowerClusterError("a cluster needs at least one SuperNode")
        self.work_dir = Path(work_dir).resolve()
        self.nodes = list(nodes)
        self.env = dict(env or {})
        self.superlink_env = dict(superlink_env or {})
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.host = host
        self.superlink_port = 0
        self.supernode_ports: list[int] = []
        #: Flower's node id of each SuperNode, in the order of ``nodes`` (known once started).
        self.node_ids: list[int] = []
        self._superlink: _Process | None = None
        self._supernodes: list[_Process] = []
        #: Every process started, the ones that failed to start included: what stop() stops.
        self._processes: list[_Process] = []
        self._bin_dir = _executable("flower-superlink").parent
        self._home = self.work_dir / "flwr-home"

    # -- life cycle ------------------------------------------------------------------

    def __enter__(self) -> FlowerCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def superlink_address(self) -> str:
        """``host:port`` of the SuperLink's HTTP APIs (Fleet, Control and Runtime)."""
        return f"{self.host}:{self.superlink_port}"

    @property
    def running(self) -> bool:
        """Whether the SuperLink and every SuperNode still run."""
        processes = [self._superlink, *self._supernodes]
        return self._superlink is not None and all(p is not None and p.running() for p in processes)

    def start(self) -> FlowerCluster:
        """Start the SuperLink and the SuperNodes; return once every SuperNode is online.

        Raises :class:`FlowerClusterError` (after stopping whatever started) when a process
        exits or the cluster is not up within ``startup_timeout_s``.
        """
        if self._superlink is not None:
            raise FlowerClusterError("this cluster is already started")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.startup_timeout_s
        began = time.monotonic()
        try:
            self._start_superlink(deadline)
            self._write_connection()
            self._start_supernodes(deadline)
            self._wait_for_nodes(deadline)
        except BaseException:
            self.stop()
            raise
        log.info(
            "Flower cluster up in %.1f s: SuperLink on %s, %d SuperNodes (node ids %s)",
            time.monotonic() - began,
            self.superlink_address,
            len(self.nodes),
            ", ".join(map(str, self.node_ids)),
        )
        return self

    def stop(self) -> None:
        """Stop every process (SIGTERM, then SIGKILL after ``stop_timeout_s``), Flower's own children included.

        Safe to call more than once, and on a cluster that failed to start.
        """
        processes = self._processes[::-1]  # the SuperNodes before the SuperLink
        self._processes, self._supernodes, self._superlink = [], [], None
        if not processes:
            return
        # Collect descendants first: once a parent is gone, its children no longer hang below it.
        table = _proc_table()
        groups = {process.pid for process in processes}
        outside = [
            (pid, info.start_time)
            for process in processes
            for pid, info in _descendants(process.pid, table)
            if info.pgrp not in groups
        ]
        self._signal(processes, outside, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout_s
        while time.monotonic() < deadline and self._any_alive(processes, outside):
            time.sleep(_POLL_S)
        if self._any_alive(processes, outside):
            log.warning("Flower processes still running %.0f s after SIGTERM; killing them", self.stop_timeout_s)
            self._signal(processes, outside, signal.SIGKILL)
        for process in processes:
            process.close()
        log.debug("Flower cluster stopped (%d processes, %d outside their groups)", len(processes), len(outside))

    @staticmethod
    def _signal(processes: Iterable[_Process], outside: Iterable[tuple[int, int]], sig: signal.Signals) -> None:
        for process in processes:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)  # the process group: SuperExec and app processes started inside it
        for pid, start_time in outside:
            if _alive(pid, start_time):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)

    @staticmethod
    def _any_alive(processes: Iterable[_Process], outside: Iterable[tuple[int, int]]) -> bool:
        if any(process.running() for process in processes):
            return True
        if any(_alive(pid, start_time) for pid, start_time in outside):
            return True
        return any(_group_alive(process.pid) for process in processes)  # members whose leader has gone

    # -- processes ---------------------------------------------------------------------

    def _environment(self, home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if key not in _DROPPED_ENV}
        env.update(self.env)
        env["PATH"] = os.pathsep.join([str(self._bin_dir), env.get("PATH", "")])
        home.mkdir(parents=True, exist_ok=True)
        env["FLWR_HOME"] = str(home)
        env["FLWR_TELEMETRY_ENABLED"] = "0"
        env["FLWR_DISABLE_UPDATE_CHECK"] = "1"
        env["PYTHONUNBUFFERED"] = "1"
        env.update(extra or {})
        return env

    def _spawn(self, launches: Sequence[_Launch], deadline: float) -> list[tuple[_Process, int]]:
        """Start every launch on a free port, all at once; return once each answers ``GET /health``.

        A process that exits because its port was taken meanwhile is started again on another port.
        """
        started: list[tuple[_Process, int]] = []
        attempts = [1] * len(launches)
        for launch in launches:
            started.append(self._launch(launch))
        pending = set(range(len(launches)))
        while pending:
            for index in sorted(pending):
                launch, (process, port) = launches[index], started[index]
                if not process.running():
                    if process.port_taken() and attempts[index] < PORT_TRIES:
                        log.warning("%s: port %d was taken; retrying on another", launch.name, port)
                        attempts[index] += 1
                        started[index] = self._launch(launch)
                        continue
                    raise process.died("while starting")
                if self._healthy(port):
                    pending.discard(index)
            if pending and time.monotonic() > deadline:
                index = min(pending)
                raise FlowerClusterError(
                    f"{launches[index].name} did not answer within {self.startup_timeout_s:.0f} s; "
                    f"the end of its log ({launches[index].log_path}):\n{started[index][0].tail()}"
                )
            if pending:
                time.sleep(_POLL_S)
        return started

    def _launch(self, launch: _Launch) -> tuple[_Process, int]:
        port = free_port(self.host)
        process = _Process(launch.name, launch.command(port), launch.env, launch.log_path)
        self._processes.append(process)
        return process, port

    def _start_superlink(self, deadline: float) -> None:
        superlink = str(_executable("flower-superlink"))

        def command(port: int) -> list[str]:
            return [
                superlink,
                "--insecure",
                "--host",
                self.host,
                "--port",
                str(port),
                "--isolation",
                "subprocess",
                "--disable-runtime-dependency-installation",
            ]

        launch = _Launch(
            "SuperLink",
            command,
            self._environment(self._home / "superlink", self.superlink_env),
            self.work_dir / "superlink.log",
        )
        [(self._superlink, self.superlink_port)] = self._spawn([launch], deadline)

    def _start_supernodes(self, deadline: float) -> None:
        """Start every SuperNode at once; return when each one's HTTP API answers (not yet registered)."""
        supernode = str(_executable("flower-supernode"))

        def launch(index: int, spec: NodeSpec) -> _Launch:
            node_config = config_args(spec.config)

            def command(port: int) -> list[str]:
                cmd = [
                    supernode,
                    "--insecure",
                    "--superlink",
                    self.superlink_address,
                    "--host",
                    self.host,
                    "--port",
                    str(port),
                    "--isolation",
                    "subprocess",
                ]
                return [*cmd, "--node-config", node_config] if node_config else cmd

            home = self._home / f"supernode-{index}"
            log_path = self.work_dir / f"supernode-{index}.log"
            return _Launch(f"SuperNode {index}", command, self._environment(home, spec.env), log_path)

        started = self._spawn([launch(index, spec) for index, spec in enumerate(self.nodes)], deadline)
        self._supernodes = [process for process, _ in started]
        self.supernode_ports = [port for _, port in started]

    def _healthy(self, port: int) -> bool:
        """Whether the HTTP API on ``port`` answers ``GET /health``."""
        try:
            with urllib.request.urlopen(f"http://{self.host}:{port}/health", timeout=1.0) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def _wait_for_nodes(self, deadline: float) -> None:
        """Wait until each SuperNode has logged its node id and the SuperLink lists all of them online."""
        ids: list[int | None] = [None] * len(self._supernodes)
        while True:
            self._check_alive("while starting")
            for index, process in enumerate(self._supernodes):
                if ids[index] is None and (found := _NODE_ID.search(_tail(process.log_path, 400))):
                    ids[index] = int(found.group(1))
            if all(node_id is not None for node_id in ids):
                online = self._online_nodes()
                if all(node_id in online for node_id in ids):
                    self.node_ids = [node_id for node_id in ids if node_id is not None]
                    return
            if time.monotonic() > deadline:
                waiting = [str(i) for i, node_id in enumerate(ids) if node_id is None]
                raise FlowerClusterError(
                    f"SuperNodes {', '.join(waiting) or '(all registered, not all online)'} did not come online "
                    f"within {self.startup_timeout_s:.0f} s; the end of the SuperLink's log "
                    f"({self.work_dir / 'superlink.log'}):\n{_tail(self.work_dir / 'superlink.log')}"
                )
            time.sleep(_POLL_S * 2)

    def _online_nodes(self) -> set[int]:
        """Node ids the SuperLink lists as online (``flwr supernode ls``)."""
        listing = self._flwr_json(["supernode", "ls", CONNECTION, "--format", "json"])
        nodes = listing.get("nodes")
        if not isinstance(nodes, list):
            raise FlowerClusterError(f"`flwr supernode ls` answered no list of nodes: {listing}")
        return {int(node["node-id"]) for node in nodes if node.get("status") == "online"}

    def _check_alive(self, what: str) -> None:
        for process in [self._superlink, *self._supernodes]:
            if process is not None and not process.running():
                raise process.died(what)

    # -- the flwr command line ---------------------------------------------------------

    def _write_connection(self) -> None:
        """``$FLWR_HOME/config.toml`` for the ``flwr`` command: one insecure connection, the default."""
        home = self._home / "cli"
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(
            f'[superlink]\ndefault = "{CONNECTION}"\n\n'
            f'[superlink.{CONNECTION}]\naddress = "{self.superlink_address}"\ninsecure = true\n',
            encoding="utf-8",
        )

    def flwr_command(self, args: Sequence[str]) -> tuple[list[str], dict[str, str]]:
        """The command line and environment that run ``flwr ARGS`` against this cluster.

        The connection is named ``cluster`` (:data:`CONNECTION`) and is also the default.
        """
        return [str(_executable("flwr")), *args], self._environment(self._home / "cli")

    def flwr(self, args: Sequence[str], timeout_s: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        """Run ``flwr ARGS`` against this cluster; raise :class:`FlowerClusterError` if it fails."""
        command, env = self.flwr_command(args)
        try:
            done = subprocess.run(
                command,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as err:
            raise FlowerClusterError(f"`flwr {' '.join(args)}` did not return within {timeout_s:.0f} s") from err
        if done.returncode != 0:
            output = _ANSI.sub("", (done.stdout or "") + (done.stderr or "")).strip()
            raise FlowerClusterError(f"`flwr {' '.join(args)}` failed with status {done.returncode}:\n{output}")
        return done

    def _flwr_json(self, args: Sequence[str]) -> dict[str, Any]:
        """Run a ``flwr ... --format json`` command and return its JSON answer (checked for success)."""
        stdout = self.flwr(args).stdout
        start = stdout.find("{")
        try:
            answer = json.loads(stdout[start:]) if start >= 0 else None
        except json.JSONDecodeError:
            answer = None
        if not isinstance(answer, dict):
            raise FlowerClusterError(f"`flwr {' '.join(args)}` did not answer JSON:\n{_ANSI.sub('', stdout)}")
        if not answer.get("success", False):
            raise FlowerClusterError(
                f"`flwr {' '.join(args)}` failed: {answer.get('error-message', answer)}",
            )
        return answer

    # -- runs ----------------------------------------------------------------------------

    def submit(self, app_dir: str | os.PathLike[str], run_config: Mapping[str, ConfigValue] | None = None) -> int:
        """Submit the Flower app in ``app_dir`` (``flwr run``) and return its run id; does not wait."""
        if self._superlink is None:
            raise FlowerClusterError("the cluster is not started")
        app = Path(app_dir).resolve()
        if not (app / "pyproject.toml").is_file():
            raise FlowerClusterError(f"{app} is not a Flower app (no pyproject.toml)")
        args = ["run", str(app), CONNECTION, "--format", "json"]
        if run_config:
            args += ["--run-config", config_args(run_config)]
        answer = self._flwr_json(args)
        run_id = int(str(answer["run-id"]))
        log.info("submitted run %d of %s", run_id, app)
        return run_id

    def wait(self, run_id: int, timeout_s: float = 600.0) -> RunResult:
        """Wait until run ``run_id`` has finished; return its status and log.

        Raises :class:`FlowerClusterError` when the SuperLink exits or the run is not
        finished within ``timeout_s`` (the run is then asked to stop).
        """
        log_path = self.work_dir / f"run-{run_id}.log"
        command, env = self.flwr_command(["log", str(run_id), CONNECTION, "--stream"])
        deadline = time.monotonic() + timeout_s
        with log_path.open("wb") as out:
            stream = subprocess.Popen(
                command, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
            try:
                while stream.poll() is None:
                    if self._superlink is None:
                        raise FlowerClusterError(f"the cluster was stopped during run {run_id}")
                    if not self._superlink.running():
                        raise self._superlink.died(f"during run {run_id}")
                    for index, node in enumerate(self._supernodes):
                        if not node.running():
                            log.warning("SuperNode %d exited during run %d (see %s)", index, run_id, node.log_path)
                    if time.monotonic() > deadline:
                        self._stop_run(run_id)
                        raise FlowerClusterError(
                            f"run {run_id} did not finish within {timeout_s:.0f} s; "
                            f"the end of its log ({log_path}):\n{_tail(log_path)}"
                        )
                    time.sleep(_POLL_S)
            finally:
                if stream.poll() is None:
                    os.killpg(stream.pid, signal.SIGKILL)
                stream.wait()
        status, details = self._status(run_id)
        while not status.startswith(FINISHED):  # the stream ended early (it should not): poll the status
            if time.monotonic() > deadline:
                raise FlowerClusterError(f"run {run_id} is still {status} after {timeout_s:.0f} s")
            time.sleep(1.0)
            status, details = self._status(run_id)
        text = _ANSI.sub("", log_path.read_text(encoding="utf-8", errors="replace"))
        log.info("run %d: %s%s", run_id, status, "" if status == COMPLETED else f" ({details})")
        return RunResult(run_id=run_id, status=status, details=details, log=text, log_path=log_path)

    def run(
        self,
        app_dir: str | os.PathLike[str],
        run_config: Mapping[str, ConfigValue] | None = None,
        *,
        timeout_s: float = 600.0,
    ) -> RunResult:
        """Run the Flower app in ``app_dir`` with ``run_config`` overrides and wait until it has finished."""
        return self.wait(self.submit(app_dir, run_config), timeout_s=timeout_s)

    def _status(self, run_id: int) -> tuple[str, str]:
        answer = self._flwr_json(["ls", CONNECTION, "--run-id", str(run_id), "--format", "json"])
        runs = answer.get("runs")
        if not isinstance(runs, list) or not runs or not isinstance(runs[0], dict):
            raise FlowerClusterError(f"`flwr ls` does not know run {run_id}: {answer}")
        return str(runs[0].get("status", "")), str(runs[0].get("status-details", ""))

    def _stop_run(self, run_id: int) -> None:
        try:
            self.flwr(["stop", str(run_id), CONNECTION])
        except FlowerClusterError as err:
            log.warning("could not stop run %d: %s", run_id, err)


# -- Flower's simulation engine ----------------------------------------------------------------

#: The local connection ``flwr run`` starts a simulation SuperLink for (in the run's own ``FLWR_HOME``).
SIMULATION_CONNECTION = "local"
#: The fixed port of the local simulation SuperLink that ``flwr run`` starts.
LOCAL_SUPERLINK_PORT = 39091


def run_simulation(
    app_dir: str | os.PathLike[str],
    work_dir: str | os.PathLike[str],
    num_supernodes: int,
    run_config: Mapping[str, ConfigValue] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 900.0,
) -> RunResult:
    """Run the app in ``app_dir`` in Flower's simulation engine (Ray) with ``num_supernodes`` virtual nodes.

    ``flwr run`` starts a local simulation SuperLink of its own; it is given a ``FLWR_HOME`` in ``work_dir``
    (nothing is written into ``~/.flwr``), runs the apps in this environment (no ``uv sync``) and is stopped
    when the run has finished. ``env`` reaches the ServerApp and every virtual ClientApp: they share one
    process environment, unlike a deployment's SuperNodes.
    """
    try:
        import ray  # noqa: F401  (the simulation engine's only backend)
    except ImportError as err:
        raise FlowerClusterError(
            f"Flower's simulation needs Ray, which this environment lacks ({err})",
            hint="run it from `make bench-flower`'s .venv-flower, or pip install 'flwr[simulation]==1.42.0'",
        ) from err
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        taken = probe.connect_ex(("127.0.0.1", LOCAL_SUPERLINK_PORT)) == 0
    if taken:  # flwr would hand the run to that SuperLink, with its environment, not this run's
        raise FlowerClusterError(
            f"a local Flower SuperLink already listens on 127.0.0.1:{LOCAL_SUPERLINK_PORT} (flwr's local simulation)",
            hint="stop it (pkill -f 'flower-superlink.*--simulation') and run again",
        )
    work = Path(work_dir).resolve()
    home = work / "flwr-home-simulation"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'[superlink]\ndefault = "{SIMULATION_CONNECTION}"\n\n[superlink.{SIMULATION_CONNECTION}]\n'
        f"options.num-supernodes = {num_supernodes}\n",
        encoding="utf-8",
    )
    variables = {key: value for key, value in os.environ.items() if key not in _DROPPED_ENV}
    variables.update(env or {})
    variables.update(
        PATH=os.pathsep.join([str(_executable("flwr").parent), variables.get("PATH", "")]),
        FLWR_HOME=str(home),
        FLWR_TELEMETRY_ENABLED="0",
        FLWR_DISABLE_UPDATE_CHECK="1",
        FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION="1",
        PYTHONUNBUFFERED="1",
    )
    args = [str(_executable("flwr")), "run", str(Path(app_dir).resolve()), SIMULATION_CONNECTION, "--stream"]
    if run_config:
        args += ["--run-config", config_args(run_config)]
    log_path = work / "simulation.log"
    try:
        with log_path.open("wb") as out:
            subprocess.run(
                args, env=variables, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, timeout=timeout_s
            )
        text = _ANSI.sub("", log_path.read_text(encoding="utf-8", errors="replace"))
        found = re.search(r"Successfully started run (\d+)", text)
        if found is None:
            raise FlowerClusterError(f"`flwr run` started no simulation; the end of its log:\n{_tail(log_path)}")
        run_id = int(found.group(1))
        listed = subprocess.run(
            [str(_executable("flwr")), "ls", SIMULATION_CONNECTION, "--run-id", str(run_id), "--format", "json"],
            env=variables,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
            check=False,
        )
        start = listed.stdout.find("{")
        runs = json.loads(listed.stdout[start:]).get("runs", []) if start >= 0 else []
        status = str(runs[0].get("status", "")) if runs else "unknown"
        details = str(runs[0].get("status-details", "")) if runs else listed.stdout + listed.stderr
    except subprocess.TimeoutExpired as err:
        raise FlowerClusterError(f"the simulation did not finish within {timeout_s:.0f} s (log: {log_path})") from err
    finally:
        _stop_home_processes(home)
    return RunResult(run_id=run_id, status=status, details=details, log=text, log_path=log_path)


def _stop_home_processes(home: Path) -> None:
    """Kill the processes whose ``FLWR_HOME`` is ``home``: the local SuperLink ``flwr run`` left detached, its
    simulation process and their children."""
    marker = f"FLWR_HOME={home}".encode()
    table = _proc_table()
    doomed = []
    for pid in table:
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0") and pid != os.getpid():
            doomed.append((pid, table[pid].start_time))
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid, start_time in doomed:
            if _alive(pid, start_time):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and any(_alive(pid, t) for pid, t in doomed):
            time.sleep(_POLL_S)
